"""Offline answers: the sentence the judge finds answers the question, with its passage's marker."""

from __future__ import annotations

from collections.abc import Sequence

from grounded_agent.citations import attach_markers
from grounded_agent.judge import Judge, load_judge
from grounded_agent.reading import choose
from grounded_agent.schemas import Finding


def extractive_draft(question: str, sources: Sequence[Finding], judge: Judge | None = None) -> str:
    """One sentence, cited to its passage (`reading.choose`). A second sentence, chosen because
    it shares the question's words, was where wrong offline answers came from; the judge reads
    the question and the sentence together instead."""
    choice = choose(judge or load_judge(), question, sources)
    if choice is None:
        return ""
    return attach_markers(choice.sentence, f"[{choice.index + 1}]")
