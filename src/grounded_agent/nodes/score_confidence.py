"""Confidence scoring, local only: the level where the local signals decide it; otherwise the
offline verdict, held for the draft call that judges with a model (draft_answer), or final where
the model's judgement is not trusted (Context.judge_model_answers)."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from grounded_agent.context import Context
from grounded_agent.deps import Deps
from grounded_agent.grounding.confidence import LocalJudgement
from grounded_agent.grounding.scoring import decisive
from grounded_agent.nodes._common import ctx_of, require_turn, step
from grounded_agent.schemas import Confidence
from grounded_agent.state import AgentState, Draft, turn_of


async def score_confidence(
    state: AgentState, runtime: Runtime[Context], *, deps: Deps
) -> dict[str, Any]:
    """Local only. Where the local signals decide, the level is final; where they do not and a
    model is there, the draft call judges (draft_answer) and the offline verdict is held until
    then, kept if that judgement fails: never a more confident one. With
    Context.judge_model_answers the offline verdict is final: a small model's level is noise
    (README, A local model), so it only writes the answer offline would give."""
    require_turn(state, "score_confidence")
    ctx = ctx_of(runtime)
    question = str(state["question"])
    evidence = list(turn_of(state).get("evidence") or [])
    model = deps.model(ctx)
    judges = model is not None and not ctx.judge_model_answers  # may the model judge the level
    # offline only: with a model, the model judges (and a judged answer meets the trained judge)
    local_judge = None if model is not None else (lambda: deps.get_local_judge(ctx))
    local = LocalJudgement(question, evidence, ctx, deps.get_judge, local_judge)
    draft = Draft(extract=local.extract)  # the draft without a model quotes the same sentences
    gated = local.gated()  # offline with a local judge whose rule is 'gate': it decides alone
    if gated is not None:
        return _done(state, gated, _by(gated.reason, local), "local_gate", draft, local)
    verdict = decisive(question, evidence, ctx.found_threshold, ctx.low_threshold)
    if verdict is not None:
        conf, why = verdict
        checked = local.vetted(conf, evidence)
        if checked is conf:
            return _done(state, conf, _by(f"model call skipped: {why}", local), "deterministic",
                         draft, local)
        if not judges:  # offline the judge's doubt is final; a model judges it instead
            return _done(state, checked, _by(checked.reason, local), "judge", draft,
                         local)
    conf = local.verdict()
    if not judges:
        return _done(state, conf, _by(conf.reason, local), "local_scorer", draft, local)
    held = f"judged by the draft call; offline verdict held until then: {conf.reason}"
    # the extract shown in place of an unusable model draft is the offline answer: it needs the
    # offline verdict, not the model's (check_citations), or a small model's MEDIUM shows
    # passages offline would not
    return _done(state, conf, held, "with_draft",
                 Draft(extract=local.extract, judge=True, offline=conf))


def _by(detail: str, local: LocalJudgement) -> str:
    """The detail, with which judge decided where a local judge was asked."""
    return f"{detail} [{local.judged_by}]" if local.judged_by else detail


def _done(
    state: AgentState,
    conf: Confidence,
    detail: str,
    how: str,
    draft: Draft,
    local: LocalJudgement | None = None,
) -> dict[str, Any]:
    """The node's keys; the log line names the judge that decided where a local judge was asked
    (`judged_by`), as the trail's detail does (`_by`)."""
    extra = {"judged_by": local.judged_by} if local is not None and local.judged_by else {}
    entry = step(state, "score_confidence", f"{conf.level} ({how})", detail, level=conf.level,
                 how=how, **extra)
    return {"confidence": conf, "turn": {"draft": draft, "rewrite": None}, "trail": [entry]}
