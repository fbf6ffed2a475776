"""ChatOpenAI over mocked HTTP: tool calls, error tool messages and structured output really
cross the OpenAI wire format, and the key never leaks into the result.

openai 3.x sends through httpx2, which respx does not patch, so the mock is httpx2's own
MockTransport injected as the model's HTTP client: still the network edge, nothing patched.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import httpx2
from langchain_openai import ChatOpenAI

from grounded_agent import aask, build_graph
from grounded_agent.context import Context
from tests.fakes import ScriptedSource, failed, finding, found

KEY = "sk-test-wire-0123456789abcdefghij"
PRO = "The Pro plan costs 49 EUR per user per month. It includes priority support."


def completion(message: dict[str, Any], prompt: int = 120, out: int = 12) -> httpx2.Response:
    return httpx2.Response(
        200,
        json={
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 0,
            "model": "gpt-4o-mini",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", **message},
                    "finish_reason": "tool_calls" if "tool_calls" in message else "stop",
                }
            ],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": out,
                "total_tokens": prompt + out,
            },
        },
    )


def as_events(response: httpx2.Response) -> httpx2.Response:
    """The same completion as a server that streams sends it: server-sent chunks, a tool call's
    arguments in three pieces, the usage in the last chunk."""
    body = json.loads(response.content)
    message = body["choices"][0]["message"]
    deltas: list[dict[str, Any]] = []
    for call in message.get("tool_calls") or []:
        args = call["function"]["arguments"]
        cut = [0, len(args) // 3, 2 * len(args) // 3, len(args)]
        deltas.append({"role": "assistant", "tool_calls": [{"index": 0, "id": call["id"],
                       "type": "function", "function": {"name": call["function"]["name"],
                                                        "arguments": ""}}]})
        deltas += [{"tool_calls": [{"index": 0, "function": {"arguments": args[a:b]}}]}
                   for a, b in itertools.pairwise(cut)]
    if message.get("content"):
        deltas.append({"role": "assistant", "content": message["content"]})
    chunks = [{"id": body["id"], "object": "chat.completion.chunk", "created": 0,
               "model": body["model"], "choices": [{"index": 0, "delta": d, "finish_reason": None}]}
              for d in deltas]
    chunks.append({"id": body["id"], "object": "chat.completion.chunk", "created": 0,
                   "model": body["model"], "usage": body["usage"], "choices": [
                       {"index": 0, "delta": {}, "finish_reason": body["choices"][0]["finish_reason"]}]})
    text = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
    return httpx2.Response(200, text=text, headers={"content-type": "text/event-stream"})


def fn_call(name: str, args: dict[str, Any], call_id: str) -> dict[str, Any]:
    return {
        "content": None,
        "tool_calls": [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)},
            }
        ],
    }


async def test_tool_calls_error_tool_messages_and_structured_output_cross_the_wire(
    caplog: Any,
) -> None:
    caplog.set_level("DEBUG")
    kb = ScriptedSource(
        "knowledge_base", [found("knowledge_base", finding(text=PRO, title="Pricing", score=0.7))]
    )
    web = ScriptedSource("web", [failed("web", "rate_limit")])
    replies = [
        completion(fn_call("knowledge_base", {"query": "Pro plan price", "k": 3}, "call_kb")),
        completion(
            fn_call(
                "JudgedDraft",
                {"level": "HIGH", "reason": "passage 1 states the price", "can_answer": True,
                 "answer": "The Pro plan costs 49 EUR per user per month [1]."},
                "call_judge",
            )
        ),
    ]
    requests: list[httpx2.Request] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        assert request.url.path == "/v1/chat/completions"
        requests.append(request)
        reply = replies[len(requests) - 1]
        return as_events(reply) if json.loads(request.content).get("stream") else reply

    model = ChatOpenAI(
        model="gpt-4o-mini",
        base_url="https://llm.test/v1",
        api_key=KEY,
        max_retries=0,
        http_async_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handler)),
    )
    graph = build_graph(chat_model=model, tools={"knowledge_base": kb.tool(), "web": web.tool()})
    result = await aask(
        "What does the Pro plan cost?",
        sources=["knowledge_base", "web"],
        graph=graph,
        context=Context(),
    )
    bodies = [json.loads(r.content) for r in requests]
    assert requests[0].headers["authorization"] == f"Bearer {KEY}"  # the key goes on the wire only
    assert len(bodies) == 2
    # 1: the allow-listed tools are offered as functions
    # the routing call: the source tools and the two document tools (route_request)
    assert {t["function"]["name"] for t in bodies[0]["tools"]} == {
        "knowledge_base", "web", "search_documents", "search_and_ask"
    }
    # 2: the evidence is left open locally, so the draft call judges it: the judged draft is the
    # one function offered, and the request carries the numbered sources (the usable evidence)
    assert bodies[1]["tools"][0]["function"]["name"] == "JudgedDraft"
    assert bodies[1]["tool_choice"]["function"]["name"] == "JudgedDraft"
    assert bodies[1]["stream"] is True and not bodies[0].get("stream")  # the draft streams
    user = next(m for m in bodies[1]["messages"] if m["role"] == "user")
    assert '<source n="1" title="Pricing"' in user["content"] and "49 EUR" in user["content"]
    # the model's own arguments reached the tool
    assert kb.queries == ["Pro plan price"]
    assert result.status == "partial"
    assert result.confidence.level == "HIGH"
    assert result.usage.llm_calls == 2
    assert result.usage.input_tokens == 240
    # the key is nowhere in the output or logs
    assert KEY not in result.model_dump_json()
    assert KEY not in caplog.text
