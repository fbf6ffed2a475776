"""The local confidence scorer: relevance on the graph's scale plus the names the question asks
about.

Used without a model, and to skip the model where the signals already decide. The offline rule was
chosen with benchmarks/calibrate_confidence.py over several knowledge bases: a logistic "is the
extracted answer right" model over relevance, coverage, answer type and missing names could not
beat abstaining on the credited score (its probabilities for right and wrong answers overlap), and
of the simple rules only one beat the thresholds-only baseline on every knowledge base: answer
from the found band unless a name or number of the question is absent from every passage. The
answer-type check over every passage sentence that shares the question's words vetoed more right
answers than wrong ones (a paraphrased question shares too few words with its answer sentence), so
it chooses sentences and sends LLM-mode questions to the model. What does veto offline is
narrower: the sentences the answer would quote hold no figure of the kind asked for
(FIGURE_KINDS).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from grounded_agent.grounding.answer_types import AnswerType, asked_type, holds_type
from grounded_agent.grounding.citations import MARKER
from grounded_agent.grounding.extractive import extractive_draft
from grounded_agent.grounding.sentences import split_sentences
from grounded_agent.grounding.text import key_terms, missing_names, weighted_coverage
from grounded_agent.schemas import Confidence, Finding

# Cut-offs on key-term coverage of a passage (share of the question's weighted key terms).
HIGH_COVERAGE = 0.5
NOT_RELEVANT_COVERAGE = 0.2

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


FIGURE_KINDS: frozenset[AnswerType] = frozenset(
    {"amount", "price", "duration", "frequency", "date", "number", "phone"}
)
"""Kinds of answer a sentence shows by a figure. Offline, an answer whose quoted sentences hold
no such figure is declined (chosen over seven KBs: never fewer right decisions on any of them;
the name kinds, seen only as a capitalised word, vetoed right answers on swapped SQuAD)."""


def _quoted_holds(
    question: str, evidence: Sequence[Finding], kind: AnswerType, extract: str | None = None
) -> bool:
    """Whether the sentences the offline answer would quote hold the asked-for kind of thing."""
    quoted = MARKER.sub(" ", extractive_draft(question, evidence) if extract is None else extract)
    return any(holds_type(kind, sentence) for sentence in split_sentences(quoted))


def _passage(f: Finding) -> str:
    return f"{f.title}\n{f.section or ''}\n{f.text}"


def _holds_asked(terms: dict[str, float], kind: AnswerType | None, passages: Sequence[Finding]) -> bool:
    if kind is None:
        return True
    for f in passages:
        for sentence in split_sentences(f.text):
            covered = weighted_coverage(terms, sentence) >= TYPE_SENTENCE_COVERAGE
            if covered and holds_type(kind, sentence):
                return True
    return False


def signals(question: str, evidence: Sequence[Finding]) -> Signals:
    """Best relevance, best key-term coverage of a top passage, names no passage contains, the
    coverage of the most relevant passage, and whether the asked-for kind of answer is there."""
    if not evidence:
        return Signals(0.0, 0.0, ())
    terms = key_terms(question)
    top = list(evidence)[:3]  # best answer first, as the sources ranked them
    covs = [weighted_coverage(terms, _passage(f)) for f in top]
    joined = "\n".join(f"{f.title} {f.section or ''} {f.text}" for f in top)
    kind = asked_type(question)
    return Signals(
        max(f.score for f in evidence), max(covs), tuple(missing_names(question, joined)), covs[0],
        kind, _holds_asked(terms, kind, top),
    )


def local_confidence(
    question: str, evidence: Sequence[Finding], found_threshold: float, low_threshold: float,
    extract: str | None = None,
) -> Confidence:
    """The offline judgement: the relevance bands, and no answer about a name no passage has.
    `extract`: extractive_draft(question, evidence) when the caller has built it already."""
    s = signals(question, evidence)
    if not evidence or s.best_score < low_threshold:
        return Confidence(level="NOT_RELEVANT", reason="no passage reached the relevance threshold")
    if s.missing:
        return Confidence(
            level="NOT_RELEVANT",
            reason=f"the evidence does not mention {', '.join(s.missing[:3])}",
        )
    why = f"relevance {s.best_score:.2f}, {s.top_coverage:.0%} of the key terms in the best passage"
    if s.best_score < found_threshold:
        return Confidence(level="LOW", reason=f"{why}: below the found threshold")
    if s.asked in FIGURE_KINDS and not _quoted_holds(question, evidence, s.asked, extract):
        return Confidence(
            level="NOT_RELEVANT",
            reason=f"the question asks for a {s.asked}; the sentences an answer would quote hold none",
        )
    level = "HIGH" if s.top_coverage >= HIGH_COVERAGE else "MEDIUM"
    return Confidence(level=level, can_answer=True, reason=why)


def decisive(
    question: str, evidence: Sequence[Finding], found_threshold: float, low_threshold: float
) -> tuple[Confidence, str] | None:
    """A verdict the model cannot improve on, with the signal that decided it; else None."""
    s = signals(question, evidence)
    if s.best_score >= found_threshold and s.coverage >= 0.6 and not s.missing and s.type_found:
        if s.asked in FIGURE_KINDS and not _quoted_holds(question, evidence, s.asked):
            return None  # the same check as the judged path: the sentences quoted must hold it
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
