"""The decision trail: one trail entry and one structured log line per decision, written by the
nodes and by llm.calls (which sits beneath the nodes, so the helper lives beneath both)."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

from grounded_agent.context import MAX_ATTEMPTS

log = logging.getLogger("grounded_agent.decisions")


def step(
    state: Mapping[str, Any], node: str, decision: str, detail: str = "", **fields: Any
) -> dict[str, Any]:
    """A trail entry, and one structured log line for the same decision (the attempt and the run
    are the turn's: state.Turn)."""
    turn = state.get("turn") or {}
    attempt = int(turn.get("attempt") or 1)
    record = {
        "run_id": turn.get("run_id"),
        "node": node,
        "attempt": f"{attempt}/{turn.get('attempt_cap') or MAX_ATTEMPTS}",
        "decision": decision,
        **fields,
    }
    log.info(json.dumps(record, default=str, ensure_ascii=False))
    return {"node": node, "attempt": attempt, "decision": decision, "detail": detail}
