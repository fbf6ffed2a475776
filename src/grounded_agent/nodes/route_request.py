"""Routing node: is the request a list of documents, a question, or both? Decided once per turn.

LLM mode, with the knowledge base among the sources: one model call offered the source tools and
the two document tools (search_documents, search_and_ask). A source-tool call is the question
intent, and its calls are handed to call_tools as they are (the routing call is the first
attempt's tool choice, not a second call). A document-tool call's arguments are validated in
code; a refused one is shown to the model once more; a second refusal or a failed call falls
back to the offline rule (`intents.offline_intent`), which offline mode uses alone. A valid
document-tool call stands only where the offline rule agrees (`intents.confirms_documents`): a
small model picks the document tools for ordinary questions; otherwise the rule routes the request
and the sources are searched with the question, with no further call.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import date
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.runtime import Runtime

from grounded_agent.context import Context
from grounded_agent.deps import Deps
from grounded_agent.intents import (
    RESULT_TYPES,
    ROUTER_TOOLS,
    Decision,
    confirms_documents,
    decide,
    document_tool_specs,
    offline_intent,
)
from grounded_agent.model_calls import Fallback, add_usage, ask_model
from grounded_agent.nodes._common import ctx_of, nonempty, step
from grounded_agent.nodes.call_tools import search_reserve
from grounded_agent.prompts.call_tools import CALL_TOOLS_USER
from grounded_agent.prompts.route_request import RETRY_TEXT
from grounded_agent.state import AgentState, turn_of

log = logging.getLogger(__name__)

ROUTER_ROUNDS = 2
"""Routing calls per request: one, and one more after a refused document-tool call."""

FALLBACK = Fallback(
    "route_request", "the request was routed by the offline rule and every requested source "
    "searched with the question", where="the routing step",
    budget_warning="model budget spent; the request was routed by the offline rule",
    trail="offline rule used",
)


async def route_request(
    state: AgentState, runtime: Runtime[Context], *, deps: Deps
) -> dict[str, Any]:
    """Chooses the intent and writes what the next nodes need: the search, the query, the
    knowledge base's tool calls."""
    ctx = ctx_of(runtime)
    today = date.today()
    trail: list[dict[str, Any]] = []
    warnings: list[dict[str, Any]] = []
    rejected: list[dict[str, Any]] = []
    usage: dict[str, int] = {}
    requested = list(turn_of(state).get("requested") or [])
    model = deps.model(ctx)
    routed_calls: list[dict[str, Any]] | None = None  # None: call_tools chooses as before
    decision: Decision | None = None
    if "knowledge_base" not in requested:  # documents are listed from the knowledge base only
        decision = Decision("ask", "sources")
    elif model is not None:
        router = _Router(state, ctx, today, usage, trail, warnings, rejected)
        decision, routed_calls = await router.run(model, deps, requested)
    if decision is None:
        query = turn_of(state).get("query") or state.get("question") or ""
        decision = offline_intent(str(query), today)
    trail.append(step(state, "route_request", f"intent:{decision.intent}",
                      f"{decision.how}: {decision.describe()}", intent=decision.intent,
                      how=decision.how))
    return {
        **_apply(state, decision, routed_calls, rejected),
        "trail": trail,
        "warnings": warnings,
        **nonempty(usage=usage),
    }


def _apply(
    state: AgentState, decision: Decision, routed_calls: list[dict[str, Any]] | None,
    rejected: list[dict[str, Any]],
) -> dict[str, Any]:
    """The state a decision sets; every intent field is written, so a thread's earlier turn
    leaves nothing behind."""
    turn: dict[str, Any] = {"intent": decision.intent, "routed_calls": routed_calls,
                            "scope": None, "rejected_calls": rejected}
    update: dict[str, Any] = {
        "turn": turn,
        "result_type": RESULT_TYPES[decision.intent],
        "search": decision.search.normalised().model_dump(mode="json") if decision.search else None,
        "documents": None,
        "coverage_limited": False,
    }
    if decision.query:
        turn["query"] = decision.query[:500]
    if decision.answer_language and not state.get("language"):
        update["language"] = decision.answer_language
    if decision.intent != "ask":
        turn["requested"] = ["knowledge_base"]  # the selection lives in the knowledge base
    return update


class _Router:
    """The routing calls of one request and what they report."""

    def __init__(
        self,
        state: AgentState,
        ctx: Context,
        today: date,
        usage: dict[str, int],
        trail: list[dict[str, Any]],
        warnings: list[dict[str, Any]],
        rejected: list[dict[str, Any]],
    ) -> None:
        self.state, self.ctx, self.today = state, ctx, today
        self.usage, self.trail, self.warnings, self.rejected = usage, trail, warnings, rejected

    async def run(
        self, model: Any, deps: Deps, requested: list[str]
    ) -> tuple[Decision | None, list[dict[str, Any]]]:
        """(a document intent, []) or (ask, the source-tool calls to run); (None, []) when the
        model could not be used or gave no valid call: the offline rule decides then, and
        call_tools asks the model no more."""
        state, ctx = self.state, self.ctx
        tools = await asyncio.to_thread(deps.available_tools, ctx, requested)
        specs = [t.as_openai_tool() for t in tools.values()] + document_tool_specs()
        system = (
            ctx.call_tools_system_prompt.format(today=self.today.isoformat(),
                                                sources=", ".join(tools))
            + "\n"
            + ctx.route_request_system_prompt.format(today=self.today.isoformat(),
                                                     year=self.today.year)
        )
        user = CALL_TOOLS_USER.format(question=state["question"],
                                      query=turn_of(state).get("query") or state["question"])
        messages: list[Any] = [SystemMessage(system), HumanMessage(user)]
        for _ in range(ROUTER_ROUNDS):
            reply = await ask_model(
                model, messages, state=state, ctx=ctx, fallback=FALLBACK, tools=specs,
                spent=self.usage, reserve=search_reserve(state, ctx), max_tokens=ctx.judgement_max_tokens,
            )
            add_usage(self.usage, reply.usage)
            self.warnings += reply.warnings
            self.trail += reply.trail
            message = reply.message
            if not isinstance(message, AIMessage):
                return None, []
            calls = list(message.tool_calls)
            documents = [c for c in calls if c.get("name") in ROUTER_TOOLS]
            if not documents:  # a question: call_tools runs these calls (and checks them)
                return Decision("ask", "router"), [
                    {"id": c.get("id"), "name": c.get("name"), "args": c.get("args") or {}}
                    for c in calls
                ]
            first = documents[0]
            decision, why = decide(str(first.get("name")), dict(first.get("args") or {}),
                                   self.today)
            others = [c for c in calls if c is not first]
            for c in others:
                self._reject(str(c.get("name") or ""), "only one tool call with a document tool")
            if decision is not None:
                return self._confirmed(decision)
            reason = why or "invalid arguments"
            self._reject(str(first.get("name")), reason)
            messages += [message, *(
                ToolMessage(
                    content=RETRY_TEXT.format(
                        reason=reason if c is first else "only one tool call with a document tool"
                    ),
                    tool_call_id=str(c.get("id") or "call"), name=str(c.get("name") or "unknown"),
                    status="error",
                ) for c in calls
            )]
        self.trail.append(step(state, "route_request", "router_gave_up",
                               f"no valid document-tool call in {ROUTER_ROUNDS} rounds"))
        return None, []

    def _confirmed(
        self, decision: Decision
    ) -> tuple[Decision | None, list[dict[str, Any]]]:
        """The model's document intent, or (None, []) where the offline rule does not see a
        document request: the rule routes it then, and call_tools asks the model no more."""
        request = str(turn_of(self.state).get("query") or self.state.get("question") or "")
        if confirms_documents(request, self.today):
            return decision, []
        self.trail.append(step(self.state, "route_request", "document_intent_not_confirmed",
                               f"the model chose {decision.intent}; the request names no "
                               "documents, so the offline rule routes it", intent=decision.intent))
        return None, []

    def _reject(self, name: str, reason: str) -> None:
        log.info("routing call rejected: %s", reason)
        self.rejected.append({"name": name, "reason": reason, "attempt": 1})
        self.trail.append(step(self.state, "route_request", "rejected_tool_call", reason,
                               tool=name))
        self.warnings.append({"kind": "rejected_tool_call", "detail": reason})
