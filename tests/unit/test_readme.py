"""The README shows the graph as it is built and names the two set-up commands."""

from __future__ import annotations

from pathlib import Path

from grounded_agent.graph.diagram import block

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_diagram_matches_the_compiled_graph() -> None:
    assert block() in README.read_text(encoding="utf-8"), (
        "README diagram is stale: run python -m grounded_agent.graph.diagram README.md"
    )


def test_readme_names_the_setup_and_test_commands() -> None:
    text = README.read_text(encoding="utf-8")
    assert "make demo" in text and "make test" in text
