"""The shape issue 25 asks the graph to keep: small node files and functions, and a state whose
top level says what it is (the per-turn working values live in one `turn` channel)."""

from __future__ import annotations

import ast
import typing
from pathlib import Path

from grounded_agent.state import AgentState

NODES = Path(__file__).resolve().parents[2] / "src" / "grounded_agent" / "nodes"


def test_no_file_in_nodes_over_250_lines() -> None:
    long = {p.name: n for p in NODES.glob("*.py")
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > 250}
    assert long == {}


def test_no_function_in_nodes_over_60_lines() -> None:
    long = {}
    for path in NODES.glob("*.py"):
        for fn in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (fn.end_lineno or fn.lineno) - fn.lineno + 1
                if lines > 60:
                    long[f"{path.name}:{fn.name}"] = lines
    assert long == {}


def test_the_question_answering_state_has_at_most_20_top_level_keys() -> None:
    keys = typing.get_type_hints(AgentState)
    assert "turn" in keys and len(keys) <= 20, sorted(keys)
