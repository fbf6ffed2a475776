"""Citation check node: every sentence of the draft held to its cited passages; the model judges
only the sentences code cannot decide (the support judgement, support_judge.py)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from langgraph.runtime import Runtime

from grounded_agent.context import Context
from grounded_agent.deps import Deps
from grounded_agent.grounding.citations import Checked, check_answer
from grounded_agent.grounding.judge.reading import model_doubt, model_sentences
from grounded_agent.languages import code_of
from grounded_agent.llm.calls import Fallback
from grounded_agent.llm.support_judge import judge_support, words_stated
from grounded_agent.nodes._common import ctx_of, nonempty, offline_extract, require_turn, step
from grounded_agent.schemas import Finding
from grounded_agent.state import AgentState, Draft, DraftHow, turn_of

log = logging.getLogger(__name__)

SUPPORT_FALLBACK = Fallback(
    "check_citations", "the answer's sentences were checked by quote only",
    where="the support check",
    budget_warning="the answer's sentences were checked by quote only",
)


@dataclass
class Judgement:
    """The check after the support judgement, and what the node reports about it."""

    checked: Checked
    usage: dict[str, int] = field(default_factory=dict)
    warnings: list[dict[str, Any]] = field(default_factory=list)
    trail: list[dict[str, Any]] = field(default_factory=list)


async def check_citations(
    state: AgentState, runtime: Runtime[Context], *, deps: Deps
) -> dict[str, Any]:
    """Markers resolved and renumbered, unsupported sentences removed; a model draft of which no
    sentence keeps a valid citation, or (Context.judge_model_answers) whose sentences the trained
    judge does not let stand as it would not an offline answer's, gives way to the offline
    answer: the extract of the evidence, or none where offline the evidence answers nothing."""
    require_turn(state, "check_citations")
    ctx = ctx_of(runtime)
    turn = turn_of(state)
    draft: Draft = dict(turn.get("draft") or {})  # type: ignore[assignment]
    evidence = list(turn.get("evidence") or [])
    how: DraftHow = draft.get("how", "extractive")
    text = draft.get("text", "")
    checked = check_answer(text, evidence)
    judgement = Judgement(checked)
    model = deps.model(ctx) if ctx.judge_support else None
    if how == "model" and checked.doubted and model is not None:
        judgement = await _judge(state, ctx, model, text, evidence, checked)
    checked = judgement.checked
    warnings = [*judgement.warnings, *check_warnings(checked)]
    trail = list(judgement.trail)
    cannot = _cannot_stand(state, ctx, deps, checked, evidence) if how == "model" else None
    update: dict[str, Any] = {}
    if cannot is not None:
        offline = draft.get("offline")  # held where the model judged the level
        # the model's judgement opened an answer offline abstains from
        opened = offline is not None and not offline.can_answer
        checked, how, entry = _instead(state, draft, evidence, opened, *cannot)
        trail.append(entry)
        warnings += check_warnings(checked)
        if offline is not None:  # the outcome is offline's, and so is the level reported
            update["confidence"] = offline
    trail.append(step(
        state, "check_citations", f"draft_{how}",
        f"{len(checked.citations)} citation(s) kept, {len(checked.unsupported)} sentence(s) "
        f"removed, {len(checked.removed_markers)} marker(s) removed"))
    checked_draft: Draft = {**draft, "text": checked.text, "how": how,
                            "citations": checked.citations, "sentences": checked.sentences}
    return {"turn": {"draft": checked_draft}, "trail": trail, **update,
            **nonempty(usage=judgement.usage, warnings=warnings)}


def _instead(
    state: AgentState, draft: Draft, evidence: list[Finding], opened: bool, decision: str,
    why: str,
) -> tuple[Checked, DraftHow, dict[str, Any]]:
    """The model's draft cannot stand (`why`): the offline answer, its extract of the evidence,
    stands in where offline the evidence answers; where it answers nothing (`opened`) there is
    no answer, or it would rest on the model's judgement alone."""
    if opened:
        return check_answer("", evidence), "abstained", step(
            state, "check_citations", decision,
            f"{why}, and offline the evidence answers nothing: no answer")
    extract = offline_extract(draft, str(state["question"]), evidence)
    return check_answer(extract, evidence), "extractive", step(
        state, "check_citations", decision, f"{why}; the answer was extracted from the sources")


def _cannot_stand(
    state: AgentState, ctx: Context, deps: Deps, checked: Checked, evidence: list[Finding]
) -> tuple[str, str] | None:
    """(decision, why) where the model's checked draft cannot stand: no sentence kept a valid
    citation, or (Context.judge_model_answers) the trained judge does not let its sentences stand
    or rates the offline answer's above them.
    The judge reads English only (trained on English Wikipedia): other passages go unjudged."""
    if not checked.citations:
        return "model_draft_unusable", (
            f"no sentence of the model's draft kept a valid citation "
            f"({len(checked.removed_markers)} marker(s) and {len(checked.unsupported)} "
            "sentence(s) removed)")
    if not ctx.judge_model_answers or any(
            code_of(e.language) not in (None, "en") for e in evidence):
        return None
    return model_doubt(str(state["question"]), evidence, deps.get_judge(), ctx.judge_veto,
                       ctx.judge_margin, model_sentences(checked.text, checked.citations))


async def _judge(
    state: AgentState, ctx: Context, model: Any, draft: str, evidence: list[Finding],
    checked: Checked,
) -> Judgement:
    """The sentences that quote no cited passage word for word, judged by the model in one call;
    after a failed, unreadable or unaffordable judgement they stay removed, and a failed or
    unaffordable one says so to the user (the check was by quote only)."""
    claims = checked.doubted
    usage: dict[str, int] = {}
    judged = await judge_support(model, ctx, evidence, claims, state=state, usage=usage)
    if judged.verdicts is None:
        warnings, _ = SUPPORT_FALLBACK.report(
            state, exhausted=judged.exhausted, failure=judged.failure
        )
        entry = step(state, "check_citations", "support_not_judged",
                     f"{len(claims)} sentence(s) that quote no source word for word stay "
                     f"removed: {judged.why_not}")
        return Judgement(checked, usage, warnings, [entry])
    kept = sum(judged.verdicts.values())
    words_rule = (partial(words_stated, given=str(state["question"]))
                  if ctx.judged_words_from_sources else None)
    after = check_answer(draft, evidence, judged=judged.verdicts, also_holds=words_rule)
    entry = step(state, "check_citations", "support_judged",
                 f"the model found {kept} of {len(claims)} sentence(s) that quote no source word "
                 "for word stated in their sources"
                 + (f"; {_still_removed(judged.verdicts, after)} of those removed by the rules "
                    "kept in code (a figure, or a word neither the question nor their sources "
                    "use)" if words_rule is not None else ""))
    return Judgement(after, usage, [], [entry])


def _still_removed(verdicts: dict[str, bool], after: Checked) -> int:
    """Sentences the model judged supported that the rules kept in code removed all the same."""
    removed = set(after.unsupported)
    return sum(1 for text, ok in verdicts.items() if ok and text in removed)


def check_warnings(checked: Checked) -> list[dict[str, Any]]:
    """What the citation check removed, one warning each."""
    warnings: list[dict[str, Any]] = [
        {"kind": "citation_removed",
         "detail": f"the citation marker numbered {m.strip('[]')} pointed at no source and was "
         "removed"}
        for m in checked.removed_markers
    ]
    # not quoted: a sentence no source supports is unchecked text (a poisoned passage may have
    # written it); the log keeps it
    unread = {sentence for sentence, _ in checked.doubted}
    warnings += [
        {"kind": "unsupported_sentence",
         "detail": f"a sentence of {len(sentence.split())} words was removed, "
         + ("checked by quote only (no judgement read it)" if sentence in unread
            else "not supported by its cited source")}
        for sentence in checked.unsupported
    ]
    for sentence in checked.unsupported:
        log.info("removed a sentence its sources do not support: %s", sentence[:200])
    for url in checked.removed_urls:
        warnings.append(
            {"kind": "citation_removed", "detail": "a link that is not one of the sources was removed"}
        )
        log.info("removed a URL not among the sources: %s", url[:100])
    return warnings
