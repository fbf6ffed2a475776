"""The edge functions are pure: state in, next node out, no model anywhere."""

from __future__ import annotations

from typing import Any

import pytest

from grounded_agent.graph.routing import can_requery, route_after_confidence, route_after_grounding
from grounded_agent.schemas import Confidence, ToolCallRecord, ToolOutcome


def record(status: str) -> ToolCallRecord:
    """A state entry for one tool call of attempt 1 that ended with `status`."""
    if status == "error":
        outcome = ToolOutcome.error("knowledge_base", "q", "unavailable")
    else:
        outcome = ToolOutcome(source="knowledge_base", query="q", status="not_found",
                              coverage="complete", finding_count=0)
    return ToolCallRecord(attempt=1, call_id="call_1", outcome=outcome)


def state(**kw: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"attempt": 1, "attempt_cap": 2, "outcomes": [record("not_found")]}
    if isinstance(kw.get("confidence"), dict):
        kw["confidence"] = Confidence(**kw["confidence"])
    return {**base, **kw}


@pytest.mark.parametrize(
    ("grounding", "attempt", "expected"),
    [
        ("usable", 1, "score_confidence"),
        ("usable", 2, "score_confidence"),
        ("nothing_usable", 1, "reformulate_query"),
        ("nothing_usable", 2, "answer"),
        ("all_failed", 1, "answer"),
    ],
)
def test_route_after_grounding(grounding: str, attempt: int, expected: str) -> None:
    assert route_after_grounding(state(grounding=grounding, attempt=attempt)) == expected


def test_only_failed_sources_never_trigger_a_requery() -> None:
    s = state(grounding="nothing_usable", outcomes=[record("error"), record("error")])
    assert route_after_grounding(s) == "answer"
    assert not can_requery(s)


@pytest.mark.parametrize(
    ("level", "attempt", "expected"),
    [
        ("HIGH", 1, "answer"),
        ("MEDIUM", 1, "answer"),
        ("LOW", 1, "reformulate_query"),
        ("LOW", 2, "answer"),
        ("NOT_RELEVANT", 1, "answer"),
        (None, 1, "answer"),
    ],
)
def test_route_after_confidence(level: str | None, attempt: int, expected: str) -> None:
    assert route_after_confidence(state(confidence={"level": level}, attempt=attempt)) == expected


def test_attempt_cap_cannot_be_raised_above_two() -> None:
    s = state(confidence={"level": "LOW"}, attempt=2, attempt_cap=5)
    assert route_after_confidence(s) == "answer"


def test_cap_of_one_means_no_reformulation() -> None:
    assert route_after_grounding(state(grounding="nothing_usable", attempt_cap=1)) == "answer"


def test_a_rewrite_that_repeats_a_tried_query_goes_to_the_answer() -> None:
    from grounded_agent.graph.routing import route_after_reformulation

    assert route_after_reformulation({"query": "Pro  plan", "queries": ["pro plan"]}) == "answer"
    assert route_after_reformulation({"query": "pro plan price", "queries": ["pro plan"]}) == "call_tools"
