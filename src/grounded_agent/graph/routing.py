"""Pure edge functions: they read state and name the next node, nothing else."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from grounded_agent.context import MAX_ATTEMPTS


def can_requery(state: Mapping[str, Any]) -> bool:
    """Another attempt is allowed and could help: a source was read and none of it was broken only."""
    attempt = int(state.get("attempt") or 1)
    cap = min(int(state.get("attempt_cap") or MAX_ATTEMPTS), MAX_ATTEMPTS)  # the hard cap, whatever the state says
    if attempt >= cap:
        return False
    return any(r.outcome.status != "error" for r in state.get("outcomes") or [])


def route_after_grounding(
    state: Mapping[str, Any],
) -> Literal["score_confidence", "reformulate_query", "answer"]:
    grounding = state.get("grounding")
    if grounding == "usable":
        return "score_confidence"
    if grounding == "nothing_usable" and can_requery(state):
        return "reformulate_query"
    return "answer"  # every source failed, or the attempts are spent


def route_after_confidence(state: Mapping[str, Any]) -> Literal["reformulate_query", "answer"]:
    confidence = state.get("confidence")
    level = confidence.level if confidence is not None else None
    if level == "LOW" and can_requery(state):
        return "reformulate_query"
    return (
        "answer"  # HIGH/MEDIUM answer; NOT_RELEVANT short-circuits: no rewrite finds a missing doc
    )


def is_repeat(query: str, tried: list[str]) -> bool:
    """A query that only differs from a tried one in case and spacing."""
    norm = " ".join(query.lower().split())
    return any(norm == " ".join(t.lower().split()) for t in tried)


def route_after_reformulation(state: Mapping[str, Any]) -> Literal["call_tools", "answer"]:
    if is_repeat(str(state.get("query") or ""), list(state.get("queries") or [])):
        return "answer"  # re-query only where it can help
    return "call_tools"
