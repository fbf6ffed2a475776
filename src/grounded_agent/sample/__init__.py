"""The sample knowledge base (Lumenary, a fictional software company), the demo's questions and a
small evaluation set on it, shipped inside the package so `grounded-agent demo` and notebook 03
work from an installed wheel as well as from a checkout."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

_HERE = files(__name__)

SAMPLE_KB = Path(str(_HERE / "kb"))
"""Folder of the sample documents: Markdown, one PDF and one Word file, with sidecars."""

SAMPLE_QUESTIONS = Path(str(_HERE / "questions.txt"))
"""Lines "expected status | question"; see `cli.parse_demo_questions`."""

SAMPLE_EVAL_QUESTIONS = Path(str(_HERE / "eval_questions.jsonl"))
"""Questions on the sample knowledge base in the evaluation's JSON Lines format (id, question,
kind, answers, gold_doc_id, optional gold_version, note; as `benchmarks/kbs/*/questions.jsonl`):
28 answerable, 10 on its topics that it does not answer, 10 off its topics."""
