"""Routing node: the one place the model chooses tools. Is the request a list of documents, a
question, or both, and which sources does a question search with what query? Decided once per
turn, in one model call.

LLM mode: one call offered the source tools, plus the two document tools (search_documents,
search_and_ask) when the knowledge base is among the sources. A source-tool call is the question
intent; its calls go to call_tools, which checks them against the allow-list and each tool's
schema and runs them (it asks no model). A document-tool call's arguments are validated in code;
a refused one is shown to the model once more; a second refusal or a failed call falls back to
the offline rule (`intents.offline_intent`), which offline mode uses alone. A valid document-tool
call stands only where the offline rule agrees (`intents.confirms_documents`): a small model picks
the document tools for ordinary questions; otherwise the rule routes the request and the sources
are searched with the question, with no further call. The conversation itself is in
`nodes/_router.py`; this node decides and writes the state once.
"""

from __future__ import annotations

import asyncio
from datetime import date
from typing import Any

from langgraph.runtime import Runtime

from grounded_agent.context import Context
from grounded_agent.deps import Deps
from grounded_agent.intents import RESULT_TYPES, Decision, confirms_documents, offline_intent
from grounded_agent.nodes._common import ctx_of, nonempty, step
from grounded_agent.nodes._router import Routing, choose_sources, route
from grounded_agent.state import AgentState, turn_of


async def route_request(
    state: AgentState, runtime: Runtime[Context], *, deps: Deps
) -> dict[str, Any]:
    """Chooses the intent and writes what the next nodes need: the search, the query, the
    source-tool calls."""
    ctx = ctx_of(runtime)
    today = date.today()
    requested = list(turn_of(state).get("requested") or [])
    query = str(turn_of(state).get("query") or state.get("question") or "")
    model = deps.model(ctx)
    routing = Routing()
    if model is not None and not ctx.choose_one_source and nothing_to_choose(requested, query, today):
        routing.trail.append(step(
            state, "route_request", "tools_chosen_without_model",
            f"one source ({requested[0]}) and a question: it is searched with the query, and the "
            "model is not asked to choose"))
        model = None
    if model is not None:
        tools = await asyncio.to_thread(deps.available_tools, ctx, requested)
        if "knowledge_base" in requested:
            routing = await route(model, tools, state, ctx, today)
        elif tools:
            routing = await choose_sources(model, tools, state, ctx, today)
    decision = routing.decision
    if decision is None and "knowledge_base" not in requested:
        decision = Decision("ask", "sources")  # documents are listed from the knowledge base only
    if decision is None:
        decision = offline_intent(query, today)
    routing.trail.append(step(state, "route_request", f"intent:{decision.intent}",
                              f"{decision.how}: {decision.describe()}", intent=decision.intent,
                              how=decision.how))
    return {
        **_apply(state, decision, routing.calls if decision.intent == "ask" else None,
                 routing.rejected),
        "trail": routing.trail,
        "warnings": routing.warnings,
        **nonempty(usage=routing.usage),
    }


def nothing_to_choose(requested: list[str], query: str, today: date) -> bool:
    """One source and a request the offline rule reads as a question: the model could only
    reword the query of the one search there is to run (a document request, or a request the rule
    cannot read, still goes to the model)."""
    return len(requested) == 1 and not confirms_documents(query, today)


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

