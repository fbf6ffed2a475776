"""Answer node: write (or extract) the answer from sources in state, check every citation, report."""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from datetime import date, timedelta
from typing import Any

from langchain_core.messages import HumanMessage, SystemMessage
from langgraph.runtime import Runtime

from grounded_agent.citations import MARKER, Checked, check_answer
from grounded_agent.cite_unmarked import cite_unmarked, says_no_answer
from grounded_agent.context import MAX_ATTEMPTS, Context
from grounded_agent.deps import Deps
from grounded_agent.display import shown_answer
from grounded_agent.extractive import extractive_draft
from grounded_agent.languages import name_of, translation_needed
from grounded_agent.model_calls import Fallback, ModelReply, add_usage, ask_model
from grounded_agent.nodes._common import ctx_of, final_outcomes, nonempty, outcomes_of, step
from grounded_agent.prompts.answer import (
    ANSWER_USER,
    CAVEAT_TEXT,
    NOT_FOUND_TEXT,
    PARTIAL_TEXT,
    PARTLY_READ_TEXT,
    STALE_TEXT,
    TRANSLATE_ANSWER_USER,
    UNAVAILABLE_TEXT,
)
from grounded_agent.prompts.sources import render_sources
from grounded_agent.schemas import (
    Citation,
    Confidence,
    Finding,
    Pointer,
    SourceReport,
    ToolOutcome,
)
from grounded_agent.state import AgentState
from grounded_agent.support_judge import judge_support
from grounded_agent.text import content_stems

log = logging.getLogger(__name__)

FALLBACK = Fallback(
    "answer", "the answer was extracted from the sources", where="the answer step",
    budget_warning="answer extracted without the model", trail="extractive answer used",
)

SUPPORT_FALLBACK = Fallback(
    "answer", "the answer's sentences were checked by quote only",
    where="the support check",
    budget_warning="the answer's sentences were checked by quote only",
)

TRANSLATE_FALLBACK = Fallback(
    "answer", "the answer is given in the language of its sources",
    where="the translation step", trail="translation skipped",
)

MAX_CLOSEST = 3
"""Documents listed as the closest when nothing answered (Context.closest_threshold decides which
may be)."""

SOURCE_LABELS = {
    "knowledge_base": "the knowledge base",
    "wikipedia": "Wikipedia",
    "web": "web search",
}


def _label(names: Sequence[str], partly: Sequence[str] = ()) -> str:
    labels = [("part of " if n in partly else "") + SOURCE_LABELS.get(n, n) for n in names]
    return labels[0] if len(labels) == 1 else ", ".join(labels[:-1]) + " and " + labels[-1]


def source_reports(requested: list[str], outcomes: dict[str, ToolOutcome]) -> list[SourceReport]:
    """One line per requested source; a source never reached counts as unavailable, not empty."""
    reports = []
    for name in requested:
        o = outcomes.get(name)
        if o is None:
            reports.append(
                SourceReport(
                    source=name,
                    status="error",
                    coverage="unavailable",
                    error_kind="unknown",
                )
            )
        else:
            reports.append(
                SourceReport(
                    source=o.source,
                    status=o.status,
                    coverage=o.coverage,
                    error_kind=o.error_kind,
                    finding_count=o.finding_count,
                )
            )
    return reports


def format_sources(evidence: list[Finding]) -> str:
    """The escaped sources block (one builder for every prompt: prompts.sources)."""
    return render_sources(evidence)


async def answer(state: AgentState, runtime: Runtime[Context], *, deps: Deps) -> dict[str, Any]:
    ctx = ctx_of(runtime)
    question = str(state["question"])
    reports = source_reports(list(state.get("requested") or []), final_outcomes(state))
    # a source read only in part counts with the failed ones: absence is not established there
    failed = [r.source for r in reports if r.status == "error" or r.coverage != "complete"]
    worked = [r.source for r in reports if r.status != "error"]
    evidence = list(state.get("evidence") or [])
    confidence = state.get("confidence") or Confidence()
    warnings = _source_warnings(state, reports)
    trail: list[dict[str, Any]] = []
    usable = bool(evidence) and confidence.can_answer and confidence.level in ("HIGH", "MEDIUM")
    reply = ModelReply()
    text, citations = "", list[Citation]()
    if usable:
        model = deps.model(ctx)
        # asked for another language than the sources': written and checked in theirs first
        write_in = translation_needed(state.get("language"), (e.language for e in evidence))
        if model is not None:
            reply = await ask_model(
                model, _messages(state, ctx, question, evidence, write_in), state=state,
                ctx=ctx, fallback=FALLBACK, max_tokens=ctx.answer_max_tokens,
            )
            warnings += reply.warnings
            trail += reply.trail
        judge = model if ctx.judge_support else None
        text, citations = await _draft(
            state, ctx, judge, reply, question, evidence, warnings, trail
        )
        if write_in and reply.message is not None and citations:
            text, translation = await _translate(state, ctx, model, text, reply.usage, trail)
            add_usage(reply.usage, translation.usage)
            warnings += translation.warnings
    if text and citations:
        status = "partial" if failed else _answered(ctx, confidence, citations)
        notes = _notes(ctx, confidence, citations, failed, worked, warnings)
        text = "\n\n".join([text, *notes])
    else:
        citations = []
        status = "unavailable" if failed else "not_found"
        text = _nothing_text(question, list(state.get("queries") or []), failed, worked)
    # no answer: where to look, from the sources that were read (a document search's page
    # already lists its documents)
    closest = [] if citations or state.get("documents") else closest_passages(
        outcomes_of(state), ctx.closest_threshold, MAX_CLOSEST
    )
    trail.append(
        step(
            state,
            "answer",
            status,
            f"{len(citations)} citation(s)",
            status=status,
            stop_reason=_stop_reason(state, confidence, failed),
        )
    )
    return shown_answer({  # what a document wrote reaches the user neutralised (display.py)
        "status": status,
        "answer": text,
        "citations": citations,
        "closest": closest,
        "attempts": int(state.get("attempt") or 1),
        "sources": reports,
        "warnings": warnings,
        "trail": trail,
        "history": [{"question": question, "answer": text if citations else "", "status": status}],
        **nonempty(usage=reply.usage),
    })


def closest_passages(outcomes: Sequence[ToolOutcome], floor: float, limit: int) -> list[Pointer]:
    """The documents of the completed reads that came closest, best first, each with its closest
    passage (three sections of one document would hide a second document).

    Shown when nothing answered, so that a user whose words differ from the document's still
    sees where to look. They are no citations: nothing in the answer rests on them."""
    best: dict[tuple[str, str], Finding] = {}
    for outcome in outcomes:
        if outcome.status == "error":
            continue
        for f in outcome.items:
            key = (f.source, f.source_id)
            if f.score >= floor and (key not in best or f.score > best[key].score):
                best[key] = f
    ranked = sorted(best.values(), key=lambda f: f.score, reverse=True)[:limit]
    fields = set(Pointer.model_fields)
    return [Pointer(**{**f.model_dump(include=fields), "score": round(f.score, 4)})
            for f in ranked]


def _messages(
    state: AgentState, ctx: Context, question: str, evidence: list[Finding], write_in: str | None
) -> list[Any]:
    language = (
        f"{name_of(write_in)}, the language of the sources (a translation follows)"
        if write_in
        else state.get("language") or "the language of the question"
    )
    return [
        SystemMessage(ctx.answer_system_prompt.format(language=language)),
        HumanMessage(ANSWER_USER.format(question=question, sources=format_sources(evidence))),
    ]


def _markers(text: str) -> list[str]:
    return sorted(re.sub(r"\s+", "", m) for m in MARKER.findall(text))


async def _translate(
    state: AgentState,
    ctx: Context,
    model: Any,
    text: str,
    spent: dict[str, int],
    trail: list[dict[str, Any]],
) -> tuple[str, ModelReply]:
    """The checked answer in the asked language. Its citations were checked in the sources'
    language; a translation that loses, adds or renumbers a marker is not shown (the checked text
    is, with the trail saying why)."""
    language = str(state.get("language"))
    messages = [
        SystemMessage(ctx.translate_answer_system_prompt.format(language=language)),
        HumanMessage(TRANSLATE_ANSWER_USER.format(answer=text)),
    ]
    reply = await ask_model(
        model, messages, state=state, ctx=ctx, fallback=TRANSLATE_FALLBACK, spent=spent,
        max_tokens=ctx.answer_max_tokens,
    )
    trail += reply.trail
    translated = reply.text.strip()
    if reply.message is None:
        return text, reply
    if not translated or _markers(translated) != _markers(text):
        trail.append(step(state, "answer", "translation_not_used",
                          "the translation changed the citation markers; the checked text stays"))
        return text, reply
    trail.append(step(state, "answer", "translated", f"checked answer translated into {language}"))
    return translated, reply


def _source_warnings(state: AgentState, reports: list[SourceReport]) -> list[dict[str, Any]]:
    """A source that could not be searched, and a later search of a source that failed."""
    warnings: list[dict[str, Any]] = [
        {
            "kind": "source_unavailable",
            "detail": f"{SOURCE_LABELS.get(r.source, r.source)} could not be searched ({r.error_kind})"
            if r.status == "error"
            else f"{SOURCE_LABELS.get(r.source, r.source)} was read only in part: some of its "
            "pages could not be read",
        }
        for r in reports
        if r.status == "error" or r.coverage != "complete"
    ]
    for o in outcomes_of(state):
        report = next((r for r in reports if r.source == o.source), None)
        if o.status == "error" and report is not None and report.status != "error":
            warnings.append(
                {
                    "kind": "source_unavailable",
                    "detail": f"a later search of {SOURCE_LABELS.get(o.source, o.source)} failed "
                    f"({o.error_kind}); only its earlier search counts",
                }
            )
    return warnings


async def _draft(
    state: AgentState,
    ctx: Context,
    judge: Any,
    reply: ModelReply,
    question: str,
    evidence: list[Finding],
    warnings: list[dict[str, Any]],
    trail: list[dict[str, Any]],
) -> tuple[str, list[Citation]]:
    """The model's draft, or an extracted one, with every citation checked in code."""
    draft, how = reply.text, "model" if reply.message is not None else "extractive"
    if how == "model" and draft.strip() and not MARKER.search(draft):
        # no marker at all: each sentence is cited by the passage it quotes or is closest to,
        # then checked like any cited sentence; only a draft that quotes nothing and says the
        # sources do not answer is the model abstaining
        cited, quoting, closest = cite_unmarked(draft, evidence)
        if quoting or (closest and not says_no_answer(draft)):
            trail.append(step(state, "answer", "model_draft_cited",
                              f"the draft had no markers: {quoting} sentence(s) cited by the "
                              f"passage they quote, {closest} by the closest passage, to be "
                              "checked as every cited sentence is"))
            draft = cited
        elif says_no_answer(draft):
            trail.append(
                step(state, "answer", "model_abstained", "the model found no answer in the sources")
            )
            draft, how = "", "abstained"
    elif not draft:
        draft = extractive_draft(question, evidence)
        if state.get("language"):
            trail.append(
                step(
                    state,
                    "answer",
                    "language_not_applied",
                    "an extracted answer quotes its sources in their own language",
                )
            )
    checked = check_answer(draft, evidence)
    if how == "model" and checked.doubted and judge is not None:
        checked = await _judge_support(
            state, ctx, judge, draft, evidence, checked, reply, warnings, trail
        )
    warnings.extend(_check_warnings(checked))
    if how == "model" and not checked.citations:
        # the model tried to answer, but no sentence kept a valid citation (a marker past the
        # sources, a claim its source does not support): the usable evidence is quoted instead
        trail.append(
            step(
                state,
                "answer",
                "model_draft_unusable",
                f"no sentence of the model's draft kept a valid citation "
                f"({len(checked.removed_markers)} marker(s) and {len(checked.unsupported)} "
                "sentence(s) removed); the answer was extracted from the sources",
            )
        )
        checked = check_answer(extractive_draft(question, evidence), evidence)
        warnings.extend(_check_warnings(checked))
        how = "extractive"
    trail.append(
        step(
            state,
            "answer",
            f"draft_{how}",
            f"{len(checked.citations)} citation(s) kept, {len(checked.unsupported)} sentence(s) "
            f"removed, {len(checked.removed_markers)} marker(s) removed",
        )
    )
    return checked.text, checked.citations


async def _judge_support(
    state: AgentState,
    ctx: Context,
    judge: Any,
    draft: str,
    evidence: list[Finding],
    checked: Checked,
    reply: ModelReply,
    warnings: list[dict[str, Any]],
    trail: list[dict[str, Any]],
) -> Checked:
    """The sentences that quote no cited passage word for word, judged by the model
    (support_judge.py); after a failed, unreadable or unaffordable judgement they stay removed,
    and a failed or unaffordable one says so to the user (the check was by quote only)."""
    claims = checked.doubted
    judged = await judge_support(judge, ctx, evidence, claims, state=state, usage=reply.usage)
    if judged.verdicts is None:
        trail.append(step(state, "answer", "support_not_judged",
                          f"{len(claims)} sentence(s) that quote no source word for word stay "
                          f"removed: {judged.why_not}"))
        told, _ = SUPPORT_FALLBACK.report(
            state, exhausted=judged.exhausted, failure=judged.failure
        )
        warnings.extend(told)
        return checked
    rechecked = check_answer(draft, evidence, judged=judged.verdicts)
    kept = sum(judged.verdicts.values())
    trail.append(step(
        state, "answer", "support_judged",
        f"the model found {kept} of {len(claims)} sentence(s) that quote no source word for word "
        "stated in their sources",
    ))
    return rechecked


def _check_warnings(checked: Checked) -> list[dict[str, Any]]:
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


def _weak(ctx: Context, confidence: Confidence, citations: list[Citation]) -> bool:
    return confidence.level == "MEDIUM" or min(c.score for c in citations) < ctx.found_threshold


def _answered(ctx: Context, confidence: Confidence, citations: list[Citation]) -> str:
    return "answered_with_caveat" if _weak(ctx, confidence, citations) else "answered"


def _notes(
    ctx: Context,
    confidence: Confidence,
    citations: list[Citation],
    failed: Sequence[str],
    worked: Sequence[str],
    warnings: list[dict[str, Any]],
) -> list[str]:
    """The notes under an answer: caveat, stale sources, sources that failed."""
    notes = []
    if _weak(ctx, confidence, citations):
        notes.append(CAVEAT_TEXT)
        best = max(c.score for c in citations)
        warnings.append(
            {
                "kind": "low_relevance",
                "detail": f"confidence {confidence.level}; best cited relevance {best:.2f}",
            }
        )
    cutoff = date.today() - timedelta(days=ctx.stale_after_days)
    stale = [c for c in citations if c.document_date and c.document_date < cutoff]
    if stale:
        # named by number, never by title: a title is the document's text, not ours
        dated = ", ".join(f"source {c.n}, dated {c.document_date}" for c in stale)
        notes.append(STALE_TEXT.format(days=ctx.stale_after_days, sources=dated))
        warnings.extend(
            {"kind": "stale_source", "detail": f"source {c.n} is dated {c.document_date}"}
            for c in stale
        )
    errors = [n for n in failed if n not in worked]
    partly = [n for n in failed if n in worked]
    if errors:
        notes.append(PARTIAL_TEXT.format(failed=_label(errors), worked=_label(worked)))
    if partly:
        notes.append(PARTLY_READ_TEXT.format(partly=_label(partly, partly)))
    return notes


def _nothing_text(
    question: str, queries: list[str], failed: Sequence[str], worked: Sequence[str]
) -> str:
    """The reply when there is no answer: what could not be searched, and what was tried."""
    searched = _label(worked) if worked else ""
    quoted = _quote_queries(question, queries)
    if failed:
        return UNAVAILABLE_TEXT.format(
            failed=_label(failed, [n for n in failed if n in worked]),
            searched_clause=f" {searched[0].upper() + searched[1:]} had nothing usable."
            if searched
            else "",
            queries=quoted,
        )
    return NOT_FOUND_TEXT.format(searched=searched or "none", queries=quoted)


def _quote_queries(question: str, queries: list[str]) -> str:
    """The queries tried, quoted only where they hold nothing but the question's own words: a
    model-written rewrite could carry a "fact" into an answer that must state none."""
    allowed = content_stems(question)
    shown = [f'"{q}"' for q in queries if content_stems(q) <= allowed] or [f'"{question}"']
    hidden = sum(1 for q in queries if not content_stems(q) <= allowed)
    if hidden:
        shown.append(f"{hidden} rewritten quer{'y' if hidden == 1 else 'ies'} (listed in queries)")
    return "; ".join(shown)


def _stop_reason(state: AgentState, confidence: Confidence, failed: Sequence[str]) -> str:
    grounding = state.get("grounding")
    if grounding == "all_failed":
        return "every source failed"
    if confidence.level == "NOT_RELEVANT":
        return "evidence not relevant: re-querying cannot conjure a missing document"
    if (
        int(state.get("attempt") or 1) >= int(state.get("attempt_cap") or MAX_ATTEMPTS)
        and not confidence.can_answer
    ):
        return "attempt limit reached"
    return "usable evidence" if confidence.can_answer else "no usable evidence"
