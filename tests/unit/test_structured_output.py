"""Structured output across OpenAI-compatible servers (structured.py), against the model double.

Each server kind is the double with a different `supports` set: tools and json_schema (OpenAI),
tools only (vLLM without guided decoding), json_schema only (a server without a tool parser),
neither, refusing with 400 or silently ignoring what it lacks. ChatOpenAI talks to the double's
ASGI app through httpx2's ASGITransport: the real OpenAI client and wire format, no socket (unit
tests open none; tests/e2e runs the same double on loopback).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_openai import ChatOpenAI

from grounded_agent import aask, build_graph
from grounded_agent.context import Context
from grounded_agent.deps import MAX_MODEL_CALLS
from grounded_agent.llm.structured import (
    forget_methods,
    read_structured,
    start_method,
    structured_call,
)
from grounded_agent.prompts.answer import ANSWER_USER, JUDGED_ANSWER_SYSTEM
from grounded_agent.prompts.sources import render_sources
from grounded_agent.schemas import JudgedDraft
from tests.fakes import ScriptedSource, finding, found
from tests.support.openai_double import Fault, ModelDouble

QUESTION = "What does the Pro plan cost?"
PRO = "The Pro plan costs 49 EUR per user per month. It includes priority support."
MESSAGES = [
    SystemMessage(JUDGED_ANSWER_SYSTEM.format(language="English")),
    HumanMessage(ANSWER_USER.format(
        question=QUESTION, sources=render_sources([finding(text=PRO, title="Pricing")]))),
]


@pytest.fixture(autouse=True)
def _fresh_methods() -> Iterator[None]:
    forget_methods()
    yield
    forget_methods()


def chat_model(double: ModelDouble) -> ChatOpenAI:
    """ChatOpenAI on the double's ASGI app; a base URL of its own, so nothing learnt leaks."""
    return ChatOpenAI(
        model="gpt-4o-mini",
        base_url=f"http://double-{uuid.uuid4().hex[:8]}.test/v1",
        api_key="test",
        max_retries=0,
        http_async_client=httpx2.AsyncClient(transport=httpx2.ASGITransport(app=double.app)),
    )


def state(calls: int = 0) -> dict[str, Any]:
    return {"usage": {"llm_calls": calls}, "deadline": None}


async def judge(model: Any, calls_before: int = 0) -> tuple[Any, dict[str, int]]:
    usage: dict[str, int] = {}
    result = await structured_call(
        model, JudgedDraft, MESSAGES, state=state(calls_before), ctx=Context(), usage=usage
    )
    return result, usage


# --- one test per kind of server ----------------------------------------------------------------


async def test_openai_like_server_gets_one_function_call() -> None:
    double = ModelDouble()
    result, usage = await judge(chat_model(double))
    parsed = result.parsed
    assert parsed is not None
    assert (parsed.level, parsed.reason, parsed.can_answer) == (
        "HIGH", "source 1 states the answer", True)
    assert parsed.answer.startswith("The Pro plan costs 49 EUR per user per month")
    assert result.method == "function_calling"
    assert usage["llm_calls"] == 1 and usage["input_tokens"] > 0
    (req,) = double.requests
    assert req["kind"] == "tools" and req["tools"] == ["JudgedDraft"]
    assert req["tool_choice"] == {"type": "function", "function": {"name": "JudgedDraft"}}


async def test_function_calling_only_server() -> None:
    double = ModelDouble()
    double.configure(supports=("tools",))
    result, usage = await judge(chat_model(double))
    assert result.method == "function_calling" and result.parsed is not None
    assert usage["llm_calls"] == 1


async def test_json_schema_only_server_falls_back_once_then_starts_there() -> None:
    double = ModelDouble()
    double.configure(supports=("json_schema",))
    model = chat_model(double)
    result, usage = await judge(model)
    assert result.parsed is not None and result.parsed.level == "HIGH"
    assert result.method == "json_schema"
    assert result.tried == ["function_calling:refused", "json_schema:parsed"]
    assert usage["llm_calls"] == 2  # the refused request counts against the cap too
    assert [r["status"] for r in double.requests] == [400, 200]
    assert double.requests[1]["response_format"] == "json_schema"
    # the next question on this endpoint asks the way that worked
    assert start_method(model) == "json_schema"
    again, usage = await judge(model)
    assert again.method == "json_schema" and usage["llm_calls"] == 1
    assert len(double.requests) == 3


async def test_text_only_server_that_refuses_tools_and_formats() -> None:
    double = ModelDouble()
    double.configure(supports=())
    model = chat_model(double)
    result, usage = await judge(model)
    assert result.parsed is not None and result.parsed.can_answer is True
    assert result.method == "json_text"
    assert result.tried == ["function_calling:refused", "json_schema:refused", "json_text:parsed"]
    assert usage["llm_calls"] == 3
    assert [r["kind"] for r in double.requests] == ["tools", "json_schema", "text"]
    assert start_method(model) == "json_text"


async def test_text_only_server_that_ignores_tools_is_asked_in_words() -> None:
    double = ModelDouble()
    double.configure(supports=(), refuse_unsupported=False)
    result, usage = await judge(chat_model(double))
    assert result.parsed is not None
    assert result.tried == ["function_calling:no_structure", "json_text:parsed"]
    assert usage["llm_calls"] == 2


@pytest.mark.parametrize("shape", ["json", "fenced", "tool_call"])
async def test_every_reply_shape_is_read(shape: str) -> None:
    """Bare JSON in the content (even when a tool was forced), JSON in a code fence after prose,
    a tool call: all read from the first reply."""
    double = ModelDouble()
    double.configure(structured=shape)
    result, usage = await judge(chat_model(double))
    assert result.parsed is not None and result.parsed.level == "HIGH"
    assert usage["llm_calls"] == 1


@pytest.mark.parametrize("shape", ["json", "fenced"])
async def test_json_text_in_fences_from_a_text_only_server(shape: str) -> None:
    double = ModelDouble()
    double.configure(supports=(), structured=shape)
    result, _ = await judge(chat_model(double))
    assert result.parsed is not None
    # the first reply (to the refused tool request) never came: JSON text was read at the end
    assert result.tried[-1] == "json_text:parsed"


# --- unreadable replies, failures and the budget ------------------------------------------------


@pytest.mark.parametrize("fault", ["invalid_tool_args", "broken_tool_json"])
async def test_invalid_tool_arguments_are_retried_once_then_given_up(fault: str) -> None:
    double = ModelDouble()
    settings: dict[str, Any] = {fault: ("judged_answer",)}
    double.configure(**settings)
    result, usage = await judge(chat_model(double))
    assert result.parsed is None and result.failure is None
    assert result.tried == ["function_calling:invalid", "function_calling:invalid"]
    assert usage["llm_calls"] == 2 and len(double.requests) == 2


async def test_a_server_that_ignores_the_named_tool_is_asked_in_words_next() -> None:
    """llama-server replaces a named tool_choice with "auto"; the small model then writes a call
    of the dialog's search tool as text. Asked the same way again it wrote the same text (the
    bench's replies, issue 27), so the second request asks in words, and later questions on this
    endpoint start there."""
    double = ModelDouble()
    double.configure(structured="other_call")
    model = chat_model(double)
    result, usage = await judge(model)
    assert result.parsed is not None and result.parsed.level == "HIGH"
    assert result.tried == ["function_calling:invalid", "json_text:parsed"]
    assert [r["kind"] for r in double.requests] == ["tools", "text"]
    assert start_method(model) == "json_text"
    again, usage = await judge(model)
    assert again.tried == ["json_text:parsed"] and usage["llm_calls"] == 1


async def test_prose_twice_gives_up_after_two_calls() -> None:
    double = ModelDouble()
    double.configure(structured="prose")
    result, usage = await judge(chat_model(double))
    assert result.parsed is None
    assert result.tried == ["function_calling:no_structure", "json_text:no_structure"]
    assert usage["llm_calls"] == 2


@pytest.mark.parametrize(
    "fault",
    [
        Fault(status=500),
        Fault(status=503),
        Fault(status=429, retry_after=0.01),
        Fault(status=200, body="{not json"),
        Fault(status=200, body='{"id": "x", "object": "chat.completion", "choices": []}'),
        Fault(status=400, message="This model's maximum context length is 8192 tokens"),
    ],
    ids=["500", "503", "429", "malformed", "no_choices", "context_length_400"],
)
async def test_a_technical_failure_is_not_asked_again(fault: Fault) -> None:
    double = ModelDouble()
    double.configure(faults=[fault])
    result, usage = await judge(chat_model(double))
    assert result.failure is not None and result.parsed is None
    assert usage["llm_calls"] == 1
    assert len(double.requests) == 1


async def test_each_fallback_request_needs_budget() -> None:
    double = ModelDouble()
    double.configure(supports=("json_schema",))
    result, usage = await judge(chat_model(double), calls_before=MAX_MODEL_CALLS - 1)
    # the one call left was refused; the fallback was not allowed past the cap
    assert result.exhausted is not None and result.parsed is None
    assert usage["llm_calls"] == 1
    assert len(double.requests) == 1


# --- the lenient reader -------------------------------------------------------------------------

GOOD = {"level": "MEDIUM", "reason": "close", "can_answer": True}


@pytest.mark.parametrize(
    "message",
    [
        AIMessage(content='{"level": "MEDIUM", "reason": "close", "can_answer": true}'),
        AIMessage(content='Sure.\n```json\n{"level": "MEDIUM", "reason": "close", '
                          '"can_answer": true}\n```\nHope this helps.'),
        AIMessage(content='My judgement: {"level": "medium", "reason": "close", '
                          '"can_answer": "true"} - done.'),
        AIMessage(content='{"name": "JudgedDraft", "arguments": {"level": "MEDIUM", '
                          '"reason": "close", "can_answer": true}}'),
        AIMessage(content='{"JudgedDraft": {"level": "Medium", "reason": "close", '
                          '"can_answer": true}}'),
        AIMessage(content='{"name": "knowledge_base", "arguments": {"query": "pro plan"}}\n'
                          '{"name": "judgedDraft", "arguments": {"level": "MEDIUM", '
                          '"reason": "close", "can_answer": true}}'),
        AIMessage(content='{"description": "The evidence states the answer.", "properties": '
                          '{"level": "MEDIUM", "reason": "close", "can_answer": true}}'),
        AIMessage(content="", tool_calls=[{"name": "JudgedDraft", "args": GOOD, "id": "c"}]),
        AIMessage(content="", invalid_tool_calls=[{
            "name": "JudgedDraft", "id": "c", "error": "bad json", "type": "invalid_tool_call",
            "args": 'Arguments: {"level": "MEDIUM", "reason": "close", "can_answer": true}'}]),
    ],
    ids=["bare", "fenced", "prose_around", "wrapped_call", "keyed", "after_another_call_other_case",
         "in_the_schemas_shape", "tool_call", "invalid_call"],
)
def test_reader_finds_the_judgement_wherever_it_is(message: AIMessage) -> None:
    reading = read_structured(message, JudgedDraft)
    assert reading.parsed == JudgedDraft(**GOOD)


def test_reader_maps_enum_spellings() -> None:
    message = AIMessage(content='{"level": "not relevant", "reason": "other firm", "can_answer": false}')
    reading = read_structured(message, JudgedDraft)
    assert reading.parsed is not None and reading.parsed.level == "NOT_RELEVANT"


@pytest.mark.parametrize(
    ("message", "structure"),
    [
        (AIMessage(content="The evidence looks fine to me."), False),
        (AIMessage(content='{"level": "SURE", "reason": "x", "can_answer": true}'), True),
        (AIMessage(content="", tool_calls=[{"name": "other_tool", "args": {"a": 1}, "id": "c"}]), True),
        # the schema itself echoed back is no judgement
        (AIMessage(content='{"type": "object", "properties": {"level": {"type": "string"}, '
                           '"reason": {"type": "string"}, "can_answer": {"type": "boolean"}}}'), True),
    ],
)
def test_reader_tells_no_structure_from_an_invalid_one(message: AIMessage, structure: bool) -> None:
    reading = read_structured(message, JudgedDraft)
    assert reading.parsed is None and reading.structure is structure


# --- the whole graph, one question per server kind ----------------------------------------------


@pytest.mark.parametrize(
    ("settings", "confidence_calls"),
    [
        ({}, 1),
        ({"supports": ("tools",)}, 1),
        ({"supports": ("tools", "json_schema"), "structured": "fenced"}, 1),
        ({"supports": ("json_schema",), "refuse_unsupported": True}, 2),
        ({"supports": (), "refuse_unsupported": True}, 3),
        ({"supports": (), "refuse_unsupported": False}, 2),
    ],
    ids=["openai", "tools_only", "fenced_json", "json_schema_only", "text_only_refusing",
         "text_only_ignoring"],
)
async def test_the_confidence_step_succeeds_on_every_server_kind(
    settings: dict[str, Any], confidence_calls: int
) -> None:
    double = ModelDouble()
    double.configure(**settings)
    kb = ScriptedSource(
        "knowledge_base", [found("knowledge_base", finding(text=PRO, title="Pricing", score=0.7))]
    )
    graph = build_graph(chat_model=chat_model(double), tools={"knowledge_base": kb.tool()})
    result = await aask(QUESTION, graph=graph, context=Context(sources=["knowledge_base"], choose_one_source=True))
    assert result.confidence.level == "HIGH"
    # the draft call judged the evidence the local signals left open, and wrote the answer
    assert any(t.node == "draft_answer" and "(model)" in t.decision for t in result.trail)
    assert result.status in ("answered", "answered_with_caveat")
    assert result.citations and "49 EUR" in result.answer
    steps = double.steps()
    assert steps.count("judged_answer") == confidence_calls and "score_confidence" not in steps
    assert result.usage.llm_calls == len(steps) <= MAX_MODEL_CALLS


async def test_unreadable_judgements_end_as_offline_within_the_cap() -> None:
    """Prose to every judged draft: 2 calls, then the offline verdict for the same evidence (too
    weak here), so no free-text answer, no rewrite and no second attempt: an unusable judgement
    buys no more calls, and the prose is no answer."""
    double = ModelDouble()
    double.configure(structured="prose")
    kb = ScriptedSource(
        "knowledge_base", [found("knowledge_base", finding(text=PRO, title="Pricing", score=0.7))]
    )
    graph = build_graph(chat_model=chat_model(double), tools={"knowledge_base": kb.tool()})
    result = await aask(QUESTION, graph=graph, context=Context(sources=["knowledge_base"], choose_one_source=True))
    assert len(double.requests) == result.usage.llm_calls == 3 < MAX_MODEL_CALLS
    assert double.steps() == ["call_tools", "judged_answer", "judged_answer"]
    assert [r["kind"] for r in double.requests][1:] == ["tools", "text"]
    assert result.confidence.level == "NOT_RELEVANT" and not result.citations
    assert result.attempts == 1
    assert result.status != "unavailable"


async def test_a_chat_model_without_tool_support_is_asked_another_way() -> None:
    """A LangChain chat model whose class offers no bind_tools: nothing is sent, nothing counted."""
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel

    model = GenericFakeChatModel(
        messages=iter([AIMessage(content='{"level": "LOW", "reason": "r", "can_answer": false}')])
    )
    result, usage = await judge(model)
    assert result.parsed is not None and result.parsed.level == "LOW"
    assert result.tried == ["function_calling:not_offered", "json_schema:parsed"]
    assert usage["llm_calls"] == 1
