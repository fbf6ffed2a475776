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


def _layout() -> str:
    text = README.read_text(encoding="utf-8")
    start = text.index("## Layout")
    return text[start : text.index("```", text.index("```", start) + 3)]


def test_readme_layout_names_every_module_and_folder() -> None:
    """The layout section is true to the tree: every module of the package and every top-level
    folder of the checkout is named there (a new module without a line in it fails here)."""
    root = README.parent
    layout = _layout()
    package = root / "src" / "grounded_agent"
    missing = sorted(
        str(p.relative_to(package))
        for p in package.rglob("*.py")
        if p.stem != "__init__" and p.stem not in layout
    )
    folders = sorted(
        p.name for p in root.iterdir()
        if p.is_dir() and not p.name.startswith(".") and p.name not in ("src", "reports", "build", "dist")
        and not p.name.endswith(".egg-info") and f"{p.name}/" not in layout
    )
    assert not missing and not folders, f"README layout lacks {missing + folders}"
