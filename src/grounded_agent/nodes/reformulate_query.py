"""Reformulate: one simpler, broader rewrite of the original question for the second attempt."""

from __future__ import annotations

import logging
import re
from typing import Any

from langchain_core.messages import HumanMessage, SystemMessage
from langgraph.runtime import Runtime

from grounded_agent.context import Context
from grounded_agent.deps import (
    FAILED_CALL,
    BudgetExhausted,
    Deps,
    ai_text,
    call_model,
    check_budget,
    model_unavailable,
    usage_of,
)
from grounded_agent.graph.routing import is_repeat
from grounded_agent.nodes._common import ctx_of, step
from grounded_agent.prompts.reformulate_query import REFORMULATE_QUERY_USER
from grounded_agent.state import AgentState
from grounded_agent.text import STOPWORDS, tokens

log = logging.getLogger(__name__)

_QUESTION_WORDS = {"what", "which", "who", "whom", "whose", "when", "where", "why", "how"}


def local_rewrite(question: str, tried: list[str]) -> str:
    """Keyword form of the question: the content words, without question words and filler."""
    words = [t for t in tokens(question) if t not in STOPWORDS and t not in _QUESTION_WORDS]
    rewrite = " ".join(dict.fromkeys(words)) or question
    if rewrite.lower() in {q.lower() for q in tried} and len(words) > 2:
        rewrite = " ".join(dict.fromkeys(words[: max(2, len(words) - 1)]))
    return rewrite


async def reformulate_query(
    state: AgentState, runtime: Runtime[Context], *, deps: Deps
) -> dict[str, Any]:
    ctx = ctx_of(runtime)
    question = str(state["question"])
    tried = list(state.get("queries") or [])
    attempt = int(state.get("attempt") or 1)
    model = deps.model(ctx)
    usage: dict[str, int] = {}
    rewrite, how = "", "local"
    failed_model = False
    if model is not None:
        try:
            check_budget(state, ctx)
            reply = await call_model(
                model,
                [
                    SystemMessage(ctx.reformulate_query_system_prompt),
                    HumanMessage(
                        REFORMULATE_QUERY_USER.format(question=question, queries="\n".join(tried))
                    ),
                ],
                state,
            )
            usage = usage_of(reply)
            rewrite = re.sub(r"\s+", " ", ai_text(reply)).strip().strip('"')[:300]
            how = "model"
        except BudgetExhausted as exc:
            how = f"local (model budget spent: {exc})"
        except Exception:
            log.warning("reformulation call failed; using the local rewrite", exc_info=True)
            how = "local (model call failed)"
            usage = dict(FAILED_CALL)
            failed_model = True
    if not rewrite:
        rewrite = local_rewrite(question, tried)
    if is_repeat(rewrite, tried):
        # the same search again cannot find anything new: no second attempt is spent on it
        update: dict[str, Any] = {
            "query": rewrite,
            "trail": [
                step(
                    state,
                    "reformulate_query",
                    "rewrite_repeats_query",
                    f"{how}: {rewrite!r} was already searched",
                    query=rewrite,
                )
            ],
        }
    else:
        update = {
            "attempt": attempt + 1,
            "query": rewrite,
            "trail": [
                step(state, "reformulate_query", "rewrite", f"{how}: {rewrite}", query=rewrite)
            ],
        }
    if usage:
        update["usage"] = usage
    if failed_model:
        update["warnings"] = [model_unavailable("the query rewrite", "a local rewrite was used")]
    return update
