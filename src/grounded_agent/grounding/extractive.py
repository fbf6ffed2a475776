"""Offline answers: the sentences of the found passages that hold what the question asks for."""

from __future__ import annotations

from collections.abc import Sequence

from grounded_agent.grounding.answer_types import asked_type, holds_type
from grounded_agent.grounding.citations import attach_markers
from grounded_agent.grounding.instructions import looks_like_instruction
from grounded_agent.grounding.sentences import answer_units
from grounded_agent.grounding.text import idf_from, key_terms, weighted_coverage
from grounded_agent.schemas import Finding

TYPE_BONUS = 0.3
"""Added to a sentence's coverage when it holds the kind of thing the question asks for."""
READ_PASSAGES = 3
"""The passages an offline answer chooses among (the best few; a lower one rarely answers)."""
RANK_BONUS = 0.6
"""Added per place a passage's document stands higher in the sources' own order (which document
answers best). Chunks of one document get no order among themselves: the sections of one page
all score alike, and there the sentence that holds the answer decides."""


def extractive_draft(question: str, sources: Sequence[Finding], max_sentences: int = 2) -> str:
    """Offline answer: the sentences that best cover the question, each with its marker.

    The passage is the one, among the top three, that holds the best such sentence (its relevance
    plus that sentence's coverage, plus the place of its document in the sources' order), not
    merely the best passage overall. Key terms weigh by their rarity among the passages found,
    since a term every passage shares does not tell sentences apart; a sentence holding what the
    question asks for (an amount, a price, a duration, a date, a phone number, a name) is
    preferred over one that only shares its words. Tables are read row by row with their header,
    so a row can be quoted.
    """
    if not sources:
        return ""
    top = list(sources)[:READ_PASSAGES]
    terms = key_terms(question, idf_from(f"{f.title} {f.text}" for f in sources))
    wanted = asked_type(question)

    def rank(sentence: str) -> float:
        bonus = TYPE_BONUS if wanted is not None and holds_type(wanted, sentence) else 0.0
        return weighted_coverage(terms, sentence) + bonus

    documents = list(dict.fromkeys(f.source_id for f in top))
    candidates = []
    for n, passage in enumerate(top):
        sentences = [s for s in answer_units(passage.text) if not looks_like_instruction(s)]
        if sentences:
            candidates.append((n, sentences, [rank(x) for x in sentences]))
    if not candidates:
        return ""

    def place(n: int) -> float:
        return RANK_BONUS * (len(documents) - documents.index(top[n].source_id))

    best_n, sentences, scores = max(
        candidates, key=lambda c: top[c[0]].score + max(c[2]) + place(c[0])
    )
    ranked = sorted(range(len(sentences)), key=lambda i: scores[i], reverse=True)
    chosen = sorted(i for i in ranked[:max_sentences] if scores[i] > 0) or ranked[:1]
    if wanted is not None and not any(holds_type(wanted, sentences[i]) for i in chosen):
        # a question about a figure whose words meet a sentence without one: quote, beside
        # the best match, the best sentence holding a figure of the kind asked for
        typed = [i for i in ranked if holds_type(wanted, sentences[i]) and scores[i] > 0]
        if typed:  # the best match stays, the figure takes the last place
            best = [i for i in ranked if i in chosen][: max_sentences - 1]
            chosen = sorted({*best, typed[0]})
    return " ".join(attach_markers(sentences[i], f"[{best_n + 1}]") for i in chosen)
