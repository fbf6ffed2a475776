"""Entry node: validate the input, start a clean turn, resolve a follow-up against the thread."""

from __future__ import annotations

import logging
import time
import uuid
from typing import Any

from langchain_core.messages import HumanMessage, SystemMessage
from langgraph.runtime import Runtime

from grounded_agent.context import Context, checked_sources, parse_sources
from grounded_agent.deps import Deps
from grounded_agent.llm.calls import Fallback, ask_model
from grounded_agent.nodes._common import ctx_of, step
from grounded_agent.prompts.prepare_question import CONDENSE_QUESTION_SYSTEM, CONDENSE_QUESTION_USER
from grounded_agent.schemas import Confidence, InvalidQuestion, SourceName, validate_question
from grounded_agent.state import RESET, AgentState, fresh, new_turn

log = logging.getLogger(__name__)

HISTORY_TURNS = 3
"""Earlier turns of a thread shown to the model when it resolves a follow-up."""

FALLBACK = Fallback(node="prepare_question", instead="searching for the question as asked")
"""A follow-up that could not be resolved is searched as asked, without a warning."""


async def prepare_question(
    state: AgentState, runtime: Runtime[Context], *, deps: Deps
) -> dict[str, Any]:
    """Fails fast on bad input, so nothing is searched or spent for a question that is not one."""
    ctx = ctx_of(runtime)
    question = validate_question(state.get("question"))
    requested = _requested(state, ctx, deps)
    model = deps.model(ctx)
    turn = new_turn(
        run_id=uuid.uuid4().hex[:12],
        requested=list(requested),
        deadline=time.time() + ctx.time_budget_s,
        attempt=1,
        attempt_cap=ctx.attempt_cap,
        offline=model is None,
        query=question,
    )
    held = {"turn": turn}  # what step() and the model budget read before the update lands
    trail: list[dict[str, Any]] = []
    usage: dict[str, int] = {RESET: 1}
    if model is None:
        offline = "no language model configured: scoring and answers are local and extractive"
        trail.append(step(held, "prepare_question", "offline_mode", offline))
    history = [h for h in (state.get("history") or []) if h.get("answer")][-HISTORY_TURNS:]
    if history and model is not None:
        # the new turn's budget (its deadline, no calls yet), not what the last turn left
        reply = await ask_model(
            model, _condense(history, question), state=held, ctx=ctx, fallback=FALLBACK,
            max_tokens=ctx.rewrite_max_tokens,
        )
        usage.update(reply.usage)
        standalone = " ".join(reply.text.split())[:500]
        if standalone:
            turn["query"] = standalone
            trail.append(step(held, "prepare_question", "resolved_follow_up", standalone))
    accepted = f"sources: {', '.join(requested)}"
    trail.append(step(held, "prepare_question", "accepted", accepted, sources=requested))
    return {
        "question": question,
        "turn": turn,
        "queries": fresh(),
        "messages": fresh(),
        "confidence": Confidence(),
        "status": "",
        "answer": "",
        "citations": [],
        "closest": [],
        "attempts": 1,
        "warnings": fresh(),
        "trail": fresh(trail),
        "usage": usage,
    }


def _requested(state: AgentState, ctx: Context, deps: Deps) -> list[SourceName]:
    """The sources to search: the input's, the Context's, or the graph's default; each one the
    graph has. In a thread, `sources` may still hold the previous turn's reports: only a list of
    names counts."""
    raw = state.get("sources")
    names = [str(x) for x in raw] if raw and all(isinstance(x, str) for x in raw) else ctx.sources
    try:
        requested = parse_sources(names) if names else deps.default_sources()
        checked_sources(requested, deps.source_names())
    except ValueError as exc:
        raise InvalidQuestion(str(exc)) from exc
    return requested


def _condense(history: list[dict[str, Any]], question: str) -> list[Any]:
    """The messages that ask for a follow-up as a standalone question."""
    turns = "\n".join(
        f"<turn><question>{h['question']}</question><answer>{h['answer']}</answer></turn>"
        for h in history
    )
    return [
        SystemMessage(CONDENSE_QUESTION_SYSTEM),
        HumanMessage(CONDENSE_QUESTION_USER.format(history=turns, question=question)),
    ]
