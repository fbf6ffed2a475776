"""The local confidence scorer: relevance scores plus how much of the question the evidence covers.

Used without a model, and to skip the model where the signals already decide. Its cut-offs are
calibrated offline on SQuAD-derived questions (benchmarks/ and the eval harness report how).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from grounded_agent.answer_types import AnswerType, asked_type, holds_type
from grounded_agent.schemas import Confidence, Finding
from grounded_agent.text import coverage, key_terms, missing_names, split_sentences

# Cut-offs on key-term coverage of a passage (share of the question's weighted key terms).
HIGH_COVERAGE = 0.5
MEDIUM_COVERAGE = 0.4
NOT_RELEVANT_COVERAGE = 0.2

# The offline answer decision: P(an extractive answer from this evidence is right) as a logistic
# model of the best calibrated relevance and the key-term coverage of the best passage,
#     p = sigmoid(COEF_SCORE * best_score + COEF_COVERAGE * coverage + INTERCEPT).
# Fitted with grounded_agent.evaluation.calibrate on 1,800 SQuAD-derived questions (600 per kind,
# seed 1, none of them in the seed-0 or seed-2 report samples): label 1 where the answer extracted
# from the evidence cites the gold paragraph and contains the gold answer, 0 for out-of-KB
# questions. Answering at p >= ANSWER_P kept 97% of out-of-KB questions unanswered on that
# sample at the price of answering fewer answerable ones (65.5% right instead of 72% at
# p >= 0.80, which leaves 95% of out-of-KB questions unanswered). Lexical signals barely
# separate SQuAD 2.0's adversarial unanswerable questions (ROC AUC 0.71 against answerable ones,
# with cosine, coverage, sentence coverage and missing names together): those need the model.
DECISION_FEATURES = ("best_score", "top_coverage", "coverage", "type_found", "names_missing")
DECISION_COEFFICIENTS = (3.664, 2.306, 0.0, 0.0, 0.0, -2.531)
"""One weight per decision feature, then the intercept (benchmarks/calibrate_confidence.py)."""
ANSWER_P = 0.88
HIGH_P = 0.95


TYPE_SENTENCE_COVERAGE = 0.2
"""A sentence counts as holding the asked-for thing only if it also shares some of the question's
key terms: a figure anywhere in a passage is not an answer."""


@dataclass(frozen=True)
class Signals:
    best_score: float
    coverage: float
    missing: tuple[str, ...]
    top_coverage: float = 0.0
    """Key-term coverage of the single most relevant passage, the one an answer would quote."""
    asked: AnswerType | None = None
    """The kind of answer the question asks for (None when its form does not say)."""
    type_found: bool = True
    """Some sentence of a top passage holds that kind of thing next to the question's terms."""

    @property
    def answer_probability(self) -> float:
        feats = decision_features(self)
        z = DECISION_COEFFICIENTS[-1] + sum(
            c * f for c, f in zip(DECISION_COEFFICIENTS[:-1], feats, strict=True)
        )
        return 1.0 / (1.0 + math.exp(-z))


def decision_features(s: Signals) -> list[float]:
    """The signals the offline answer decision weighs, in DECISION_FEATURES order."""
    return [s.best_score, s.top_coverage, s.coverage, float(s.type_found), float(bool(s.missing))]


def _passage(f: Finding) -> str:
    return f"{f.title}\n{f.section or ''}\n{f.text}"


def _holds_asked(terms: dict[str, float], kind: AnswerType | None, passages: Sequence[Finding]) -> bool:
    if kind is None:
        return True
    for f in passages:
        for sentence in split_sentences(f.text):
            if holds_type(kind, sentence) and coverage(terms, sentence) >= TYPE_SENTENCE_COVERAGE:
                return True
    return False


def signals(question: str, evidence: Sequence[Finding]) -> Signals:
    """Best relevance, best key-term coverage of a top passage, names no passage contains, the
    coverage of the most relevant passage, and whether the asked-for kind of answer is there."""
    if not evidence:
        return Signals(0.0, 0.0, ())
    terms = key_terms(question)
    top = list(evidence)[:3]  # best answer first, as the sources ranked them
    covs = [coverage(terms, _passage(f)) for f in top]
    joined = "\n".join(f"{f.title} {f.section or ''} {f.text}" for f in top)
    kind = asked_type(question)
    return Signals(
        max(f.score for f in evidence), max(covs), tuple(missing_names(question, joined)), covs[0],
        kind, _holds_asked(terms, kind, top),
    )


def local_confidence(
    question: str, evidence: Sequence[Finding], found_threshold: float, low_threshold: float
) -> Confidence:
    """The offline judgement: answer when the logistic answer model clears ANSWER_P."""
    s = signals(question, evidence)
    if not evidence or s.best_score < low_threshold:
        return Confidence(level="NOT_RELEVANT", reason="no passage reached the relevance threshold")
    p = s.answer_probability
    why = f"relevance {s.best_score:.2f}, {s.top_coverage:.0%} of the key terms in the best passage"
    if p >= ANSWER_P:
        level = "HIGH" if p >= HIGH_P and s.best_score >= found_threshold else "MEDIUM"
        return Confidence(level=level, can_answer=True, reason=f"{why} (answer model {p:.2f})")
    if s.missing and s.coverage < HIGH_COVERAGE:
        return Confidence(
            level="NOT_RELEVANT",
            reason=f"the evidence does not mention {', '.join(s.missing[:3])}",
        )
    if s.coverage < NOT_RELEVANT_COVERAGE:
        return Confidence(
            level="NOT_RELEVANT",
            reason=f"only {s.coverage:.0%} of the question's key terms appear in the evidence",
        )
    if not s.type_found:
        return Confidence(
            level="LOW",
            reason=f"the passages found share the question's words but state no {s.asked}",
        )
    return Confidence(level="LOW", reason=f"{why}: too little to answer from (answer model {p:.2f})")


def decisive(
    question: str, evidence: Sequence[Finding], found_threshold: float, low_threshold: float
) -> tuple[Confidence, str] | None:
    """A verdict the model cannot improve on, with the signal that decided it; else None."""
    s = signals(question, evidence)
    if s.best_score >= found_threshold and s.coverage >= 0.6 and not s.missing and s.type_found:
        return (
            Confidence(
                level="HIGH",
                can_answer=True,
                reason=f"relevance {s.best_score:.2f}, {s.coverage:.0%} of key terms covered",
            ),
            "best relevance above the found threshold and every name of the question present",
        )
    if s.missing and s.coverage < NOT_RELEVANT_COVERAGE:
        return (
            Confidence(
                level="NOT_RELEVANT",
                reason=f"the evidence does not mention {', '.join(s.missing[:3])}",
            ),
            "names of the question absent from every passage",
        )
    return None
