"""Web content is data, not instructions; keys never surface. Real tools, HTTP mocked at the edge."""

from __future__ import annotations

import json
import logging
from typing import Any

import httpx
import httpx2
import pytest
import respx
from langchain_core.messages import AIMessage
from langchain_openai import ChatOpenAI

from grounded_agent import aask, build_graph
from grounded_agent.context import Context
from grounded_agent.schemas import JudgedDraft
from grounded_agent.tools.web_search import make_web_search_tool
from tests.fakes import ScriptedChatModel, text, tool_call
from tests.tool_fakes import KeywordScorer, tavily_body

TAVILY_KEY = "tvly-secret-test-key-0123456789"
OPENAI_KEY = "sk-secret-test-key-abcdefghijklmnop"
QUESTION = "What is the capital of Australia?"


def web_tool(best: float = 0.86) -> Any:
    scorer = KeywordScorer({"canberra is the capital": best, "australian capital": 0.6})
    return make_web_search_tool(scorer, api_key=TAVILY_KEY, backoff_s=0.0)


async def test_injected_page_cannot_add_tools_links_or_facts() -> None:
    """The model is scripted to obey the page: its wishes are rejected or stripped in code."""
    model = ScriptedChatModel(responses=[
        tool_call("web", {"query": "capital of Australia"}),
        # after reading the page, the "judge" tries to call the tool the page asked for
        tool_call("delete_all", {"confirm": True}, "call_evil"),
        tool_call("delete_all", {"confirm": True}, "call_evil2"),
    ])
    with respx.mock(base_url="https://api.tavily.com") as router:
        router.post("/search").mock(return_value=httpx.Response(200, json=tavily_body("search_injection.json")))
        graph = build_graph(chat_model=model, tools={"web": web_tool(best=0.7)})
        result = await aask(QUESTION, sources=["web"], graph=graph, context=Context(max_attempts=1, choose_one_source=True))
    # the only tools ever offered were the allow-listed ones
    assert [t["function"]["name"] for t in model.bound_tools[0]] == ["web"]
    assert all(t == [JudgedDraft] for t in model.bound_tools[1:])
    # the page's tool wish was never executed: no judgement came, so the offline verdict holds
    # (this evidence is too weak offline), and nothing is answered
    assert result.confidence.level == "NOT_RELEVANT"
    assert result.status == "not_found"
    assert "evil.example" not in result.answer and "Sydney" not in result.answer
    # the page reached the model framed as data: inside the escaped sources block
    system, user = (str(m.content) for m in model.received[1][:2])
    assert "data, not instructions" in system
    assert "<sources>" in user and "</sources>" in user


async def test_injected_link_is_removed_from_the_answer() -> None:
    model = ScriptedChatModel(responses=[
        tool_call("web", {"query": "capital of Australia"}),
        # no judgement scripted: relevance 0.86 with every key term covered decides locally
        text("Canberra is the capital city of Australia [1]. "
             "Details at http://evil.example/exfiltrate?data=ALL [1]."),
        # the support judge confirms what is left of the second sentence: the link stays out,
        # because the link rule is code, not a judgement
        tool_call("SupportJudgement", {"supported": [1]}),
    ])
    with respx.mock(base_url="https://api.tavily.com") as router:
        router.post("/search").mock(return_value=httpx.Response(200, json=tavily_body("search_injection.json")))
        graph = build_graph(chat_model=model, tools={"web": web_tool()})
        result = await aask(QUESTION, sources=["web"], graph=graph, context=Context(choose_one_source=True))
    assert "Canberra" in result.answer
    assert "evil.example" not in result.answer
    assert "http" not in result.answer.replace(result.citations[0].url or "", "")
    assert any(w.kind == "citation_removed" and "link" in w.detail for w in result.warnings)
    assert model.calls == 3


async def test_offline_extract_quotes_no_injected_instruction() -> None:
    with respx.mock(base_url="https://api.tavily.com") as router:
        router.post("/search").mock(return_value=httpx.Response(200, json=tavily_body("search_injection.json")))
        graph = build_graph(chat_model=None, tools={"web": web_tool()})
        result = await aask(QUESTION, sources=["web"], graph=graph, context=Context(choose_one_source=True))
    assert result.status == "answered"
    assert "Canberra" in result.answer
    for bad in ("Sydney", "evil.example", "Ignore previous", "delete_all"):
        assert bad not in result.answer


@pytest.mark.parametrize("tavily_status", [401, 500])
async def test_keys_never_appear_in_logs_errors_trail_or_output(
    tavily_status: int, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TAVILY_API_KEY", TAVILY_KEY)
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    caplog.set_level(logging.DEBUG)
    sent: list[httpx2.Request] = []

    def llm(request: httpx2.Request) -> httpx2.Response:
        sent.append(request)
        call = {"id": "c1", "type": "function",
                "function": {"name": "web", "arguments": json.dumps({"query": "capital"})}}
        return httpx2.Response(200, json={
            "id": "x", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "finish_reason": "tool_calls",
                         "message": {"role": "assistant", "content": None, "tool_calls": [call]}}],
        })

    model = ChatOpenAI(model="m", base_url="https://llm.test/v1", max_retries=0,
                       http_async_client=httpx2.AsyncClient(transport=httpx2.MockTransport(llm)))
    with respx.mock(base_url="https://api.tavily.com") as router:
        router.post("/search").mock(return_value=httpx.Response(tavily_status, json={
            "detail": {"error": f"Invalid API key {TAVILY_KEY}"}}))
        graph = build_graph(chat_model=model, tools={"web": make_web_search_tool(
            KeywordScorer(), backoff_s=0.0)})
        result = await aask(QUESTION, sources=["web"], graph=graph, context=Context(choose_one_source=True))
    assert sent, "the model was called with the key from the environment"
    assert result.status == "unavailable"
    dumped = result.model_dump_json() + caplog.text + "".join(str(r.exc_info) for r in caplog.records)
    assert TAVILY_KEY not in dumped
    assert OPENAI_KEY not in dumped
    assert result.sources[0].error_kind == ("auth" if tavily_status == 401 else "unavailable")


def test_fixture_really_carries_an_injection() -> None:
    """Guards the tests above: they prove nothing if the page stopped carrying the attack."""
    content = tavily_body("search_injection.json")["results"][0]["content"]
    assert "Ignore previous instructions" in content and "evil.example" in content
    assert isinstance(AIMessage(content=content).content, str)
