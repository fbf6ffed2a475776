"""The draft call that also judges the confidence (when the local signals left it open): one
structured reply with the level and, for HIGH or MEDIUM, the answer; where a model did not write
that as readable JSON, one more request in plain text, the level on the first line and the answer after
it (remembered per endpoint, so later questions ask that way at once). Pure of state updates:
the draft node merges what it returns."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from typing import Any, cast

from langchain_core.messages import BaseMessage, HumanMessage

from grounded_agent.context import Context
from grounded_agent.model_calls import Fallback, add_usage, ask_model
from grounded_agent.nodes._common import step
from grounded_agent.prompts.answer import JUDGED_ANSWER_LINES
from grounded_agent.schemas import Confidence, ConfidenceLevel, JudgedDraft
from grounded_agent.state import AgentState
from grounded_agent.structured import plain_first, remember_plain, structured_call

log = logging.getLogger(__name__)

PARSE_TRIES = 1
"""JSON replies read before the judged draft is asked in lines: Qwen2.5 0.5B, asked again for
JSON in words, wrote the JSON schema back (370 tokens, past a 90 s timeout on a loaded machine:
issue 27), while the lines shape is one a capable model writes as easily. Without a readable
reply the offline verdict held by score_confidence stands, with the quoted draft if it answers."""

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
    """One structured call (function calling, json_schema or JSON text: structured.py); when its
    reply cannot be read, one request in lines (`read_lines`), within the same call budget.
    Without a usable judgement the outcome is the offline one for the same evidence (`held`):
    never a more confident one."""
    usage: dict[str, int] = {}
    trail: list[dict[str, Any]] = []
    lines_first = plain_first(model, JudgedDraft)
    if not lines_first:
        outcome = await structured_call(
            model, JudgedDraft, messages, state=state, ctx=ctx, usage=usage,
            parse_tries=PARSE_TRIES, max_tokens=ctx.answer_max_tokens + ctx.judgement_max_tokens,
        )
        if outcome.parsed is not None:
            return _judged(state, outcome.parsed, usage, trail)
        if outcome.exhausted is not None or outcome.failure is not None:
            warnings, fallback = FALLBACK.report(state, exhausted=outcome.exhausted,
                                                 failure=outcome.failure)
            return Judged(held, None, usage, fallback, warnings)
        log.warning("judged draft could not be read (%s); asking in lines",
                    ", ".join(outcome.tried))
        trail.append(step(state, "draft_answer", "unparseable",
                          "the judgement could not be read as JSON; asked once more, the level "
                          "on the first line", how="unparseable"))
    reply = await ask_model(model, _in_lines(messages), state=state, ctx=ctx, spent=usage,
                            max_tokens=ctx.answer_max_tokens + ctx.judgement_max_tokens)
    if reply.message is None:
        warnings, fallback = FALLBACK.report(state, exhausted=reply.exhausted,
                                             failure=reply.failure)
        add_usage(usage, reply.usage)
        return Judged(held, None, usage, trail + fallback, warnings)
    add_usage(usage, reply.usage)
    parsed = read_lines(reply.text)
    if parsed is None:
        log.warning("judged draft in lines could not be read either")
        trail.append(step(state, "draft_answer", "unparseable",
                          f"the judgement could not be read; offline verdict: {held.reason}",
                          level=held.level, how="unparseable"))
        return Judged(held, None, usage, trail)
    if not lines_first:
        remember_plain(model, JudgedDraft)
    return _judged(state, parsed, usage, trail)


def _judged(
    state: AgentState, parsed: JudgedDraft, usage: dict[str, int], trail: list[dict[str, Any]]
) -> Judged:
    can_answer = parsed.can_answer and parsed.level in ("HIGH", "MEDIUM")
    conf = Confidence(level=parsed.level, reason=parsed.reason, can_answer=can_answer)
    rewrite = " ".join((parsed.query or "").split()).strip('"') or None
    entry = step(state, "draft_answer", f"{conf.level} (model)", parsed.reason,
                 level=conf.level, how="model")
    return Judged(conf, parsed.answer if can_answer else "", usage, [*trail, entry],
                  rewrite=rewrite if parsed.level == "LOW" else None)


def _in_lines(messages: list[Any]) -> list[BaseMessage]:
    """The judged draft's messages with the lines instruction joined to the question (some chat
    templates refuse two user turns in a row)."""
    out: list[BaseMessage] = list(messages)
    if out and isinstance(out[-1], HumanMessage) and isinstance(out[-1].content, str):
        out[-1] = HumanMessage(f"{out[-1].content}\n{JUDGED_ANSWER_LINES}")
    else:
        out.append(HumanMessage(JUDGED_ANSWER_LINES))
    return out


_LEVEL_LINE = re.compile(
    r"^(?:(?i:level)\s*[:=\-]?\s*)?(HIGH|MEDIUM|LOW|NOT[ _\-]?RELEVANT)\b\s*[:.\-–—]?\s*(.*)$"
)
"""The first line: the level in capitals, alone or before the answer ("HIGH: The plan ...")."""
_LABEL = re.compile(r"^\s*(?i:answer|query)\s*:\s*")
_PREFIX = re.compile(r"^(?i:level)\s*[:=\-]?\s*")
_FENCE = re.compile(r"^\s*```\w*\s*$")
_MARKUP = " *#>`_"


def read_lines(text: str) -> JudgedDraft | None:
    """A reply in the lines shape: the level on its first line (in capitals, or alone in any
    case: "high"), then the answer (HIGH, MEDIUM) or the query (LOW). None when the first line
    names no level: then nothing of the reply is used."""
    lines = [ln for ln in text.strip().splitlines() if ln.strip() and not _FENCE.match(ln)]
    if not lines:
        return None
    first = lines[0].strip(_MARKUP).replace("**", "").replace("__", "")
    alone = re.sub(r"[\s\-]+", "_", _PREFIX.sub("", first).strip(_MARKUP + ":.").upper())
    match = _LEVEL_LINE.match(first)
    if alone in _LEVELS and not (match and match.group(2)):
        level, rest = alone, ""
    elif match is not None:
        level, rest = re.sub(r"[\s\-]+", "_", match.group(1)), match.group(2).strip()
    else:
        return None
    after = [_LABEL.sub("", ln).strip() for ln in ([rest] if rest else []) + lines[1:]]
    body = "\n".join(ln for ln in after if ln).strip()
    answers = level in ("HIGH", "MEDIUM")
    return JudgedDraft(
        level=cast(ConfidenceLevel, level),
        reason="the model's level line",
        can_answer=answers,
        answer=body if answers else "",
        query=(body.splitlines()[0] if body else None) if level == "LOW" else None,
    )


_LEVELS = frozenset({"HIGH", "MEDIUM", "LOW", "NOT_RELEVANT"})
