"""The fenced code blocks of the README and the docs pages: which run in the tests, which say why not.

A block in python or bash runs in the tests (tests/e2e/test_docs_code.py) unless its first line is
a visible marker, `# not run by the tests: <why>` (any case), or its page's blocks are run by
another test (RUN_ELSEWHERE: the bring-your-own guides run in one namespace per page, with the
databases they need). Blocks in other languages (mermaid, text, json, output) are pictures or
data, not code to run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUNNABLE_LANGUAGES = ("python", "bash")
MARKER = re.compile(r"^# not run by the tests(?::| as written:)\s*(?P<why>.*)$", re.I)
RUN_ELSEWHERE = {
    f"docs/how-to/{page}": "tests/integration/test_howtos.py"
    for page in ("your-vector-store.md", "your-retriever.md", "langchain-postgres-table.md",
                 "your-model.md", "agent-in-your-graph.md")
}
"""Pages whose blocks another test runs, and that test."""
FENCE = re.compile(r"^```(?P<lang>[\w+-]*)[^\n]*\n(?P<body>.*?)^```[ \t]*$", re.M | re.S)


@dataclass(frozen=True)
class Block:
    page: str
    line: int
    language: str
    code: str

    @property
    def why_not_run(self) -> str | None:
        """The marker's reason, or None for a block that runs."""
        first = self.code.splitlines()[0] if self.code.strip() else ""
        m = MARKER.match(first)
        return m.group("why").strip() if m else None

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def blocks(path: Path) -> list[Block]:
    text = path.read_text(encoding="utf-8")
    out = []
    for m in FENCE.finditer(text):
        lang = m.group("lang").lower()
        if lang in RUNNABLE_LANGUAGES:
            out.append(Block(str(path.relative_to(ROOT)), text.count("\n", 0, m.start()) + 1,
                             lang, m.group("body")))
    return out


def runnable(path: Path) -> list[Block]:
    """The blocks tests/e2e/test_docs_code.py runs (none of a page another test runs)."""
    if str(path.relative_to(ROOT)) in RUN_ELSEWHERE:
        return []
    return [b for b in blocks(path) if b.why_not_run is None]
