"""The edge functions are pure: state in, next node out, no model anywhere."""

from __future__ import annotations

from typing import Any

import pytest

from grounded_agent.graph.routing import (
    can_requery,
    route_after_check,
    route_after_confidence,
    route_after_draft,
    route_after_grounding,
)
from grounded_agent.schemas import Confidence, Finding, ToolCallRecord, ToolOutcome


def record(status: str) -> ToolCallRecord:
    """A state entry for one tool call of attempt 1 that ended with `status`."""
    if status == "error":
        outcome = ToolOutcome.error("knowledge_base", "q", "unavailable")
    else:
        outcome = ToolOutcome(source="knowledge_base", query="q", status="not_found",
                              coverage="complete", finding_count=0)
    return ToolCallRecord(attempt=1, call_id="call_1", outcome=outcome)


TURN = ("attempt", "attempt_cap", "outcomes", "grounding", "evidence", "draft", "query")


def state(**kw: Any) -> dict[str, Any]:
    """A state whose turn holds the working values given (the rest stays top level)."""
    turn: dict[str, Any] = {"attempt": 1, "attempt_cap": 2, "outcomes": [record("not_found")]}
    turn.update({k: kw.pop(k) for k in TURN if k in kw})
    if isinstance(kw.get("confidence"), dict):
        kw["confidence"] = Confidence(**kw["confidence"])
    return {"turn": turn, **kw}


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

    assert route_after_reformulation(state(query="Pro  plan", queries=["pro plan"])) == "answer"
    assert route_after_reformulation(state(query="pro plan price", queries=["pro plan"])) == "call_tools"


FINDING = Finding(source="knowledge_base", source_id="d", title="T", text="x", score=0.9)


@pytest.mark.parametrize(
    ("level", "can_answer", "evidence", "expected"),
    [
        ("HIGH", True, [FINDING], "draft_answer"),
        ("MEDIUM", True, [FINDING], "draft_answer"),
        ("HIGH", False, [FINDING], "answer"),  # the model rated it high, yet cannot answer
        ("HIGH", True, [], "answer"),  # nothing to write from
        ("NOT_RELEVANT", False, [FINDING], "answer"),
    ],
)
def test_only_answerable_evidence_is_drafted(
    level: str, can_answer: bool, evidence: list[Finding], expected: str
) -> None:
    s = state(confidence={"level": level, "can_answer": can_answer}, evidence=evidence)
    assert route_after_confidence(s) == expected


def test_a_draft_is_checked_unless_the_model_abstained() -> None:
    high = {"level": "HIGH", "can_answer": True}
    assert route_after_draft(state(confidence=high, draft={"text": "It costs 29 euros [1].",
                                                           "how": "model"})) == "check_citations"
    # the draft call judged the evidence: LOW drops the draft for a rewrite (an attempt left),
    # NOT_RELEVANT ends at the answer, whatever text the draft held
    low = {"level": "LOW", "can_answer": False}
    assert route_after_draft(state(confidence=low, draft={"text": "x [1]."})) == (
        "reformulate_query")
    assert route_after_draft(state(confidence={"level": "NOT_RELEVANT", "can_answer": False},
                                   draft={"text": "x [1]."})) == "answer"
    assert route_after_draft(state(draft={"text": "", "how": "abstained"})) == "answer"


@pytest.mark.parametrize(
    ("draft", "expected"),
    [
        ({"write_in": "en", "replied": True, "citations": ["c"]}, "translate_answer"),
        ({"write_in": None, "replied": True, "citations": ["c"]}, "answer"),  # no other language
        ({"write_in": "en", "replied": False, "citations": ["c"]}, "answer"),  # an extract
        ({"write_in": "en", "replied": True, "citations": []}, "answer"),  # nothing kept
    ],
)
def test_only_a_checked_model_answer_asked_in_another_language_is_translated(
    draft: dict[str, Any], expected: str
) -> None:
    assert route_after_check(state(draft=draft)) == expected


def test_evidence_left_open_locally_goes_to_the_draft_call_that_judges_it() -> None:
    held = {"level": "NOT_RELEVANT", "can_answer": False}  # the offline verdict, held
    assert route_after_confidence(state(confidence=held, evidence=[FINDING],
                                        draft={"extract": "", "judge": True})) == "draft_answer"
    assert route_after_confidence(state(confidence=held, evidence=[FINDING],
                                        draft={"extract": ""})) == "answer"
