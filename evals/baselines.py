"""Baselines run on the same search results as the agent, to show what each grounding step buys.

plain_rag        always answers: the best sentences of the top passage, cited. No grounding at all.
thresholds_only  the grounding check alone: answers when the best calibrated relevance reaches
                 found_threshold, else abstains; no confidence step, no second attempt.

Both extract with the agent's own `extractive_draft`, so the comparison isolates the decisions.
"""

from __future__ import annotations

from collections.abc import Sequence

from evals.grading import Response
from grounded_agent.grounding.citations import check_answer
from grounded_agent.grounding.extractive import extractive_draft
from grounded_agent.schemas import Finding

SYSTEMS: tuple[str, ...] = ("full_graph", "thresholds_only", "plain_rag")


def _answer_from(question: str, passages: Sequence[Finding]) -> tuple[str, list[str]]:
    checked = check_answer(extractive_draft(question, passages), passages)
    return checked.text, [c.source_id for c in checked.citations]


def plain_rag(question: str, findings: Sequence[Finding]) -> Response:
    """Answers from the top passage whatever its relevance; abstains only on an empty search."""
    if not findings:
        return Response(status="not_found")
    text, cited = _answer_from(question, findings[:1])
    return Response(status="answered" if cited else "not_found", answer=text, cited=cited,
                    best_score=findings[0].score)


def thresholds_only(
    question: str, findings: Sequence[Finding], found_threshold: float, low_threshold: float
) -> Response:
    """Answers from the usable passages when the best one reaches found_threshold."""
    best = max((f.score for f in findings), default=None)
    if best is None or best < found_threshold:
        return Response(status="not_found", best_score=best)
    usable = [f for f in findings if f.score >= low_threshold]
    text, cited = _answer_from(question, usable)
    return Response(status="answered" if cited else "not_found", answer=text, cited=cited,
                    best_score=best)
