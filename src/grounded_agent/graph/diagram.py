"""The README's graph picture, generated from the compiled graph so the two cannot drift.

`python -m grounded_agent.graph.diagram README.md` rewrites the block between the markers.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

START, END = "<!-- graph:start -->", "<!-- graph:end -->"


def mermaid() -> str:
    from grounded_agent.graph.builder import build_graph

    graph = build_graph(chat_model=None, tools={})
    return graph.get_graph().draw_mermaid().strip()


def block() -> str:
    return f"{START}\n```mermaid\n{mermaid()}\n```\n{END}"


def update(path: Path) -> bool:
    """Rewrites the diagram block; True when the file changed."""
    text = path.read_text(encoding="utf-8")
    new = re.sub(re.escape(START) + r".*?" + re.escape(END), lambda _: block(), text, flags=re.S)
    if new != text:
        path.write_text(new, encoding="utf-8")
    return new != text


if __name__ == "__main__":
    target = Path(sys.argv[1] if len(sys.argv) > 1 else "README.md")
    print("updated" if update(target) else "unchanged", target)
