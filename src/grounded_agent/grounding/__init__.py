"""The grounding steps as functions of their own, for a graph or a pipeline that is not this one.

Each takes a question and the findings a source returned (`grounded_agent.sources.
finding_from_document` makes them from LangChain `Document`s) and decides as the agent does:
`judge_evidence` whether they answer (the offline relevance and confidence judgement, with its
learned judge), `extractive_answer` the offline answer quoting them, and `check_citations` which
sentences of a draft stand (markers that point at a finding, text that finding supports), with a
pluggable judge for paraphrase. None of them calls a model or a network.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from grounded_agent.context import Context
from grounded_agent.grounding.citations import check_answer
from grounded_agent.grounding.confidence import LocalJudgement
from grounded_agent.grounding.extractive import extractive_draft
from grounded_agent.grounding.judge import Judge, load_judge
from grounded_agent.schemas import Citation, Confidence, Finding

SupportJudge = Callable[[str, Sequence[Finding]], bool]
"""Whether a sentence is supported by the findings it cites (a model, an NLI classifier, a
rule): asked only for sentences that do not quote their findings word for word."""

__all__ = [
    "CheckedAnswer",
    "SupportJudge",
    "check_citations",
    "extractive_answer",
    "judge_evidence",
]


def judge_evidence(
    question: str,
    findings: Sequence[Finding],
    *,
    context: Context | None = None,
    judge: Judge | None = None,
) -> Confidence:
    """Whether `findings` answer `question`: HIGH or MEDIUM (`can_answer`), LOW, or NOT_RELEVANT,
    with the reason. Findings carry calibrated relevance in `score` (every source of this
    package does); `context` holds the thresholds and the judge's veto; `judge` defaults to the
    shipped offline judge."""
    ctx = context or Context()
    own = judge
    return LocalJudgement(
        question, list(findings), ctx, (lambda: own) if own is not None else load_judge
    ).verdict()


def extractive_answer(question: str, findings: Sequence[Finding], max_sentences: int = 2) -> str:
    """The sentences of `findings` that best answer `question`, each with its `[n]` marker (n:
    the finding's place in `findings`, from 1): the offline answer, before its check."""
    return extractive_draft(question, findings, max_sentences)


@dataclass
class CheckedAnswer:
    """A draft after the citation check: the text that stands and what it cites."""

    text: str
    citations: list[Citation]
    removed: list[str] = field(default_factory=list)
    """Sentences taken out: markers that point at nothing, text no cited finding supports."""


def check_citations(
    draft: str, findings: Sequence[Finding], *, judge: SupportJudge | None = None
) -> CheckedAnswer:
    """Keeps the sentences of `draft` whose `[n]` markers point at `findings` (1-based) and whose
    text those findings support; a citation that points at nothing is removed, never kept. A
    sentence that does not quote its findings word for word stands only if `judge` says it is
    supported (and even then no figure it states may be missing from them)."""
    first = check_answer(draft, findings)
    if judge is None or not first.doubted:
        return CheckedAnswer(first.text, first.citations, [*first.unsupported])
    verdicts = {
        sentence: bool(judge(sentence, [findings[n - 1] for n in numbers]))
        for sentence, numbers in first.doubted
    }
    final = check_answer(draft, findings, judged=verdicts)
    return CheckedAnswer(final.text, final.citations, [*final.unsupported])
