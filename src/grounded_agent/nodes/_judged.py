"""The draft call that also judges the confidence (when the local signals left it open): one
structured reply with the level and, for HIGH or MEDIUM, the answer. Pure of state updates: the
draft node merges what it returns."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from grounded_agent.context import Context
from grounded_agent.model_calls import Fallback
from grounded_agent.nodes._common import step
from grounded_agent.schemas import Confidence, JudgedDraft
from grounded_agent.state import AgentState
from grounded_agent.structured import structured_call

log = logging.getLogger(__name__)

PARSE_TRIES = 2
"""The structured call is tried once more when its output cannot be read; then the offline
verdict held by score_confidence stands, with the quoted draft if it answers."""

FALLBACK = Fallback(
    node="draft_answer",
    where="the answer step",
    instead="the evidence was judged as offline (an answer is quoted from the sources)",
    trail="offline verdict held; an answer is quoted",
)


@dataclass
class Judged:
    """The judged draft call's outcome: the confidence, the draft text (None: the model wrote
    none, the held verdict's quote stands in if it answers), what to report."""

    confidence: Confidence
    text: str | None
    usage: dict[str, int]
    trail: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[dict[str, Any]] = field(default_factory=list)
    rewrite: str | None = None
    """LOW: the query the model proposes for the second search (one call, not two)."""

    @property
    def replied(self) -> bool:
        return self.text is not None


async def judged_draft(
    state: AgentState, ctx: Context, model: Any, messages: list[Any], held: Confidence
) -> Judged:
    """One structured call (function calling, json_schema or JSON text: structured.py). Without
    a usable judgement the outcome is the offline one for the same evidence (`held`): never a
    more confident one."""
    usage: dict[str, int] = {}
    outcome = await structured_call(
        model, JudgedDraft, messages, state=state, ctx=ctx, usage=usage, parse_tries=PARSE_TRIES,
        max_tokens=ctx.answer_max_tokens + ctx.judgement_max_tokens,
    )
    parsed = outcome.parsed
    if parsed is not None:
        can_answer = parsed.can_answer and parsed.level in ("HIGH", "MEDIUM")
        conf = Confidence(level=parsed.level, reason=parsed.reason, can_answer=can_answer)
        rewrite = " ".join((parsed.query or "").split()).strip('"') or None
        entry = step(state, "draft_answer", f"{conf.level} (model)", parsed.reason,
                     level=conf.level, how="model")
        return Judged(conf, parsed.answer if can_answer else "", usage, [entry],
                      rewrite=rewrite if parsed.level == "LOW" else None)
    if outcome.exhausted is not None or outcome.failure is not None:
        warnings, trail = FALLBACK.report(state, exhausted=outcome.exhausted,
                                          failure=outcome.failure)
        return Judged(held, None, usage, trail, warnings)
    log.warning("judged draft could not be read (%s)", ", ".join(outcome.tried))
    entry = step(state, "draft_answer", "unparseable",
                 f"the judgement could not be read; offline verdict: {held.reason}",
                 level=held.level, how="unparseable")
    return Judged(held, None, usage, [entry])
