"""Confidence scoring, local only: the level where the local signals decide it; otherwise the
offline verdict, held for the draft call that judges with a model (draft_answer), or final where
the model's judgement is not trusted (Context.judge_model_answers)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from langgraph.runtime import Runtime

from grounded_agent.context import Context
from grounded_agent.deps import Deps
from grounded_agent.extractive import extractive_draft
from grounded_agent.judge import Judge
from grounded_agent.judge.reading import judge_veto
from grounded_agent.nodes._common import ctx_of, step
from grounded_agent.schemas import Confidence, Finding
from grounded_agent.scoring import decisive, local_confidence
from grounded_agent.state import AgentState, Draft, turn_of


async def score_confidence(
    state: AgentState, runtime: Runtime[Context], *, deps: Deps
) -> dict[str, Any]:
    """Local only. Where the local signals decide, the level is final; where they do not and a
    model is there, the draft call judges (draft_answer) and the offline verdict is held until
    then, kept if that judgement fails: never a more confident one. With
    Context.judge_model_answers the offline verdict is final: a small model's level is noise
    (README, A local model), so it only writes the answer offline would give."""
    ctx = ctx_of(runtime)
    question = str(state["question"])
    evidence = list(turn_of(state).get("evidence") or [])
    model = deps.model(ctx)
    judges = model is not None and not ctx.judge_model_answers  # may the model judge the level
    local = LocalJudgement(question, evidence, ctx, deps.get_judge)
    draft = Draft(extract=local.extract)  # the draft without a model quotes the same sentences
    verdict = decisive(question, evidence, ctx.found_threshold, ctx.low_threshold)
    if verdict is not None:
        conf, why = verdict
        checked = local.vetted(conf, evidence)
        if checked is conf:
            return _done(state, conf, f"model call skipped: {why}", "deterministic", draft)
        if not judges:  # offline the judge's doubt is final; a model judges it instead
            return _done(state, checked, checked.reason, "judge", draft)
    conf = local.verdict()
    if not judges:
        return _done(state, conf, conf.reason, "local_scorer", draft)
    held = f"judged by the draft call; offline verdict held until then: {conf.reason}"
    # the extract shown in place of an unusable model draft is the offline answer: it needs the
    # offline verdict, not the model's (check_citations), or a small model's MEDIUM shows
    # passages offline would not
    return _done(state, conf, held, "with_draft",
                 Draft(extract=local.extract, judge=True, offline=conf))


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
) -> dict[str, Any]:
    entry = step(state, "score_confidence", f"{conf.level} ({how})", detail, level=conf.level,
                 how=how)
    return {"confidence": conf, "turn": {"draft": draft, "rewrite": None}, "trail": [entry]}
