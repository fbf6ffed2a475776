"""The routing node's model conversation: one call offered the source tools (and the two document
tools when the knowledge base is among the sources), one more after a refused document-tool call.
Each helper returns a `Routing`; route_request merges it once."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import date
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from grounded_agent.context import Context
from grounded_agent.intents import (
    ROUTER_TOOLS,
    Decision,
    confirms_documents,
    decide,
    document_tool_specs,
)
from grounded_agent.llm.calls import Fallback, ModelReply, add_usage, ask_model, remaining_time
from grounded_agent.nodes._common import step
from grounded_agent.prompts.call_tools import CALL_TOOLS_USER
from grounded_agent.prompts.route_request import RETRY_TEXT
from grounded_agent.schemas import SourceName
from grounded_agent.state import AgentState, turn_of
from grounded_agent.tools.base import SourceTool

log = logging.getLogger(__name__)

ROUTER_ROUNDS = 2
"""Routing calls per request: one, and one more after a refused document-tool call."""

FALLBACK = Fallback(
    "route_request", "the request was routed by the offline rule and every requested source "
    "searched with the question", where="the routing step",
    budget_warning="model budget spent; the request was routed by the offline rule",
    trail="offline rule used",
)
SOURCES_FALLBACK = Fallback(
    "route_request", "every requested source was searched with the question",
    where="the search step", budget_warning="model budget spent; fixed routing used",
    trail="fixed routing used",
)
"""Without the knowledge base there is no document intent: a failed call only loses the
model's choice of searches."""

ONE_CALL = "only one tool call with a document tool"


@dataclass
class Routing:
    """What the routing call(s) chose and what they report; the node merges it once.

    `calls`: the source-tool calls the model chose (possibly none), for call_tools to check and
    run; None when no model chose them (call_tools then searches every source with the query).
    """

    decision: Decision | None = None
    calls: list[dict[str, Any]] | None = None
    usage: dict[str, int] = field(default_factory=dict)
    trail: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[dict[str, Any]] = field(default_factory=list)
    rejected: list[dict[str, Any]] = field(default_factory=list)

    def add(self, reply: ModelReply) -> None:
        add_usage(self.usage, reply.usage)
        self.warnings += reply.warnings
        self.trail += reply.trail


def search_reserve(state: AgentState, ctx: Context) -> float:
    """Seconds kept for the sources after the tool-choosing call: one tool timeout, at most half
    of what is left."""
    return min(ctx.tool_timeout_s, remaining_time(state) / 2)


def _messages(
    state: AgentState, ctx: Context, today: date, tools: dict[SourceName, SourceTool],
    routing: bool,
) -> list[Any]:
    system = ctx.call_tools_system_prompt.format(today=today.isoformat(), sources=", ".join(tools))
    if routing:
        system += "\n" + ctx.route_request_system_prompt.format(today=today.isoformat(),
                                                                year=today.year)
    user = CALL_TOOLS_USER.format(question=state["question"],
                                  query=turn_of(state).get("query") or state["question"])
    return [SystemMessage(system), HumanMessage(user)]


def _source_calls(message: AIMessage) -> list[dict[str, Any]]:
    return [{"id": c.get("id"), "name": c.get("name"), "args": c.get("args") or {}}
            for c in message.tool_calls]


async def choose_sources(
    model: Any, tools: dict[SourceName, SourceTool], state: AgentState, ctx: Context, today: date
) -> Routing:
    """Without the knowledge base: the question intent, and the model's choice of searches."""
    routing = Routing()
    reply = await ask_model(
        model, _messages(state, ctx, today, tools, routing=False), state=state, ctx=ctx,
        fallback=SOURCES_FALLBACK, tools=[t.as_openai_tool() for t in tools.values()],
        # the search itself keeps its time: a slow model must not make a source look down
        reserve=search_reserve(state, ctx), max_tokens=ctx.judgement_max_tokens,
    )
    routing.add(reply)
    if isinstance(reply.message, AIMessage):
        routing.calls = _source_calls(reply.message)
    return routing


async def route(
    model: Any, tools: dict[SourceName, SourceTool], state: AgentState, ctx: Context, today: date
) -> Routing:
    """A document intent, or the question intent with the source-tool calls to run; no decision
    when the model could not be used or gave no valid call (the offline rule decides then)."""
    routing = Routing()
    specs = [t.as_openai_tool() for t in tools.values()] + document_tool_specs()
    messages = _messages(state, ctx, today, tools, routing=True)
    for _ in range(ROUTER_ROUNDS):
        reply = await ask_model(
            model, messages, state=state, ctx=ctx, fallback=FALLBACK, tools=specs,
            spent=routing.usage, reserve=search_reserve(state, ctx),
            max_tokens=ctx.judgement_max_tokens,
        )
        routing.add(reply)
        message = reply.message
        if not isinstance(message, AIMessage):
            return routing
        calls = list(message.tool_calls)
        documents = [c for c in calls if c.get("name") in ROUTER_TOOLS]
        if not documents:  # a question: call_tools runs these calls (and checks them)
            routing.decision, routing.calls = Decision("ask", "router"), _source_calls(message)
            return routing
        first = documents[0]
        decision, why = decide(str(first.get("name")), dict(first.get("args") or {}), today)
        for c in calls:
            if c is not first:
                _reject(routing, state, str(c.get("name") or ""), ONE_CALL)
        if decision is not None:
            routing.decision = _confirmed(routing, state, decision, today)
            return routing
        reason = why or "invalid arguments"
        _reject(routing, state, str(first.get("name")), reason)
        messages += [message, *(
            ToolMessage(content=RETRY_TEXT.format(reason=reason if c is first else ONE_CALL),
                        tool_call_id=str(c.get("id") or "call"),
                        name=str(c.get("name") or "unknown"), status="error")
            for c in calls
        )]
    routing.trail.append(step(state, "route_request", "router_gave_up",
                              f"no valid document-tool call in {ROUTER_ROUNDS} rounds"))
    return routing


def _confirmed(
    routing: Routing, state: AgentState, decision: Decision, today: date
) -> Decision | None:
    """The model's document intent, or None where the offline rule does not see a document
    request: the rule routes it then, and the sources are searched with the question."""
    request = str(turn_of(state).get("query") or state.get("question") or "")
    if confirms_documents(request, today):
        return decision
    routing.trail.append(step(state, "route_request", "document_intent_not_confirmed",
                              f"the model chose {decision.intent}; the request names no "
                              "documents, so the offline rule routes it", intent=decision.intent))
    return None


def _reject(routing: Routing, state: AgentState, name: str, reason: str) -> None:
    log.info("routing call rejected: %s", reason)
    routing.rejected.append({"name": name, "reason": reason, "attempt": 1})
    routing.trail.append(step(state, "route_request", "rejected_tool_call", reason, tool=name))
    routing.warnings.append({"kind": "rejected_tool_call", "detail": reason})
