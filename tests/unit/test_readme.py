"""The README and the docs show the graph as it is built, the README stays a short front door that
names the set-up commands, and the layout page names every module and folder."""

from __future__ import annotations

from pathlib import Path

from grounded_agent.graph.diagram import block

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
GRAPH_PAGE = ROOT / "docs" / "explanation" / "graph.md"
LAYOUT_PAGE = ROOT / "docs" / "explanation" / "layout.md"
MAX_README_LINES = 250


def test_readme_and_graph_page_diagrams_match_the_compiled_graph() -> None:
    for page in (README, GRAPH_PAGE):
        assert block() in page.read_text(encoding="utf-8"), (
            f"{page.name} diagram is stale: run python -m grounded_agent.graph.diagram "
            f"{page.relative_to(ROOT)}"
        )


def test_readme_is_a_short_front_door_naming_the_setup_and_test_commands() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= MAX_README_LINES
    assert "make demo" in text and "make test" in text


def test_readme_links_resolve_to_files_of_the_checkout() -> None:
    """Every relative link of the README (the package's long description too) names a file or
    folder that exists, so the front door leads somewhere."""
    import re

    text = README.read_text(encoding="utf-8")
    targets = {t.split("#")[0] for t in re.findall(r"\]\(([^)\s]+)\)", text)}
    missing = sorted(t for t in targets if t and "://" not in t and not (ROOT / t).exists())
    assert not missing, f"README links to missing files: {missing}"
    # an in-page link names a heading of the README itself (GitHub's anchors)
    anchors = {re.sub(r"[^a-z0-9 -]", "", h.lower()).replace(" ", "-")
               for h in re.findall(r"^#+ (.+)$", text, re.M)}
    dangling = sorted(a for a in re.findall(r"\]\(#([^)]+)\)", text) if a not in anchors)
    assert not dangling, f"README links to headings it does not have: {dangling}"


def _layout() -> str:
    text = LAYOUT_PAGE.read_text(encoding="utf-8")
    start = text.index("```")
    return text[start : text.index("```", start + 3)]


def test_layout_page_names_every_module_and_folder() -> None:
    """The layout page is true to the tree: every module of the package and every top-level
    folder of the checkout is named there (a new module without a line in it fails here)."""
    layout = _layout()
    package = ROOT / "src" / "grounded_agent"
    missing = sorted(
        str(p.relative_to(package))
        for p in package.rglob("*.py")
        if p.stem != "__init__" and p.stem not in layout
    )
    folders = sorted(
        p.name for p in ROOT.iterdir()
        if p.is_dir() and not p.name.startswith(".")
        and p.name not in ("src", "reports", "build", "dist", "site")
        and not p.name.endswith(".egg-info") and f"{p.name}/" not in layout
    )
    assert not missing and not folders, f"docs/explanation/layout.md lacks {missing + folders}"
