"""The judged draft a small model cannot write as JSON: asked once more in lines (the level on the
first line, the answer after it), remembered per endpoint, within the call budget; what it writes
is checked like any draft, and an unreadable reply still gives the offline outcome."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest
from langchain_openai import ChatOpenAI

from grounded_agent import aask, build_graph
from grounded_agent.context import Context
from grounded_agent.deps import MAX_MODEL_CALLS
from grounded_agent.nodes._judged import read_lines
from grounded_agent.schemas import JudgedDraft
from grounded_agent.structured import forget_methods, plain_first
from tests.fakes import ScriptedChatModel, ScriptedSource, finding, found, text, tool_call
from tests.support.openai_double import ModelDouble

QUESTION = "What does the Pro plan cost?"
PRO = "The Pro plan costs 49 EUR per user per month. It includes priority support."
CTX = Context(sources=["knowledge_base"], choose_one_source=True)
ANSWER = "The Pro plan costs 49 EUR per user per month [1]."


@pytest.fixture(autouse=True)
def _fresh_methods() -> Iterator[None]:
    forget_methods()
    yield
    forget_methods()


class SmallLocalModel(ScriptedChatModel):
    """A scripted model with a name, so what is learnt about its endpoint is remembered."""

    model_name: str = "small-local"


def _kb() -> ScriptedSource:
    # 0.7: the local signals leave the level open, so the draft call judges it; offline the same
    # evidence is too weak to answer (NOT_RELEVANT)
    return ScriptedSource("knowledge_base",
                          [found("knowledge_base", finding(text=PRO, title="Pricing", score=0.7))])


def _unreadable_once(*then: Any) -> list[Any]:
    return [tool_call("knowledge_base", {"query": "Pro plan price"}),
            text('{"name": "answer", "arguments": ["25%"]}'), *then]


@pytest.mark.parametrize(
    ("reply", "level", "answer", "query"),
    [
        (f"HIGH\n{ANSWER}", "HIGH", ANSWER, None),
        (f"Level: MEDIUM\nAnswer: {ANSWER}", "MEDIUM", ANSWER, None),
        (f"**HIGH**\n{ANSWER}", "HIGH", ANSWER, None),
        (f"HIGH: {ANSWER}", "HIGH", ANSWER, None),
        (f"```\nHIGH\n{ANSWER}\n```", "HIGH", ANSWER, None),
        ("LOW\nQuery: pro plan price", "LOW", "", "pro plan price"),
        ("not relevant", "NOT_RELEVANT", "", None),
        ("NOT_RELEVANT.\nThe sources are about another plan.", "NOT_RELEVANT", "", None),
    ],
)
def test_a_reply_in_lines_is_read(reply: str, level: str, answer: str, query: str | None) -> None:
    parsed = read_lines(reply)
    assert parsed is not None
    assert (parsed.level, parsed.answer, parsed.query) == (level, answer, query)
    assert parsed.can_answer == (level in ("HIGH", "MEDIUM"))


@pytest.mark.parametrize(
    "reply",
    ["High-speed trains run every hour [1].", "The sources state the answer directly.",
     "LOWER fees apply [1].", '{"level": "HIGH", "can_answer": true}', ""],
)
def test_a_reply_whose_first_line_names_no_level_is_not_read(reply: str) -> None:
    assert read_lines(reply) is None


async def test_an_unreadable_judged_draft_is_asked_once_more_in_lines() -> None:
    model = SmallLocalModel(responses=_unreadable_once(text(f"HIGH\n{ANSWER}")))
    graph = build_graph(chat_model=model, tools={"knowledge_base": _kb().tool()})
    result = await aask(QUESTION, graph=graph, context=CTX)
    assert result.status in ("answered", "answered_with_caveat"), result.trail
    assert result.answer.startswith(ANSWER) and result.citations
    assert result.confidence.level == "HIGH"
    assert model.calls == result.usage.llm_calls == 3 <= MAX_MODEL_CALLS
    assert "Reply in plain text" in str(model.received[2][-1].content)
    assert plain_first(model, JudgedDraft)  # later questions on this endpoint ask so at once


async def test_without_the_lines_request_the_offline_verdict_stands() -> None:
    """Negative control: a lines reply that names no level is not read, so the outcome is the
    offline one for this evidence (nothing answered), as before the lines request existed; the
    test before this one fails if the request is taken out."""
    model = SmallLocalModel(responses=_unreadable_once(text(ANSWER)))
    graph = build_graph(chat_model=model, tools={"knowledge_base": _kb().tool()})
    result = await aask(QUESTION, graph=graph, context=CTX)
    assert result.confidence.level == "NOT_RELEVANT" and not result.citations
    assert result.status == "not_found"
    assert not plain_first(model, JudgedDraft)


async def test_every_sentence_of_a_lines_reply_is_checked() -> None:
    """What the level line lets through is a draft like any other: the sentence no source states
    goes to the support judgement, which refutes it."""
    invented = "It comes with a free phone for every user [1]."
    model = SmallLocalModel(responses=_unreadable_once(
        text(f"HIGH\n{ANSWER} {invented}"), tool_call("SupportJudgement", {"supported": []})))
    graph = build_graph(chat_model=model, tools={"knowledge_base": _kb().tool()})
    result = await aask(QUESTION, graph=graph, context=CTX)
    assert "49 EUR" in result.answer and "phone" not in result.answer
    assert model.calls == 4 <= MAX_MODEL_CALLS


async def test_the_lines_request_needs_budget_like_any_call() -> None:
    """No call left for it: the offline verdict stands, and the trail says why."""
    model = SmallLocalModel(responses=_unreadable_once())
    graph = build_graph(chat_model=model, tools={"knowledge_base": _kb().tool()})
    ctx = Context(sources=["knowledge_base"], choose_one_source=True, max_model_calls=2)
    result = await aask(QUESTION, graph=graph, context=ctx)
    assert model.calls == 2
    assert result.confidence.level == "NOT_RELEVANT" and not result.citations
    assert any(t.node == "draft_answer" and t.decision == "budget_exhausted"
               for t in result.trail), result.trail


def _chat_model(double: ModelDouble) -> ChatOpenAI:
    return ChatOpenAI(
        model="qwen-small", base_url=f"http://double-{uuid.uuid4().hex[:8]}.test/v1",
        api_key="test", max_retries=0,
        http_async_client=httpx2.AsyncClient(transport=httpx2.ASGITransport(app=double.app)),
    )


async def test_an_endpoint_that_answered_in_lines_is_asked_in_lines_at_once() -> None:
    """Through the HTTP double imitating the small model (no judged draft as JSON, the level line
    when asked): the first question takes two judged requests, the next one one."""
    double = ModelDouble()
    double.configure(structured="lines")
    model = _chat_model(double)
    graph = build_graph(chat_model=model, tools={"knowledge_base": _kb().tool()})
    first = await aask(QUESTION, graph=graph, context=CTX)
    assert first.citations and "49 EUR" in first.answer
    assert double.steps() == ["call_tools", "judged_answer", "judged_answer"]
    assert [r["kind"] for r in double.requests][1:] == ["tools", "text"]
    again = await aask(QUESTION, graph=graph, context=CTX)
    assert again.citations and "49 EUR" in again.answer
    assert double.steps()[3:] == ["call_tools", "judged_answer"]
    assert again.usage.llm_calls == 2
