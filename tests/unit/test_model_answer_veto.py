"""Context.judge_model_answers: a small model judges no level (offline's verdict decides whether
there is an answer), and its answer must pass the trained judge as an offline answer does and be
rated no lower than the offline one, else the offline extract stands in. A small model rates weak
evidence MEDIUM and quotes sentences of the right document that do not answer
(docs/how-to/local-model.md)."""

from __future__ import annotations

from typing import Any

import pytest

from grounded_agent import aask, build_graph
from grounded_agent.context import Context
from grounded_agent.prompts.answer import ANSWER_SYSTEM, JUDGED_ANSWER_SYSTEM
from grounded_agent.schemas import Finding
from tests.fakes import (
    ScriptedChatModel,
    ScriptedSource,
    finding,
    found,
    judged,
    text,
    tool_call,
)

PRICE = "The Pro plan costs 49 EUR per user per month."
SUPPORT = "It includes priority support."
PRO = finding(source_id="pro", title="Pro plan", score=0.7, text=f"{PRICE} {SUPPORT}")
# at 0.7 the local signals leave the level to a model, and offline the evidence is too weak to
# answer (NOT_RELEVANT)
QUESTION = "What does the Pro plan cost?"
# at 0.8 for this question the level is left to a model too, but offline the evidence answers
ANSWERED_OFFLINE = "What is the price of Pro for each person on the team?"
CTX = Context(sources=["knowledge_base"], choose_one_source=True, judge_model_answers=True)
JUDGING = Context(sources=["knowledge_base"], choose_one_source=True)


async def _ask(replies: list[Any], ctx: Context = CTX, passage: Finding = PRO,
               question: str = QUESTION, offline_status: str = "not_found",
               ) -> tuple[Any, ScriptedChatModel]:
    model = ScriptedChatModel(responses=[tool_call("knowledge_base", {"query": "Pro plan price"}),
                                         *replies])
    kb = ScriptedSource("knowledge_base", [found("knowledge_base", passage)])
    graph = build_graph(chat_model=model, tools={"knowledge_base": kb.tool()})
    offline = await aask(question, graph=build_graph(chat_model=None,
                                                      tools={"knowledge_base": kb.tool()}),
                         context=ctx)
    assert offline.status == offline_status  # the premise: what offline makes of it
    return await aask(question, graph=graph, context=ctx), model


def _system(model: ScriptedChatModel, call: int) -> str:
    return str(model.received[call][0].content)


async def test_where_offline_answers_nothing_the_model_is_not_asked() -> None:
    result, model = await _ask([])
    assert len(model.received) == 1
    assert result.status == "not_found" and result.citations == []
    assert [p.source_id for p in result.closest] == ["pro"]  # where to look instead
    assert result.usage.llm_calls == 1  # the search only: no draft, no judgement


async def test_negative_control_a_judging_model_opens_that_answer() -> None:
    """Without the setting the model judges the level, and its MEDIUM opens an answer offline
    abstains from: the case the setting is for."""
    result, model = await _ask([judged("MEDIUM", True, f"{SUPPORT} [1]")], JUDGING)
    assert result.status in ("answered", "answered_with_caveat")
    assert "priority support" in result.answer
    assert _system(model, 1).startswith(JUDGED_ANSWER_SYSTEM[:40])


async def test_where_offline_answers_the_model_only_writes_the_answer() -> None:
    result, model = await _ask([text(f"{PRICE} [1]")], passage=PRO.model_copy(
        update={"score": 0.8}), question=ANSWERED_OFFLINE, offline_status="answered")
    assert result.status in ("answered", "answered_with_caveat")
    assert "49 EUR" in result.answer and [c.source_id for c in result.citations] == ["pro"]
    assert _system(model, 1).startswith(ANSWER_SYSTEM[:40])  # the plain draft, no level asked
    assert not any(t.decision.startswith("model_answer_") for t in result.trail)
    assert result.usage.llm_calls == 2


@pytest.mark.parametrize("on", [True, False])
async def test_where_offline_answers_its_extract_stands_in_for_a_withdrawn_answer(on: bool) -> None:
    """The model quotes the sentence beside the answer; the offline extract quotes the answer.
    Negative control: with the setting off the model's quote stands."""
    reply = text(f"{SUPPORT} [1]") if on else judged("MEDIUM", True, f"{SUPPORT} [1]")
    ctx = CTX if on else JUDGING
    result, _ = await _ask([reply], ctx, PRO.model_copy(update={"score": 0.8}),
                           ANSWERED_OFFLINE, offline_status="answered")
    assert result.status in ("answered", "answered_with_caveat")
    withdrawn = [t for t in result.trail if t.decision.startswith("model_answer_")]
    if on:
        assert "49 EUR" in result.answer and withdrawn
        assert "extracted from the sources" in withdrawn[0].detail
    else:
        assert "priority support" in result.answer and "49 EUR" not in result.answer
        assert not withdrawn


@pytest.mark.parametrize("on", [True, False])
async def test_a_model_saying_the_sources_do_not_answer_gives_way_to_the_offline_verdict(
        on: bool) -> None:
    """With the setting the offline verdict decides whether there is an answer, and offline the
    evidence answers: its extract stands in for the model's abstention. Negative control: with
    the setting off the model judges, and its abstention stands."""
    reply = (text("The sources do not contain the answer.") if on
             else judged("MEDIUM", True, "The sources do not contain the answer."))
    result, _ = await _ask([reply], CTX if on else JUDGING,
                           passage=PRO.model_copy(update={"score": 0.8}),
                           question=ANSWERED_OFFLINE, offline_status="answered")
    overruled = [t for t in result.trail if t.decision == "model_abstention_overruled"]
    if on:
        assert result.status in ("answered", "answered_with_caveat")
        assert "49 EUR" in result.answer and [c.source_id for c in result.citations] == ["pro"]
        assert overruled and "extracted from the sources" in overruled[0].detail
    else:
        assert result.status == "not_found" and "49 EUR" not in result.answer
        assert not overruled


async def test_passages_in_another_language_are_not_judged() -> None:
    """The judge was trained on English text; it does not rule on a German passage."""
    german = finding(source_id="pro", title="Pro-Tarif", score=0.8, language="de",
                     text="Der Pro-Tarif kostet 49 EUR pro Nutzer und Monat. "
                     "Er umfasst bevorzugten Support.")
    kb = ScriptedSource("knowledge_base", [found("knowledge_base", german)])
    model = ScriptedChatModel(responses=[tool_call("knowledge_base", {"query": "Pro-Tarif"}),
                                         text("Er umfasst bevorzugten Support [1].")])
    graph = build_graph(chat_model=model, tools={"knowledge_base": kb.tool()})
    result = await aask("Was kostet der Pro-Tarif pro Nutzer?", graph=graph, context=CTX)
    assert "bevorzugten Support" in result.answer and result.usage.llm_calls == 2
    assert not any(t.decision.startswith("model_answer_") for t in result.trail)


@pytest.mark.parametrize("on", [True, False])
async def test_the_model_reads_the_passages_the_offline_verdict_read(on: bool) -> None:
    """The offline verdict is final with the setting, so it and the model's answer rest on the
    passages offline reads: one below low_threshold (offline's floor) but above
    model_low_threshold reaches neither. Negative control: with the setting off the model judges
    the level and reads it."""
    weak = finding(source_id="fees", title="Fees", score=0.45,
                   text="A cargo bike bay in the courtyard costs 10 EUR a month.")
    strong = PRO.model_copy(update={"score": 0.8})
    kb = ScriptedSource("knowledge_base", [found("knowledge_base", strong, weak)])
    ctx = CTX if on else JUDGING
    assert ctx.low_threshold > weak.score >= ctx.model_low_threshold  # the premise
    model = ScriptedChatModel(responses=[tool_call("knowledge_base", {"query": "Pro plan price"}),
                                         text(f"{PRICE} [1]") if on
                                         else judged("MEDIUM", True, f"{PRICE} [1]")])
    graph = build_graph(chat_model=model, tools={"knowledge_base": kb.tool()})
    result = await aask(ANSWERED_OFFLINE, graph=graph, context=ctx)
    assert result.status in ("answered", "answered_with_caveat") and "49 EUR" in result.answer
    prompt = str(model.received[-1][-1].content)
    assert ("cargo bike" in prompt) is not on
    grounding = next(t for t in result.trail if t.node == "check_grounding")
    assert grounding.detail.startswith("1 usable" if on else "2 usable")


def test_the_run_keeps_offline_thresholds_where_the_model_does_not_judge() -> None:
    assert CTX.run_thresholds(with_model=True).low == CTX.low_threshold
    assert JUDGING.run_thresholds(with_model=True).low == JUDGING.model_low_threshold
    assert JUDGING.run_thresholds(with_model=False).low == JUDGING.low_threshold
