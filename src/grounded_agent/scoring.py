"""The local confidence step: relevance gates what is read, the offline judge (trained in this
project, grounded_agent.judge) decides whether the sentence an answer would quote answers.

Two cut-offs on the judge's probability, both chosen on its tuning split
(benchmarks/calibrate_judge.py) and kept in its manifest: in the found relevance band the judge
only vetoes (`floor`); below it, the judge alone must be sure (`threshold`). With a model, the
step only spares the model's confidence call where the offline verdict is HIGH; a judge's "no"
goes to the model, which reads paraphrases the judge was not trained on.
"""

from __future__ import annotations

from collections.abc import Sequence

from grounded_agent.judge import Judge, load_judge
from grounded_agent.reading import choose
from grounded_agent.schemas import Confidence, Finding


def local_confidence(
    question: str,
    evidence: Sequence[Finding],
    found_threshold: float,
    low_threshold: float,
    *,
    judge: Judge | None = None,
    answer_threshold: float | None = None,
) -> Confidence:
    """The offline judgement: HIGH in the found band unless the judge vetoes, MEDIUM below it
    where the judge alone is sure (`answer_threshold`, the manifest's threshold when None)."""
    kept = [f for f in evidence if f.score >= low_threshold]
    if not kept:
        return Confidence(level="NOT_RELEVANT", reason="no passage reached the relevance threshold")
    judge = judge or load_judge()
    choice = choose(judge, question, kept)
    relevance = max(f.score for f in kept)
    if choice is None:
        return Confidence(level="NOT_RELEVANT", reason="the passages found hold no sentence to quote")
    why = f"relevance {relevance:.2f}, judge {choice.score:.2f} on the sentence an answer quotes"
    sure = judge.manifest.threshold if answer_threshold is None else answer_threshold
    floor = min(judge.manifest.floor, sure)
    if relevance >= found_threshold and choice.score >= floor:
        return Confidence(level="HIGH", can_answer=True, reason=why)
    if choice.score >= sure:
        return Confidence(level="MEDIUM", can_answer=True, reason=why)
    return Confidence(level="NOT_RELEVANT", reason=f"{why}: no sentence found answers it")


def decisive(
    question: str,
    evidence: Sequence[Finding],
    found_threshold: float,
    low_threshold: float,
    *,
    judge: Judge | None = None,
    answer_threshold: float | None = None,
) -> tuple[Confidence, str] | None:
    """HIGH without asking the model when the offline verdict is HIGH; else None (the model
    judges)."""
    conf = local_confidence(question, evidence, found_threshold, low_threshold, judge=judge,
                            answer_threshold=answer_threshold)
    if conf.level != "HIGH":
        return None
    return conf, "relevance in the found band and the offline judge's agreement"
