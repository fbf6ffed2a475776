"""The fenced code blocks of the README and the docs pages: which run in the tests, which say why not.

A block in python or bash runs in the tests (tests/e2e/test_docs_code.py) unless its first line is
a visible marker, `# not run by the tests: <why>`. Blocks in other languages (mermaid, text, json,
output) are pictures or data, not code to run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUNNABLE_LANGUAGES = ("python", "bash")
MARKER = re.compile(r"^# not run by the tests(?::| as written:)\s*(?P<why>.*)$")
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
    return [b for b in blocks(path) if b.why_not_run is None]
