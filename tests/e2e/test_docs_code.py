"""The code blocks of the README and the docs run as written, offline, in a fresh data home.

Each page's runnable blocks (tests/support/doc_blocks.py) run in order, as a reader would paste
them, in a folder holding `my_docs/` (the placeholder the pages name) with two small documents;
bash blocks through bash with `grounded-agent` on the PATH, Python blocks in a child interpreter.
Every block must exit 0; the README's flow is checked for what it promises (the demo leaves the
user's knowledge base as it was, `docs remove --all` empties it)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.conftest import TINY_KB, child_env
from tests.support.doc_blocks import ROOT, pages, runnable

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

HANDBOOK = """---
doc_id: handbook
title: Employee handbook
document_date: 2026-02-01
---
# Employee handbook

## Annual leave
Employees get 28 days of annual leave per year, including public holidays.
"""

PAGES = [p for p in pages() if runnable(p)]


def _run(block_language: str, code: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    argv = ["bash", "-e", "-c", code] if block_language == "bash" else [sys.executable, "-c", code]
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=600,
                          check=False)


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_page_blocks_run_as_written(page: Path, tmp_path: Path) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    (work / "my_docs").mkdir(parents=True)
    (work / "my_docs" / "handbook.md").write_text(HANDBOOK, encoding="utf-8")
    (work / "my_docs" / "pricing.md").write_text(TINY_KB, encoding="utf-8")
    env = child_env(home)
    env.pop("GROUNDED_AGENT_KB_TABLE", None)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")])
    outputs: list[str] = []
    try:
        for block in runnable(page):
            done = _run(block.language, block.code, work, env)
            assert done.returncode == 0, (block.id, done.stdout[-1500:], done.stderr[-1500:])
            outputs.append(done.stdout)
    finally:
        subprocess.run(["grounded-agent", "db", "stop"], env=env, cwd=work, capture_output=True,
                       timeout=120, check=False)
    text = "\n".join(outputs)
    if page.name == "README.md":
        assert "Differing from the expected case" in text  # the demo ran to its end
        lines = text.splitlines()
        start = next(i for i, line in enumerate(lines) if line.startswith("DOCUMENT"))
        rows = []  # docs list, after the demo: its rows follow the header
        for line in lines[start + 1 :]:
            if " chunk" not in line:
                break
            rows.append(line)
        ids = {row.split()[0] for row in rows}
        assert ids == {"handbook", "tiny-pricing"}, ids  # none of the demo's documents
        assert "29 euros" in text  # the Pro plan question answered from my_docs/
        assert "removed handbook" in text and "removed tiny-pricing" in text
    if page.name == "your-documents.md":
        assert "28 days" in text
