"""The generated reference pages (scripts/mkdocs_hooks.py): the CLI page holds every command's
help as its parser prints it, the settings page every field of Context."""

from __future__ import annotations

import dataclasses
import importlib.util
from pathlib import Path
from types import ModuleType

from grounded_agent.cli import build_parser
from grounded_agent.context import Context

ROOT = Path(__file__).resolve().parents[2]


def _hooks() -> ModuleType:
    spec = importlib.util.spec_from_file_location("mkdocs_hooks", ROOT / "scripts" / "mkdocs_hooks.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_cli_reference_has_every_command_and_option() -> None:
    page = _hooks().cli_reference()
    for command in ("ask", "search", "ingest", "docs list", "docs show", "docs remove", "db status",
                    "db stop", "demo", "eval", "serve"):
        assert f"## `grounded-agent {command}`" in page, command
    for option in ("--sources", "--page-size", "--sync", "--all-versions", "--all", "--questions"):
        assert option in page, option
    assert page.count("usage: grounded-agent") == page.count("## `grounded-agent")
    assert "usage: grounded-agent" in build_parser().format_help()


def test_context_table_has_every_field_with_its_description() -> None:
    table = _hooks().context_fields()
    for f in dataclasses.fields(Context):
        row = next((line for line in table.splitlines() if line.startswith(f"| `{f.name}` |")), None)
        assert row is not None, f.name
        description = str(f.metadata.get("description", ""))
        assert description[:30].replace("|", "\\|") in row, f.name


def test_the_hook_replaces_only_its_markers() -> None:
    hooks = _hooks()
    assert hooks.on_page_markdown("plain page") == "plain page"
    assert "usage: grounded-agent" in hooks.on_page_markdown("x\n<!-- cli-reference -->\n")
