"""What the offline judge reads in the found passages: the passage an offline answer quotes and
its sentence, and how sure the judge is that the sentence answers.

Retrieval keeps the first say on which passage (its order carries the full-text and vector
evidence over the whole passage); the judge weighs in with its best sentence of each of the first
three, and picks the sentence. Relevance still gates what is read: a vector score says which
passages are closest, the judge says whether a sentence of one answers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from grounded_agent.judge import Judge
from grounded_agent.schemas import Finding
from grounded_agent.text import answer_units, looks_like_instruction

CHOICE_DEPTH = 3
"""Passages an offline answer may quote from: the retrieval's first three."""


@dataclass(frozen=True)
class Choice:
    """The passage (its index in the findings) and sentence an offline answer would quote."""

    index: int
    sentence: str
    score: float
    """The judge's probability that the sentence answers the question."""


def best_sentences(judge: Judge, question: str, findings: Sequence[Finding]) -> list[Choice]:
    """The best sentence of each passage, in the passages' order. Instruction-like sentences are
    never candidates: a passage telling the reader what to answer answers nothing."""
    units = [(i, f.title, s) for i, f in enumerate(findings)
             for s in answer_units(f.text) if not looks_like_instruction(s)]
    if not units:
        return []
    scores = judge.score(question, [(title, sentence) for _, title, sentence in units])
    best: dict[int, Choice] = {}
    for (i, _, sentence), score in zip(units, scores, strict=True):
        if i not in best or score > best[i].score:
            best[i] = Choice(i, sentence, score)
    return [best[i] for i in sorted(best)]


def choose(judge: Judge, question: str, findings: Sequence[Finding],
           weight: float | None = None) -> Choice | None:
    """Among the first three passages: relevance plus `weight` times the judge's best sentence
    (the manifest's weight, chosen on the tuning split, when None)."""
    w = judge.manifest.weight if weight is None else weight
    top = list(findings)[:CHOICE_DEPTH]
    candidates = best_sentences(judge, question, top)
    if not candidates:
        return None
    return max(candidates, key=lambda c: (top[c.index].score + w * c.score, -c.index))
