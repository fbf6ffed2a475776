"""Confidence scoring: one judgement over all evidence, skipped where local signals decide."""

from __future__ import annotations

import logging
from typing import Any

from langchain_core.messages import HumanMessage, SystemMessage
from langgraph.runtime import Runtime

from grounded_agent.context import Context
from grounded_agent.deps import Deps
from grounded_agent.judge.reading import judge_veto
from grounded_agent.model_calls import Fallback
from grounded_agent.nodes._common import ctx_of, step
from grounded_agent.prompts.score_confidence import SCORE_CONFIDENCE_USER
from grounded_agent.schemas import Confidence, ConfidenceJudgement, Finding
from grounded_agent.scoring import decisive, local_confidence
from grounded_agent.state import AgentState
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
    evidence = list(state.get("evidence") or [])
    model = deps.model(ctx)

    def vetted(conf: Confidence, among: list[Finding]) -> Confidence:
        return judge_veto(question, among, conf, deps.get_judge(), ctx.judge_veto,
                          ctx.judge_margin)

    def local() -> Confidence:
        # what reached the model only for the model to judge does not count without it
        kept = [e for e in evidence if e.score >= ctx.low_threshold]
        return vetted(local_confidence(question, kept, ctx.found_threshold, ctx.low_threshold),
                      kept)

    verdict = decisive(question, evidence, ctx.found_threshold, ctx.low_threshold)
    if verdict is not None:
        conf, why = verdict
        checked = vetted(conf, evidence)
        if checked is conf:
            return _done(state, conf, f"model call skipped: {why}", "deterministic")
        if model is None:  # offline the judge's doubt is final; a model judges it instead
            return _done(state, checked, checked.reason, "judge")
    if model is None:
        conf = offline_verdict(local())
        return _done(state, conf, conf.reason, "local_scorer")

    usage: dict[str, int] = {}
    # function calling, json_schema or JSON text, whichever this server takes (structured.py)
    outcome = await structured_call(
        model,
        ConfidenceJudgement,
        _messages(state, ctx, question, len(evidence)),
        state=state,
        ctx=ctx,
        usage=usage,
        parse_tries=PARSE_TRIES,
    )
    # without a usable judgement the outcome is the offline one for the same evidence: never a
    # more confident one (what reached the model only for it to judge does not count either)
    if outcome.exhausted is not None:  # no warning: the trail says why the model was not asked
        conf = offline_verdict(local())
        detail = f"model budget spent ({outcome.exhausted}); offline verdict: {conf.reason}"
        return _done(state, conf, detail, "local_scorer", usage)
    if outcome.failure is not None:  # a broken service is not asked again
        conf = offline_verdict(local())
        detail = f"model unreachable; offline verdict: {conf.reason}"
        warnings, _ = FALLBACK.report(state, failure=outcome.failure)
        return {**_done(state, conf, detail, "local_scorer", usage), "warnings": warnings}
    parsed = outcome.parsed
    if parsed is not None:
        can_answer = parsed.can_answer and parsed.level in ("HIGH", "MEDIUM")
        conf = Confidence(level=parsed.level, reason=parsed.reason, can_answer=can_answer)
        return _done(state, conf, parsed.reason, "model", usage)
    log.warning("confidence output could not be read (%s)", ", ".join(outcome.tried))
    conf = offline_verdict(local())
    detail = f"the confidence judgement could not be read; offline verdict: {conf.reason}"
    return _done(state, conf, detail, "unparseable", usage)


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
    usage: dict[str, int] | None = None,
) -> dict[str, Any]:
    update: dict[str, Any] = {
        "confidence": conf,
        "trail": [
            step(
                state,
                "score_confidence",
                f"{conf.level} ({how})",
                detail,
                level=conf.level,
                how=how,
            )
        ],
    }
    if usage:
        update["usage"] = usage
    return update
