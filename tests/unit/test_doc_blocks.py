"""Every python and bash block of the README and the docs either runs in the tests
(tests/e2e/test_docs_code.py) or says why not, in the block, where a reader sees it; and the
Python ones are valid as written (no top-level await, no placeholder that is not Python)."""

from __future__ import annotations

import ast

import pytest

from tests.support.doc_blocks import ROOT, RUN_ELSEWHERE, Block, blocks, pages, runnable

ALL = [b for p in pages() for b in blocks(p)]


def test_the_readme_and_the_docs_have_blocks_that_run() -> None:
    readme = [b for b in ALL if b.page == "README.md"]
    assert any(b.why_not_run is None and b.language == "python" for b in readme)
    assert any(b.why_not_run is None and b.language == "bash" for b in readme)
    assert sum(len(runnable(p)) for p in pages()) >= 8


@pytest.mark.parametrize("block", [b for b in ALL if b.why_not_run is not None], ids=lambda b: b.id)
def test_a_block_that_does_not_run_says_why(block: Block) -> None:
    assert len(block.why_not_run or "") >= 10, f"{block.id}: say why it is not run"


@pytest.mark.parametrize("block", [b for b in ALL if b.language == "python"], ids=lambda b: b.id)
def test_python_blocks_parse_as_written(block: Block) -> None:
    if block.why_not_run is None:
        ast.parse(block.code, filename=block.id)  # top-level await is a SyntaxError here


def test_pages_run_elsewhere_name_a_test_that_exists() -> None:
    for page, test in RUN_ELSEWHERE.items():
        if (ROOT / page).exists():
            assert (ROOT / test).exists(), f"{page}: its blocks are said to run in {test}"
