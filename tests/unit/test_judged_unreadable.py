"""The judged draft a small model cannot write as JSON: the offline verdict for the same evidence
stands, and where it answers the model writes the answer alone in free text (checked like any
draft), within the call budget; an endpoint where that happened is asked so at once."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest
from langchain_core.messages import SystemMessage
from langchain_openai import ChatOpenAI

from grounded_agent import aask, build_graph
from grounded_agent.context import Context
from grounded_agent.deps import MAX_MODEL_CALLS
from grounded_agent.llm.structured import forget_methods, plain_first
from grounded_agent.prompts.answer import ANSWER_SYSTEM
from grounded_agent.schemas import JudgedDraft
from tests.fakes import ScriptedChatModel, ScriptedSource, finding, found, text, tool_call
from tests.support.openai_double import ModelDouble

PRO = "The Pro plan costs 49 EUR per user per month. It includes priority support."
# whether offline answers is the premise of each path below, so the calibrated judge is off
# (its verdicts change with each calibration; tests/unit/test_judge.py covers it)
CTX = Context(sources=["knowledge_base"], choose_one_source=True, judge_veto=0.0, judge_margin=1.0)
# 0.8 for this question: the local signals leave the level open (the draft call judges it), and
# offline the same evidence answers
ANSWERS_OFFLINE = "What is the price of Pro for each person on the team?"
# 0.7 for this one: open too, and offline the evidence is too weak (NOT_RELEVANT)
WEAK_OFFLINE = "What does the Pro plan cost?"
DRAFT = "The Pro plan costs 49 EUR per user per month [1]. It includes priority support [1]."
UNREADABLE = ['{"name": "answer", "arguments": ["25%"]}', '{"description": "JudgedDraft"}']


@pytest.fixture(autouse=True)
def _fresh_methods() -> Iterator[None]:
    forget_methods()
    yield
    forget_methods()


class SmallLocalModel(ScriptedChatModel):
    """A scripted model with a name, so what is learnt about its endpoint is remembered."""

    model_name: str = "small-local"


def _kb(score: float) -> ScriptedSource:
    return ScriptedSource("knowledge_base",
                          [found("knowledge_base", finding(text=PRO, score=score))])


def _unreadable_twice(*then: Any) -> list[Any]:
    return [tool_call("knowledge_base", {"query": "Pro plan price"}),
            *(text(t) for t in UNREADABLE), *then]


async def _ask(model: Any, question: str, score: float, ctx: Context = CTX) -> Any:
    graph = build_graph(chat_model=model, tools={"knowledge_base": _kb(score).tool()})
    return await aask(question, graph=graph, context=ctx)


async def test_the_offline_verdict_stands_and_the_model_writes_the_answer() -> None:
    model = SmallLocalModel(responses=_unreadable_twice(text(DRAFT)))
    result = await _ask(model, ANSWERS_OFFLINE, 0.8)
    offline = await _ask(None, ANSWERS_OFFLINE, 0.8)
    assert result.confidence.level == offline.confidence.level
    assert result.status == offline.status == "answered"
    assert result.answer.startswith(DRAFT), result.answer  # the model's draft, not the extract
    assert any(t.decision == "draft_model" for t in result.trail)
    assert model.calls == result.usage.llm_calls == 4 <= MAX_MODEL_CALLS
    plain = model.received[3][0]
    assert isinstance(plain, SystemMessage) and str(plain.content).startswith(ANSWER_SYSTEM[:40])
    assert plain_first(model, JudgedDraft)  # later questions on this endpoint skip the JSON


async def test_where_offline_answers_nothing_no_more_call_is_made() -> None:
    """Negative control: the held verdict does not answer, so the model is not asked to write one
    (offline's outcome, nothing more confident), and nothing is learnt about the endpoint."""
    model = SmallLocalModel(responses=_unreadable_twice())
    result = await _ask(model, WEAK_OFFLINE, 0.7)
    assert result.confidence.level == "NOT_RELEVANT" and not result.citations
    assert result.status == "not_found" and model.calls == 3
    assert not plain_first(model, JudgedDraft)


async def test_a_free_text_reply_that_finds_no_answer_is_an_abstention() -> None:
    """A model that says plainly that the sources do not answer abstains, also where its
    judgement could not be read and offline would answer: the offline extract does not overrule
    it (a more confident outcome than the model's own)."""
    model = SmallLocalModel(responses=_unreadable_twice(
        text("No, it is not included. The sources do not contain the answer.")))
    result = await _ask(model, ANSWERS_OFFLINE, 0.8)
    assert result.status != "answered"
    assert "49 EUR" not in (result.answer or "")


async def test_every_sentence_of_the_free_text_answer_is_checked() -> None:
    """The sentence no source states goes to the support judgement, which refutes it."""
    invented = "Each user also gets a free phone [1]."
    model = SmallLocalModel(responses=_unreadable_twice(
        text(f"{DRAFT} {invented}"), tool_call("SupportJudgement", {"supported": []})))
    result = await _ask(model, ANSWERS_OFFLINE, 0.8)
    assert "49 EUR" in result.answer and "phone" not in result.answer
    assert model.calls == 5 <= MAX_MODEL_CALLS


async def test_the_free_text_request_needs_budget_like_any_call() -> None:
    """No call left for it: the offline outcome (the extract), and the trail says why."""
    model = SmallLocalModel(responses=_unreadable_twice())
    ctx = Context(sources=["knowledge_base"], choose_one_source=True, max_model_calls=3,
                  judge_veto=0.0, judge_margin=1.0)
    result = await _ask(model, ANSWERS_OFFLINE, 0.8, ctx)
    assert model.calls == 3
    assert result.status == "answered" and "49 EUR" in result.answer
    assert any(t.decision == "draft_extractive" for t in result.trail)
    assert any(t.node == "draft_answer" and t.decision == "budget_exhausted"
               for t in result.trail), result.trail


def _chat_model(double: ModelDouble) -> ChatOpenAI:
    return ChatOpenAI(
        model="qwen-small", base_url=f"http://double-{uuid.uuid4().hex[:8]}.test/v1",
        api_key="test", max_retries=0,
        http_async_client=httpx2.AsyncClient(transport=httpx2.ASGITransport(app=double.app)),
    )


async def test_an_endpoint_whose_judged_drafts_cannot_be_read_is_asked_for_the_answer_at_once(
) -> None:
    """Through the HTTP double imitating the small model (a judged draft never as readable
    JSON): the first question spends two judged requests, the next one none."""
    double = ModelDouble()
    double.configure(structured="no_json")
    model = _chat_model(double)
    graph = build_graph(chat_model=model, tools={"knowledge_base": _kb(0.8).tool()})
    first = await aask(ANSWERS_OFFLINE, graph=graph, context=CTX)
    assert first.citations and "49 EUR" in first.answer
    assert double.steps() == ["call_tools", "judged_answer", "judged_answer", "answer"]
    again = await aask(ANSWERS_OFFLINE, graph=graph, context=CTX)
    assert again.citations and "49 EUR" in again.answer
    assert double.steps()[4:] == ["call_tools", "answer"]
    assert again.usage.llm_calls == 2
