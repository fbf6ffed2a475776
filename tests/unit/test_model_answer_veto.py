"""Context.judge_model_answers: a model's answer must pass the trained judge as an offline
answer does (a small model rates MEDIUM and quotes a sentence of the right document that does not
answer). Where offline the same evidence answers nothing there is then no answer; where it
answers, its extract stands in."""

from __future__ import annotations

from typing import Any

import pytest

from grounded_agent import aask, build_graph
from grounded_agent.context import Context
from grounded_agent.schemas import Finding
from tests.fakes import ScriptedChatModel, ScriptedSource, finding, found, judged, tool_call

PRICE = "The Pro plan costs 49 EUR per user per month."
SUPPORT = "It includes priority support."
PRO = finding(source_id="pro", title="Pro plan", score=0.7, text=f"{PRICE} {SUPPORT}")
# at 0.7 the local signals leave the level to the model, and offline the evidence is too weak to
# answer (NOT_RELEVANT): whatever answer comes, the model's judgement opened it
QUESTION = "What does the Pro plan cost?"
CTX = Context(sources=["knowledge_base"], choose_one_source=True, judge_model_answers=True)


async def _ask(answer: str, ctx: Context = CTX, passage: Finding = PRO, question: str = QUESTION,
               offline_status: str = "not_found") -> Any:
    model = ScriptedChatModel(responses=[
        tool_call("knowledge_base", {"query": "Pro plan price"}),
        judged("MEDIUM", True, answer),
    ])
    kb = ScriptedSource("knowledge_base", [found("knowledge_base", passage)])
    graph = build_graph(chat_model=model, tools={"knowledge_base": kb.tool()})
    offline = await aask(question, graph=build_graph(chat_model=None,
                                                      tools={"knowledge_base": kb.tool()}),
                         context=ctx)
    assert offline.status == offline_status  # the premise: what offline makes of it
    return await aask(question, graph=graph, context=ctx)


async def test_a_model_answer_quoting_what_does_not_answer_is_withdrawn() -> None:
    result = await _ask(f"{SUPPORT} [1]")
    assert result.status == "not_found" and result.citations == []
    assert [p.source_id for p in result.closest] == ["pro"]  # where to look instead
    assert any(t.decision == "model_answer_vetoed" for t in result.trail)
    assert result.usage.llm_calls == 2  # the judge costs no model call


async def test_a_model_answer_quoting_what_answers_stands() -> None:
    result = await _ask(f"{PRICE} [1]")
    assert result.status in ("answered", "answered_with_caveat")
    assert "49 EUR" in result.answer and [c.source_id for c in result.citations] == ["pro"]
    assert not any(t.decision == "model_answer_vetoed" for t in result.trail)


@pytest.mark.parametrize("off", [
    {"judge_model_answers": False},  # the default: the model's judgement decides
    {"judge_model_answers": True, "judge_veto": 0.0, "judge_margin": 1.0},  # both cut-offs off
])
async def test_negative_control_without_the_judge_the_model_answer_stands(
    off: dict[str, Any],
) -> None:
    """The withdrawal above is the judge's doing: without it, the same answer the model opened
    reaches the user."""
    result = await _ask(f"{SUPPORT} [1]", Context(sources=["knowledge_base"],
                                                  choose_one_source=True, **off))
    assert result.status in ("answered", "answered_with_caveat")
    assert "priority support" in result.answer


async def test_passages_in_another_language_are_not_judged() -> None:
    """The judge was trained on English text; it does not rule on a German passage."""
    german = finding(source_id="pro", title="Pro-Tarif", score=0.7, language="de",
                     text="Der Pro-Tarif kostet 49 EUR pro Nutzer und Monat. "
                     "Er umfasst bevorzugten Support.")
    result = await _ask("Er umfasst bevorzugten Support [1].", CTX, german)
    assert not any(t.decision == "model_answer_vetoed" for t in result.trail)


# at 0.8 for this question the level is left to the model too, but offline the evidence answers
ANSWERED_OFFLINE = "What is the price of Pro for each person on the team?"


@pytest.mark.parametrize("on", [True, False])
async def test_where_offline_answers_its_extract_stands_in_for_a_withdrawn_answer(on: bool) -> None:
    """The model quotes the sentence beside the answer; the offline extract quotes the answer.
    Negative control: with the setting off the model's quote stands."""
    ctx = Context(sources=["knowledge_base"], choose_one_source=True, judge_model_answers=on)
    result = await _ask(f"{SUPPORT} [1]", ctx, PRO.model_copy(update={"score": 0.8}),
                        ANSWERED_OFFLINE, offline_status="answered")
    assert result.status in ("answered", "answered_with_caveat")
    vetoed = [t for t in result.trail if t.decision == "model_answer_vetoed"]
    if on:
        assert "49 EUR" in result.answer and vetoed
        assert "extracted from the sources" in vetoed[0].detail
    else:
        assert "priority support" in result.answer and "49 EUR" not in result.answer
        assert not vetoed
