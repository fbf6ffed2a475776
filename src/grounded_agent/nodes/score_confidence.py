"""Confidence scoring: one judgement over all evidence, skipped where local signals decide."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import HumanMessage, SystemMessage
from langgraph.runtime import Runtime

from grounded_agent.context import Context
from grounded_agent.deps import Deps
from grounded_agent.extractive import extractive_draft
from grounded_agent.judge import Judge
from grounded_agent.judge.reading import judge_veto
from grounded_agent.model_calls import Fallback
from grounded_agent.nodes._common import ctx_of, nonempty, step
from grounded_agent.prompts.score_confidence import SCORE_CONFIDENCE_USER
from grounded_agent.schemas import Confidence, ConfidenceJudgement, Finding
from grounded_agent.scoring import decisive, local_confidence
from grounded_agent.state import AgentState, Draft, turn_of
from grounded_agent.structured import structured_call

log = logging.getLogger(__name__)

PARSE_TRIES = 2
"""The structured call is tried once more when its output cannot be parsed, then LOW."""

FALLBACK = Fallback(
    node="score_confidence",
    where="the confidence check",
    instead="the evidence was judged as offline",
)


async def score_confidence(
    state: AgentState, runtime: Runtime[Context], *, deps: Deps
) -> dict[str, Any]:
    ctx = ctx_of(runtime)
    question = str(state["question"])
    evidence = list(turn_of(state).get("evidence") or [])
    model = deps.model(ctx)
    local = LocalJudgement(question, evidence, ctx, deps.get_judge)
    draft = Draft(extract=local.extract)  # the draft without a model quotes the same sentences
    verdict = decisive(question, evidence, ctx.found_threshold, ctx.low_threshold)
    if verdict is not None:
        conf, why = verdict
        checked = local.vetted(conf, evidence)
        if checked is conf:
            return _done(state, conf, f"model call skipped: {why}", "deterministic", draft)
        if model is None:  # offline the judge's doubt is final; a model judges it instead
            return _done(state, checked, checked.reason, "judge", draft)
    if model is None:
        conf = local.verdict()
        return _done(state, conf, conf.reason, "local_scorer", draft)
    judged = await _ask_model(state, ctx, model, local)
    update = _done(state, judged.confidence, judged.detail, judged.how, draft, judged.usage)
    update["turn"]["rewrite"] = judged.rewrite
    return {**update, **nonempty(warnings=judged.warnings)}


@dataclass
class LocalJudgement:
    """The offline judgement of one question's evidence, over the sentences an answer would quote
    (built once: the offline scorer and the draft without a model read them; the judge's veto
    reads them in judge/reading.py)."""

    question: str
    evidence: list[Finding]
    ctx: Context
    get_judge: Callable[[], Judge]
    extract: str = field(init=False)

    def __post_init__(self) -> None:
        self.extract = extractive_draft(self.question, self.evidence)

    def vetted(self, conf: Confidence, among: list[Finding]) -> Confidence:
        return judge_veto(self.question, among, conf, self.get_judge(), self.ctx.judge_veto,
                          self.ctx.judge_margin)

    def verdict(self) -> Confidence:
        """The offline verdict; what reached the model only for the model to judge does not
        count without it."""
        kept = [e for e in self.evidence if e.score >= self.ctx.low_threshold]
        quoted = (self.extract if len(kept) == len(self.evidence)
                  else extractive_draft(self.question, kept))
        conf = local_confidence(self.question, kept, self.ctx.found_threshold,
                                self.ctx.low_threshold, quoted)
        return offline_verdict(self.vetted(conf, kept))


@dataclass
class Judged:
    """The confidence step's verdict with a model, and what it reports."""

    confidence: Confidence
    detail: str
    how: str
    usage: dict[str, int]
    warnings: list[dict[str, Any]] = field(default_factory=list)
    rewrite: str | None = None
    """LOW: the query the model proposes for the second search (one call, not two)."""


async def _ask_model(
    state: AgentState, ctx: Context, model: Any, local: LocalJudgement
) -> Judged:
    """One structured call (function calling, json_schema or JSON text, whichever this server
    takes: structured.py). Without a usable judgement the outcome is the offline one for the same
    evidence: never a more confident one."""
    usage: dict[str, int] = {}
    outcome = await structured_call(
        model, ConfidenceJudgement, _messages(state, ctx, local.question, len(local.evidence)),
        state=state, ctx=ctx, usage=usage, parse_tries=PARSE_TRIES,
    )
    parsed = outcome.parsed
    if outcome.exhausted is not None:  # no warning: the trail says why the model was not asked
        conf = local.verdict()
        detail = f"model budget spent ({outcome.exhausted}); offline verdict: {conf.reason}"
        return Judged(conf, detail, "local_scorer", usage)
    if outcome.failure is not None:  # a broken service is not asked again
        conf = local.verdict()
        warnings, _ = FALLBACK.report(state, failure=outcome.failure)
        return Judged(conf, f"model unreachable; offline verdict: {conf.reason}", "local_scorer",
                      usage, warnings)
    if parsed is not None:
        can_answer = parsed.can_answer and parsed.level in ("HIGH", "MEDIUM")
        conf = Confidence(level=parsed.level, reason=parsed.reason, can_answer=can_answer)
        rewrite = " ".join((parsed.query or "").split()).strip('"') or None
        return Judged(conf, parsed.reason, "model", usage,
                      rewrite=rewrite if parsed.level == "LOW" else None)
    log.warning("confidence output could not be read (%s)", ", ".join(outcome.tried))
    conf = local.verdict()
    detail = f"the confidence judgement could not be read; offline verdict: {conf.reason}"
    return Judged(conf, detail, "unparseable", usage)


def _messages(state: AgentState, ctx: Context, question: str, usable: int) -> list[Any]:
    """The tool dialog itself carries the evidence and each source's status, errors included."""
    return [
        SystemMessage(ctx.score_confidence_system_prompt),
        HumanMessage(f"<question>\n{question}\n</question>"),
        *(state.get("messages") or []),
        HumanMessage(SCORE_CONFIDENCE_USER.format(question=question, usable=usable)),
    ]


def offline_verdict(conf: Confidence) -> Confidence:
    """Offline, weak evidence is final: the local rewrite re-asks with the question's own words,
    and on five evaluated knowledge bases its second attempt answered nothing right (5 of 106
    second attempts answered, all wrongly). Only a model's rewrite can find other words."""
    if conf.level != "LOW":
        return conf
    return Confidence(level="NOT_RELEVANT", reason=f"{conf.reason}; no better wording offline")


def _done(
    state: AgentState,
    conf: Confidence,
    detail: str,
    how: str,
    draft: Draft,
    usage: dict[str, int] | None = None,
) -> dict[str, Any]:
    entry = step(state, "score_confidence", f"{conf.level} ({how})", detail, level=conf.level,
                 how=how)
    return {"confidence": conf, "turn": {"draft": draft, "rewrite": None}, "trail": [entry],
            **nonempty(usage=usage)}
