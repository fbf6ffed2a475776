"""The local confidence scorer: relevance scores plus how much of the question the evidence covers.

Used without a model, and to skip the model where the signals already decide. Its cut-offs are
calibrated offline on SQuAD-derived questions (benchmarks/ and the eval harness report how).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from grounded_agent.schemas import Confidence, Finding
from grounded_agent.text import coverage, key_terms, missing_names

# Cut-offs on key-term coverage of the best passage (share of the question's weighted key terms).
HIGH_COVERAGE = 0.5
MEDIUM_COVERAGE = 0.4
NOT_RELEVANT_COVERAGE = 0.2


@dataclass(frozen=True)
class Signals:
    best_score: float
    coverage: float
    missing: tuple[str, ...]


def signals(question: str, evidence: Sequence[Finding]) -> Signals:
    """Best relevance, best key-term coverage of a top passage, and names no passage contains."""
    if not evidence:
        return Signals(0.0, 0.0, ())
    terms = key_terms(question)
    top = list(evidence)[:3]
    cov = max(coverage(terms, f"{f.title}\n{f.section or ''}\n{f.text}") for f in top)
    joined = "\n".join(f"{f.title} {f.section or ''} {f.text}" for f in top)
    return Signals(max(f.score for f in evidence), cov, tuple(missing_names(question, joined)))


def local_confidence(
    question: str, evidence: Sequence[Finding], found_threshold: float, low_threshold: float
) -> Confidence:
    s = signals(question, evidence)
    if not evidence or s.best_score < low_threshold:
        return Confidence(level="NOT_RELEVANT", reason="no passage reached the relevance threshold")
    if s.missing and s.coverage < HIGH_COVERAGE:
        return Confidence(
            level="NOT_RELEVANT",
            reason=f"the evidence does not mention {', '.join(s.missing[:3])}",
        )
    if s.best_score >= found_threshold and s.coverage >= HIGH_COVERAGE:
        return Confidence(
            level="HIGH", can_answer=True,
            reason=f"relevance {s.best_score:.2f} and {s.coverage:.0%} of the key terms covered",
        )
    if s.coverage >= MEDIUM_COVERAGE:
        return Confidence(
            level="MEDIUM", can_answer=True,
            reason=f"relevance {s.best_score:.2f}, {s.coverage:.0%} of the key terms covered",
        )
    if s.coverage < NOT_RELEVANT_COVERAGE:
        return Confidence(
            level="NOT_RELEVANT",
            reason=f"only {s.coverage:.0%} of the question's key terms appear in the evidence",
        )
    return Confidence(
        level="LOW", reason=f"related passages cover only {s.coverage:.0%} of the key terms"
    )


def decisive(
    question: str, evidence: Sequence[Finding], found_threshold: float, low_threshold: float
) -> tuple[Confidence, str] | None:
    """A verdict the model cannot improve on, with the signal that decided it; else None."""
    s = signals(question, evidence)
    if s.best_score >= found_threshold and s.coverage >= 0.6 and not s.missing:
        return (
            Confidence(level="HIGH", can_answer=True,
                       reason=f"relevance {s.best_score:.2f}, {s.coverage:.0%} of key terms covered"),
            "best relevance above the found threshold and every name of the question present",
        )
    if s.missing and s.coverage < NOT_RELEVANT_COVERAGE:
        return (
            Confidence(level="NOT_RELEVANT",
                       reason=f"the evidence does not mention {', '.join(s.missing[:3])}"),
            "names of the question absent from every passage",
        )
    return None
