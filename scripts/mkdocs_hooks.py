"""mkdocs hook: the CLI reference page is generated from the argparse parser, so the two cannot drift.

A page that holds the marker `<!-- cli-reference -->` gets, in its place, the `--help` of
`grounded-agent` and of every subcommand (`grounded_agent.cli.build_parser`).
"""

from __future__ import annotations

import argparse
import os
from typing import Any

MARKER = "<!-- cli-reference -->"
CONTEXT_MARKER = "<!-- context-fields -->"


def _subparsers(parser: argparse.ArgumentParser) -> list[tuple[str, argparse.ArgumentParser]]:
    out: list[tuple[str, argparse.ArgumentParser]] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out.append((name, sub))
    return out


def cli_reference() -> str:
    """Markdown: one section per command, its help text as printed at 100 columns."""
    from grounded_agent.cli import build_parser

    os.environ["COLUMNS"] = "100"  # argparse wraps to the terminal: fixed, so the page is stable
    parts: list[str] = []

    def walk(parser: argparse.ArgumentParser, level: int) -> None:
        parts.append(f"{'#' * level} `{parser.prog}`\n\n```text\n{parser.format_help().rstrip()}\n```\n")
        for _, sub in _subparsers(parser):
            walk(sub, min(level + 1, 4))

    walk(build_parser(), 2)
    return "\n".join(parts)


def context_fields() -> str:
    """Markdown table: every field of `Context`, its type, default and description."""
    import dataclasses

    from grounded_agent.context import Context

    defaults = Context()
    rows = ["| field | type | default | description |", "| --- | --- | --- | --- |"]
    for f in dataclasses.fields(Context):
        value = repr(getattr(defaults, f.name))
        if len(value) > 40:
            value = value[:37] + "..."
        kind = str(f.type).replace("|", "\\|")
        description = str(f.metadata.get("description", "")).replace("|", "\\|").replace("\n", " ")
        value = value.replace("|", "\\|")
        rows.append(f"| `{f.name}` | `{kind}` | `{value}` | {description} |")
    return "\n".join(rows)


def on_page_markdown(markdown: str, **_: Any) -> str:
    if MARKER in markdown:
        markdown = markdown.replace(MARKER, cli_reference())
    if CONTEXT_MARKER in markdown:
        markdown = markdown.replace(CONTEXT_MARKER, context_fields())
    return markdown
