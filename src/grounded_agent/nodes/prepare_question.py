"""Entry node: validate the input, start a clean turn, resolve a follow-up against the thread."""

from __future__ import annotations

import logging
import time
import uuid
from typing import Any

from langchain_core.messages import HumanMessage, SystemMessage
from langgraph.runtime import Runtime

from grounded_agent.context import Context, parse_sources
from grounded_agent.deps import (
    FAILED_CALL,
    BudgetExhausted,
    Deps,
    ai_text,
    call_model,
    check_budget,
    usage_of,
)
from grounded_agent.nodes._common import ctx_of, step
from grounded_agent.prompts.prepare_question import CONDENSE_QUESTION_SYSTEM, CONDENSE_QUESTION_USER
from grounded_agent.schemas import InvalidQuestion, validate_question
from grounded_agent.state import RESET, AgentState, fresh

log = logging.getLogger(__name__)

HISTORY_TURNS = 3
"""Earlier turns of a thread shown to the model when it resolves a follow-up."""


async def prepare_question(
    state: AgentState, runtime: Runtime[Context], *, deps: Deps
) -> dict[str, Any]:
    """Fails fast on bad input, so nothing is searched or spent for a question that is not one."""
    ctx = ctx_of(runtime)
    question = validate_question(state.get("question"))
    try:
        # in a thread, `sources` may still hold the previous turn's reports: only names count
        raw = state.get("sources")
        names = raw if raw and all(isinstance(x, str) for x in raw) else ctx.sources
        requested = parse_sources(names)
    except ValueError as exc:
        raise InvalidQuestion(str(exc)) from exc
    turn: dict[str, Any] = {
        "question": question,
        "run_id": uuid.uuid4().hex[:12],
        "requested": list(requested),
        "deadline": time.time() + ctx.time_budget_s,
        "attempt": 1,
        "attempt_cap": ctx.attempt_cap,
        "query": question,
    }
    model = deps.model(ctx)
    trail: list[dict[str, Any]] = []
    usage: dict[str, int] = {RESET: 1}
    if model is None:
        trail.append(
            step(
                turn,
                "prepare_question",
                "offline_mode",
                "no language model configured: scoring and answers are local and extractive",
            )
        )
    history = [h for h in (state.get("history") or []) if h.get("answer")][-HISTORY_TURNS:]
    if history and model is not None:
        try:
            check_budget(turn, ctx)
            reply = await call_model(
                model,
                [
                    SystemMessage(CONDENSE_QUESTION_SYSTEM),
                    HumanMessage(
                        CONDENSE_QUESTION_USER.format(
                            history="\n".join(
                                f"<turn><question>{h['question']}</question>"
                                f"<answer>{h['answer']}</answer></turn>"
                                for h in history
                            ),
                            question=question,
                        )
                    ),
                ],
                state,
            )
            usage.update(usage_of(reply))
            standalone = " ".join(ai_text(reply).split())[:500]
            if standalone:
                turn["query"] = standalone
                trail.append(step(turn, "prepare_question", "resolved_follow_up", standalone))
        except BudgetExhausted:
            log.info("no budget left to resolve the follow-up; searching for it as asked")
        except Exception:
            log.warning(
                "follow-up resolution failed; searching for the question as asked", exc_info=True
            )
            for k, v in FAILED_CALL.items():
                usage[k] = usage.get(k, 0) + v
    trail.append(
        step(
            turn,
            "prepare_question",
            "accepted",
            f"sources: {', '.join(requested)}",
            sources=requested,
        )
    )
    return {
        **turn,
        "offline": model is None,
        "queries": fresh(),
        "outcomes": fresh(),
        "rejected_calls": fresh(),
        "messages": fresh(),
        "evidence": [],
        "confidence": {},
        "status": "",
        "answer": "",
        "citations": [],
        "attempts": 1,
        "warnings": fresh(),
        "trail": fresh(trail),
        "usage": usage,
    }
