"""The draft call that also judges the confidence (when the local signals left it open): one
structured reply with the level and, for HIGH or MEDIUM, the answer. Where a model did not write
that as readable JSON, the offline verdict for the same evidence stands and, if it answers, the
model is asked once more for the answer alone in free text (as the plain draft step asks); an
endpoint where that happened is asked so at once for later questions. Pure of state updates: the
draft node merges what it returns."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from grounded_agent.context import Context
from grounded_agent.llm.calls import Fallback, add_usage, ask_model
from grounded_agent.llm.structured import plain_first, remember_plain, structured_call
from grounded_agent.nodes._common import step
from grounded_agent.schemas import Confidence, JudgedDraft
from grounded_agent.state import AgentState
from grounded_agent.streaming import JudgedAnswer, SentenceStream

log = logging.getLogger(__name__)

PARSE_TRIES = 2
"""The structured call is tried once more when its output cannot be read (a server that ignored
the tool is asked for JSON in words: structured.py); then the offline verdict held by
score_confidence stands, and where it answers the model writes the answer alone."""

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
    state: AgentState, ctx: Context, model: Any, messages: list[Any], held: Confidence,
    plain: list[Any], stream: SentenceStream | None = None,
) -> Judged:
    """One structured call (function calling, json_schema or JSON text: structured.py). Without a
    readable judgement the outcome is the offline one for the same evidence (`held`), never a
    more confident one; where that answers, one more request (`plain`, the plain draft's
    messages) lets the model write the answer in free text, checked like any draft. `stream`
    checks and emits the answer's sentences as either reply writes them (streaming.py)."""
    usage: dict[str, int] = {}
    trail: list[dict[str, Any]] = []
    plain_here = plain_first(model, JudgedDraft)
    if not plain_here:
        outcome = await structured_call(
            model, JudgedDraft, messages, state=state, ctx=ctx, usage=usage,
            parse_tries=PARSE_TRIES, max_tokens=ctx.answer_max_tokens + ctx.judgement_max_tokens,
            on_chunk=JudgedAnswer(stream) if stream is not None else None,
        )
        if outcome.parsed is not None:
            return _judged(state, outcome.parsed, usage)
        if outcome.exhausted is not None or outcome.failure is not None:
            warnings, fallback = FALLBACK.report(state, exhausted=outcome.exhausted,
                                                 failure=outcome.failure)
            return Judged(held, None, usage, fallback, warnings)
        log.warning("judged draft could not be read (%s)", ", ".join(outcome.tried))
    trail.append(step(
        state, "draft_answer", "unparseable" if not plain_here else "offline_verdict_here",
        ("the judgement could not be read" if not plain_here else
         "this model's judged drafts could not be read before")
        + f"; offline verdict: {held.reason}"
        + ("; the model writes the answer in free text" if held.can_answer else ""),
        level=held.level, how="unparseable"))
    if not held.can_answer:
        return Judged(held, None, usage, trail)
    if stream is not None and stream.sent:  # the unread reply's sentences went out: no more
        stream.hold = True
    reply = await ask_model(model, plain, state=state, ctx=ctx, spent=usage,
                            max_tokens=ctx.answer_max_tokens, on_chunk=stream)
    add_usage(usage, reply.usage)
    if reply.message is None:
        warnings, fallback = FALLBACK.report(state, exhausted=reply.exhausted,
                                             failure=reply.failure)
        return Judged(held, None, usage, trail + fallback, warnings)
    if not plain_here:
        remember_plain(model, JudgedDraft)
    return Judged(held, reply.text, usage, trail)


def _judged(state: AgentState, parsed: JudgedDraft, usage: dict[str, int]) -> Judged:
    can_answer = parsed.can_answer and parsed.level in ("HIGH", "MEDIUM")
    conf = Confidence(level=parsed.level, reason=parsed.reason, can_answer=can_answer)
    rewrite = " ".join((parsed.query or "").split()).strip('"') or None
    entry = step(state, "draft_answer", f"{conf.level} (model)", parsed.reason,
                 level=conf.level, how="model")
    return Judged(conf, parsed.answer if can_answer else "", usage, [entry],
                  rewrite=rewrite if parsed.level == "LOW" else None)
