"""Pure edge functions: they read state and name the next node, nothing else."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from grounded_agent.context import MAX_ATTEMPTS
from grounded_agent.nodes._common import is_repeat
from grounded_agent.state import turn_of


def can_requery(state: Mapping[str, Any]) -> bool:
    """Another attempt is allowed and could help: a source was read and none of it was broken only."""
    turn = turn_of(state)
    attempt = int(turn.get("attempt") or 1)
    cap = min(int(turn.get("attempt_cap") or MAX_ATTEMPTS), MAX_ATTEMPTS)  # the hard cap, whatever the state says
    if attempt >= cap:
        return False
    return any(r.outcome.status != "error" for r in turn.get("outcomes") or [])


def route_after_grounding(
    state: Mapping[str, Any],
) -> Literal["score_confidence", "reformulate_query", "answer"]:
    grounding = turn_of(state).get("grounding")
    if grounding == "usable":
        return "score_confidence"
    if grounding == "nothing_usable" and can_requery(state):
        return "reformulate_query"
    return "answer"  # every source failed, or the attempts are spent


def route_after_confidence(
    state: Mapping[str, Any],
) -> Literal["reformulate_query", "draft_answer", "answer"]:
    """Where the local signals left the level open, the draft call judges it (with a model)."""
    confidence = state.get("confidence")
    level = confidence.level if confidence is not None else None
    if turn_of(state).get("evidence") and (turn_of(state).get("draft") or {}).get("judge"):
        return "draft_answer"
    if level == "LOW" and can_requery(state):
        return "reformulate_query"
    if turn_of(state).get("evidence") and confidence is not None and confidence.can_answer and level in (
        "HIGH", "MEDIUM"
    ):
        return "draft_answer"
    return "answer"  # NOT_RELEVANT short-circuits: no rewrite finds a missing document


def route_after_draft(
    state: Mapping[str, Any],
) -> Literal["check_citations", "reformulate_query", "answer"]:
    """The draft call's judgement, where it made one: LOW -> rewrite if an attempt is left (the
    draft dropped); NOT_RELEVANT -> answer at once; HIGH/MEDIUM -> the draft is checked. An
    abstention has nothing to check."""
    confidence = state.get("confidence")
    level = confidence.level if confidence is not None else None
    if level == "LOW" and can_requery(state):
        return "reformulate_query"
    draft = turn_of(state).get("draft") or {}
    answers = confidence is not None and confidence.can_answer and level in ("HIGH", "MEDIUM")
    return "check_citations" if draft.get("text") and answers else "answer"


def route_after_check(state: Mapping[str, Any]) -> Literal["translate_answer", "answer"]:
    """Only a model's checked draft that kept citations is translated, and only when the answer
    was asked for in another language than the sources'."""
    draft = turn_of(state).get("draft") or {}
    if draft.get("write_in") and draft.get("replied") and draft.get("citations"):
        return "translate_answer"
    return "answer"


def route_after_reformulation(state: Mapping[str, Any]) -> Literal["call_tools", "answer"]:
    if is_repeat(str(turn_of(state).get("query") or ""), list(state.get("queries") or [])):
        return "answer"  # re-query only where it can help
    return "call_tools"


def route_after_request(state: Mapping[str, Any]) -> Literal["call_tools", "search_documents"]:
    if turn_of(state).get("intent") in ("search", "search_and_ask"):
        return "search_documents"
    return "call_tools"  # a question: today's grounded answer


def route_after_search(state: Mapping[str, Any]) -> Literal["call_tools", "__end__"]:
    """Search-and-ask with a selection retrieves within it; a search, an empty selection or a
    failed search is the result as it stands (never the whole knowledge base instead)."""
    turn = turn_of(state)
    scope = turn.get("scope") or {}
    if turn.get("intent") == "search_and_ask" and scope.get("doc_ids") and not state.get("status"):
        return "call_tools"
    return "__end__"


def route_after_answer(state: Mapping[str, Any]) -> Literal["mark_coverage", "__end__"]:
    return "mark_coverage" if turn_of(state).get("intent") == "search_and_ask" else "__end__"
