"""An answer the model's judgement opens where offline the same evidence answers nothing: its
sentences must pass the trained judge, as an offline answer's do (a small model rates MEDIUM and
quotes a sentence of the right document that does not answer)."""

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


async def _ask(answer: str, ctx: Context = CTX, passage: Finding = PRO) -> Any:
    model = ScriptedChatModel(responses=[
        tool_call("knowledge_base", {"query": "Pro plan price"}),
        judged("MEDIUM", True, answer),
    ])
    kb = ScriptedSource("knowledge_base", [found("knowledge_base", passage)])
    graph = build_graph(chat_model=model, tools={"knowledge_base": kb.tool()})
    offline = await aask(QUESTION, graph=build_graph(chat_model=None,
                                                      tools={"knowledge_base": kb.tool()}),
                         context=ctx)
    assert offline.status == "not_found"  # the premise: offline answers nothing here
    return await aask(QUESTION, graph=graph, context=ctx)


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
