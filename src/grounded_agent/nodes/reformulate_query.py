"""Reformulate: one simpler, broader rewrite of the original question for the second attempt.

With a model, the confidence judgement that called the evidence LOW proposes the rewrite in the
same call (`turn.rewrite`): it is taken as is, and the model is asked here only when there is
none, or when it repeats a query already searched."""

from __future__ import annotations

import logging
import re
from typing import Any

from langchain_core.messages import HumanMessage, SystemMessage
from langgraph.runtime import Runtime

from grounded_agent.context import Context
from grounded_agent.deps import Deps
from grounded_agent.grounding.text import QUESTION_LEADS, STOPWORDS, tokens
from grounded_agent.llm.calls import Fallback, ask_model
from grounded_agent.nodes._common import ctx_of, is_repeat, nonempty, step
from grounded_agent.prompts.reformulate_query import REFORMULATE_QUERY_USER
from grounded_agent.state import AgentState, turn_of

log = logging.getLogger(__name__)

FALLBACK = Fallback(
    node="reformulate_query", where="the query rewrite", instead="a local rewrite was used"
)


def local_rewrite(question: str, tried: list[str]) -> str:
    """Keyword form of the question: the content words, without question words and filler."""
    words = [t for t in tokens(question) if t not in STOPWORDS and t not in QUESTION_LEADS]
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
    attempt = int(turn_of(state).get("attempt") or 1)
    model = deps.model(ctx)
    rewrite, how = "", "local"
    update: dict[str, Any] = {}  # usage and warnings of the model call
    proposed = str(turn_of(state).get("rewrite") or "")[:300]
    if proposed and not is_repeat(proposed, tried):
        rewrite, how = proposed, "proposed by the confidence judgement"
    elif model is not None:
        messages = [
            SystemMessage(ctx.reformulate_query_system_prompt),
            HumanMessage(REFORMULATE_QUERY_USER.format(question=question, queries="\n".join(tried))),
        ]
        reply = await ask_model(model, messages, state=state, ctx=ctx, fallback=FALLBACK,
                                max_tokens=ctx.rewrite_max_tokens)
        rewrite = re.sub(r"\s+", " ", reply.text).strip().strip('"')[:300]
        if reply.message is not None:
            how = "model"
        elif reply.exhausted is not None:
            how = f"local (model budget spent: {reply.exhausted})"
        else:
            how = "local (model call failed)"
        update = nonempty(usage=reply.usage, warnings=reply.warnings)
    if not rewrite:
        rewrite = local_rewrite(question, tried)
    changed: dict[str, Any] = {"query": rewrite, "rewrite": None}
    if is_repeat(rewrite, tried):
        # the same search again cannot find anything new: no second attempt is spent on it
        decision, detail = "rewrite_repeats_query", f"{how}: {rewrite!r} was already searched"
    else:
        decision, detail = "rewrite", f"{how}: {rewrite}"
        changed["attempt"] = attempt + 1
    entry = step(state, "reformulate_query", decision, detail, query=rewrite)
    return {**update, "turn": changed, "trail": [entry]}
