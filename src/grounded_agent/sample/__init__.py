"""The sample knowledge base (Lumenary, a fictional software company) and the demo's questions,
shipped inside the package so `grounded-agent demo` works from an installed wheel as well as
from a checkout."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

_HERE = files(__name__)

SAMPLE_KB = Path(str(_HERE / "kb"))
"""Folder of the sample documents: Markdown, one PDF and one Word file, with sidecars."""

SAMPLE_QUESTIONS = Path(str(_HERE / "questions.txt"))
"""Lines "expected status | question"; see `cli.parse_demo_questions`."""
