"""Grading one system's response to one question (+1 / 0 / -1) and the metrics over many.

+1  answered (answered, answered_with_caveat or partial), citing the gold paragraph, with an
    answer that contains a gold answer string (case, whitespace and punctuation normalised);
 0  abstained (not_found or unavailable);
-1  answered where it should have abstained (a hallucination), or answered with a wrong
    citation or without the gold answer (a wrong answer).

Where a question names a `gold_version`, the gold citation is that document at that version: a
citation of the gold document at any other version makes the answer wrong, even beside a citation
of the right version.

The credited score (`credited`) is the issue-9 criterion: a correct answer +1, a right abstention
(on a question that should be abstained) +1, a wrong answer or hallucination -1, a wrong
abstention (on an answerable question) 0; its mean over every question of a knowledge base is
the "mean credited score" each table prints.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from evals.data import KINDS, NOTES, EvalQuestion
from evals.data import normalise as normalise  # re-exported: grading's words

ANSWERED_STATUSES = frozenset({"answered", "answered_with_caveat", "partial"})
ABSTAINED_STATUSES = frozenset({"not_found", "unavailable"})

Outcome = Literal["correct", "abstained", "wrong", "hallucinated"]
OUTCOMES: tuple[Outcome, ...] = ("correct", "abstained", "wrong", "hallucinated")

_MARKER = re.compile(r"\[\d{1,3}\]")


def contains_answer(answer: str, golds: Iterable[str]) -> bool:
    """True when a gold answer occurs in the answer as whole words, after normalisation.

    Citation markers are removed first, so "[1]" never matches a gold answer "1".
    """
    hay = f" {normalise(_MARKER.sub(' ', answer))} "
    for gold in golds:
        needle = normalise(gold)
        if needle and f" {needle} " in hay:
            return True
    return False


@dataclass
class Response:
    """What a system did with one question, in the terms the grader needs."""

    status: str
    answer: str = ""
    cited: list[str] = field(default_factory=list)
    cited_versions: list[str | None] = field(default_factory=list)
    """Version of each citation in `cited` (same order); missing entries are None."""
    llm_calls: int = 0
    latency_ms: float = 0.0
    attempts: int = 1
    confidence: str | None = None
    best_score: float | None = None
    error: str | None = None
    closest: list[str] = field(default_factory=list)
    """Documents the system listed as the closest when it gave no answer (source ids)."""


@dataclass
class Graded:
    """One question, one system: the response and its grade."""

    id: str
    kind: str
    system: str
    question: str
    status: str
    outcome: Outcome
    score: int
    cited: list[str]
    gold_doc_id: str | None
    cites_gold: bool
    has_answer: bool
    answer: str
    llm_calls: int
    latency_ms: float
    attempts: int
    confidence: str | None
    best_score: float | None
    gold_rank: int | None = None
    error: str | None = None
    note: str | None = None
    gold_version: str | None = None
    cited_versions: list[str | None] = field(default_factory=list)
    wrong_version: bool = False
    """The gold document was cited at a version other than `gold_version`."""
    credited: int = 0
    """The credited score: +1 correct or right abstention, 0 wrong abstention, -1 wrong answer."""
    gold_closest: bool = False
    """Abstained on an answerable question, with the gold document among the closest listed."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def credited_score(outcome: Outcome, should_answer: bool) -> int:
    """+1 correct or right abstention; 0 abstaining on an answerable question; -1 otherwise."""
    if outcome == "correct":
        return 1
    if outcome == "abstained":
        return 0 if should_answer else 1
    return -1


def gold_citation(q: EvalQuestion, cited: Sequence[str], versions: Sequence[str | None]
                  ) -> tuple[bool, bool]:
    """(cites the gold document at the gold version, cites it at another version)."""
    if q.gold_doc_id is None:
        return False, False
    seen = [versions[i] if i < len(versions) else None
            for i, c in enumerate(cited) if c == q.gold_doc_id]
    if q.gold_version is None:
        return bool(seen), False
    wrong = any(v != q.gold_version for v in seen)
    return bool(seen) and not wrong, wrong


def grade(q: EvalQuestion, r: Response, system: str, gold_rank: int | None = None) -> Graded:
    """Applies the +1/0/-1 rules. A status that is neither answered nor abstained counts as
    answered: a system must say plainly when it does not know."""
    answered = r.status not in ABSTAINED_STATUSES
    cites_gold, wrong_version = gold_citation(q, r.cited, r.cited_versions)
    has_answer = bool(q.answers) and contains_answer(r.answer, q.answers)
    outcome: Outcome
    if not answered:
        outcome, score = "abstained", 0
    elif not q.should_answer:
        outcome, score = "hallucinated", -1
    elif cites_gold and has_answer:
        outcome, score = "correct", 1
    else:
        outcome, score = "wrong", -1
    return Graded(
        id=q.id, kind=q.kind, system=system, question=q.question, status=r.status,
        outcome=outcome, score=score, cited=list(r.cited), gold_doc_id=q.gold_doc_id,
        cites_gold=cites_gold, has_answer=has_answer, answer=r.answer, llm_calls=r.llm_calls,
        latency_ms=round(r.latency_ms, 2), attempts=r.attempts, confidence=r.confidence,
        best_score=None if r.best_score is None else round(r.best_score, 4),
        gold_rank=gold_rank, error=r.error, note=q.note, gold_version=q.gold_version,
        cited_versions=list(r.cited_versions), wrong_version=wrong_version,
        credited=credited_score(outcome, q.should_answer),
        gold_closest=outcome == "abstained" and q.should_answer
        and q.gold_doc_id is not None and q.gold_doc_id in r.closest,
    )


def percentile(values: Sequence[float], q: float) -> float | None:
    """Linear-interpolated percentile (q in [0, 100]); None for no values."""
    if not values:
        return None
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def _rate(n: int, d: int) -> float | None:
    return round(n / d, 4) if d else None


def kind_metrics(rows: Sequence[Graded]) -> dict[str, Any]:
    """Metrics of one system on one kind of question.

    hallucination_rate: share answered although the kind asks for an abstention (0 for answerable);
    wrong_rate: share answered with a wrong citation or without the gold answer (answerable);
    citation_precision: share of all citations of answered answerable questions that are the
    gold paragraph; credited_score: the mean credited score (a right abstention counts +1).
    """
    n = len(rows)
    counts = {o: sum(1 for r in rows if r.outcome == o) for o in OUTCOMES}
    answered = [r for r in rows if r.outcome != "abstained"]
    cites = [c for r in answered if r.kind == "answerable" for c in r.cited]
    gold_cites = sum(
        1
        for r in answered
        if r.kind == "answerable"
        for i, c in enumerate(r.cited)
        if c == r.gold_doc_id
        and (r.gold_version is None
             or (r.cited_versions[i] if i < len(r.cited_versions) else None) == r.gold_version)
    )
    latencies = [r.latency_ms for r in rows]
    credited = [r.credited for r in rows]
    return {
        "n": n,
        "counts": counts,
        "correct_rate": _rate(counts["correct"], n),
        "abstention_rate": _rate(counts["abstained"], n),
        "answered_rate": _rate(len(answered), n),
        "hallucination_rate": _rate(counts["hallucinated"], n),
        "wrong_rate": _rate(counts["wrong"], n),
        "citation_precision": _rate(gold_cites, len(cites)),
        "mean_score": round(sum(r.score for r in rows) / n, 4) if n else None,
        "credited_score": round(sum(credited) / n, 4) if n else None,
        "llm_calls_mean": round(sum(r.llm_calls for r in rows) / n, 3) if n else None,
        "llm_calls_max": max((r.llm_calls for r in rows), default=None),
        "attempts_mean": round(sum(r.attempts for r in rows) / n, 3) if n else None,
        "latency_ms_p50": _round(percentile(latencies, 50)),
        "latency_ms_p95": _round(percentile(latencies, 95)),
        "errors": sum(1 for r in rows if r.error),
        "abstained_gold_closest": sum(1 for r in rows if r.gold_closest),
    }


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 1)


def system_metrics(rows: Sequence[Graded]) -> dict[str, Any]:
    """Per kind, and the pooled means the targets are stated in."""
    by_kind = {k: [r for r in rows if r.kind == k] for k in KINDS}
    out: dict[str, Any] = {"by_kind": {k: kind_metrics(v) for k, v in by_kind.items() if v}}
    notes = note_metrics(rows)
    if notes:
        out["by_note"] = notes
    pooled = by_kind["answerable"] + by_kind["out_of_kb"]
    if pooled:
        out["mean_score_answerable_out_of_kb"] = round(sum(r.score for r in pooled) / len(pooled), 4)
        out["credited_score_answerable_out_of_kb"] = round(
            sum(r.credited for r in pooled) / len(pooled), 4
        )
    if rows:
        out["mean_score_all"] = round(sum(r.score for r in rows) / len(rows), 4)
        out["credited_score_all"] = round(sum(r.credited for r in rows) / len(rows), 4)
    return out


def note_metrics(rows: Sequence[Graded]) -> dict[str, Any]:
    """Per note (what a project-KB question tests): how many, of which kinds, the outcomes, the
    share handled right (correct where answerable, abstained otherwise), the credited score."""
    present = {r.note for r in rows if r.note}
    order = [n for n in NOTES if n in present] + sorted(present - set(NOTES))
    out: dict[str, Any] = {}
    for note in order:
        sel = [r for r in rows if r.note == note]
        right = sum(1 for r in sel if r.credited == 1)
        out[note] = {
            "n": len(sel),
            "kinds": {k: sum(1 for r in sel if r.kind == k) for k in KINDS
                      if any(r.kind == k for r in sel)},
            "counts": {o: sum(1 for r in sel if r.outcome == o) for o in OUTCOMES},
            "right_rate": _rate(right, len(sel)),
            "wrong_version": sum(1 for r in sel if r.wrong_version),
            "credited_score": round(sum(r.credited for r in sel) / len(sel), 4),
        }
    return out


def retrieval_metrics(ranks: Sequence[int | None]) -> dict[str, Any]:
    """Where the gold paragraph ranks in the question's top-k search (answerable questions)."""
    n = len(ranks)
    if not n:
        return {}
    found = [r for r in ranks if r is not None]
    return {
        "n": n,
        "gold_top1": _rate(sum(1 for r in found if r == 1), n),
        "gold_top3": _rate(sum(1 for r in found if r <= 3), n),
        "gold_in_top_k": _rate(len(found), n),
        "mrr": round(sum(1.0 / r for r in found) / n, 4),
    }
