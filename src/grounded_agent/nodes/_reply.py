"""What the answer node tells the user besides the checked text: per-source reports, the notes
under an answer, the reply when there is none, and where to look instead. Pure functions: each
returns what it found, the node merges it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import date, timedelta
from typing import Any

from grounded_agent.context import MAX_ATTEMPTS, Context
from grounded_agent.grounding.text import content_stems
from grounded_agent.nodes._common import outcomes_of
from grounded_agent.prompts.answer import (
    CAVEAT_TEXT,
    NOT_FOUND_TEXT,
    PARTIAL_TEXT,
    PARTLY_READ_TEXT,
    STALE_TEXT,
    UNAVAILABLE_TEXT,
)
from grounded_agent.schemas import Citation, Confidence, Finding, Pointer, SourceReport, ToolOutcome
from grounded_agent.state import turn_of

SOURCE_LABELS = {
    "knowledge_base": "the knowledge base",
    "wikipedia": "Wikipedia",
    "web": "web search",
}


def label(names: Sequence[str], partly: Sequence[str] = ()) -> str:
    labels = [("part of " if n in partly else "") + SOURCE_LABELS.get(n, n) for n in names]
    return labels[0] if len(labels) == 1 else ", ".join(labels[:-1]) + " and " + labels[-1]


def source_reports(requested: list[str], outcomes: dict[str, ToolOutcome]) -> list[SourceReport]:
    """One line per requested source; a source never reached counts as unavailable, not empty."""
    reports = []
    for name in requested:
        o = outcomes.get(name)
        if o is None:
            reports.append(SourceReport(source=name, status="error", coverage="unavailable",
                                        error_kind="unknown"))
        else:
            reports.append(SourceReport(source=o.source, status=o.status, coverage=o.coverage,
                                        error_kind=o.error_kind, finding_count=o.finding_count))
    return reports


def source_warnings(
    state: Mapping[str, Any], reports: list[SourceReport]
) -> list[dict[str, Any]]:
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
            warnings.append({
                "kind": "source_unavailable",
                "detail": f"a later search of {SOURCE_LABELS.get(o.source, o.source)} failed "
                f"({o.error_kind}); only its earlier search counts",
            })
    return warnings


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


def weak(ctx: Context, confidence: Confidence, citations: list[Citation]) -> bool:
    """MEDIUM confidence, or a cited passage under the found threshold: the answer has a caveat."""
    return confidence.level == "MEDIUM" or min(c.score for c in citations) < ctx.found_threshold


def notes(
    ctx: Context,
    confidence: Confidence,
    citations: list[Citation],
    failed: Sequence[str],
    worked: Sequence[str],
) -> tuple[list[str], list[dict[str, Any]]]:
    """The notes under an answer (caveat, stale sources, sources that failed) and their warnings."""
    lines: list[str] = []
    warnings: list[dict[str, Any]] = []
    if weak(ctx, confidence, citations):
        lines.append(CAVEAT_TEXT)
        best = max(c.score for c in citations)
        warnings.append({"kind": "low_relevance",
                         "detail": f"confidence {confidence.level}; best cited relevance {best:.2f}"})
    cutoff = date.today() - timedelta(days=ctx.stale_after_days)
    stale = [c for c in citations if c.document_date and c.document_date < cutoff]
    if stale:
        # named by number, never by title: a title is the document's text, not ours
        dated = ", ".join(f"source {c.n}, dated {c.document_date}" for c in stale)
        lines.append(STALE_TEXT.format(days=ctx.stale_after_days, sources=dated))
        warnings.extend(
            {"kind": "stale_source", "detail": f"source {c.n} is dated {c.document_date}"}
            for c in stale
        )
    errors = [n for n in failed if n not in worked]
    partly = [n for n in failed if n in worked]
    if errors:
        lines.append(PARTIAL_TEXT.format(failed=label(errors), worked=label(worked)))
    if partly:
        lines.append(PARTLY_READ_TEXT.format(partly=label(partly, partly)))
    return lines, warnings


def nothing_text(
    question: str, queries: list[str], failed: Sequence[str], worked: Sequence[str]
) -> str:
    """The reply when there is no answer: what could not be searched, and what was tried."""
    searched = label(worked) if worked else ""
    quoted = quote_queries(question, queries)
    if failed:
        return UNAVAILABLE_TEXT.format(
            failed=label(failed, [n for n in failed if n in worked]),
            searched_clause=f" {searched[0].upper() + searched[1:]} had nothing usable."
            if searched
            else "",
            queries=quoted,
        )
    return NOT_FOUND_TEXT.format(searched=searched or "none", queries=quoted)


def quote_queries(question: str, queries: list[str]) -> str:
    """The queries tried, quoted only where they hold nothing but the question's own words: a
    model-written rewrite could carry a "fact" into an answer that must state none."""
    allowed = content_stems(question)
    shown = [f'"{q}"' for q in queries if content_stems(q) <= allowed] or [f'"{question}"']
    hidden = sum(1 for q in queries if not content_stems(q) <= allowed)
    if hidden:
        shown.append(f"{hidden} rewritten quer{'y' if hidden == 1 else 'ies'} (listed in queries)")
    return "; ".join(shown)


def stop_reason(state: Mapping[str, Any], confidence: Confidence) -> str:
    """Why the question stopped where it did, for the log line of the last step."""
    turn = turn_of(state)
    if turn.get("grounding") == "all_failed":
        return "every source failed"
    if confidence.level == "NOT_RELEVANT":
        return "evidence not relevant: re-querying cannot conjure a missing document"
    if (
        int(turn.get("attempt") or 1) >= int(turn.get("attempt_cap") or MAX_ATTEMPTS)
        and not confidence.can_answer
    ):
        return "attempt limit reached"
    return "usable evidence" if confidence.can_answer else "no usable evidence"
