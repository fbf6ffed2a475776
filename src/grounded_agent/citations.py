"""Code, not prompts, decides what an answer may cite and which sentences survive."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from grounded_agent.schemas import Citation, Finding
from grounded_agent.text import (
    coverage,
    idf_from,
    key_terms,
    looks_like_instruction,
    split_sentences,
    support,
)

MARKER = re.compile(r"\[(\d{1,3})\]")
URL = re.compile(r"(?:https?://|www\.)[^\s)\]>\"']+", re.IGNORECASE)
SUPPORT_MIN = 0.6
"""Share of a sentence's content words its cited passages must contain for it to stay."""


@dataclass
class Checked:
    """An answer after the citation check: kept text, citations in order, and what was dropped."""

    text: str
    citations: list[Citation]
    removed_markers: list[str] = field(default_factory=list)
    unsupported: list[str] = field(default_factory=list)
    removed_urls: list[str] = field(default_factory=list)


def check_answer(draft: str, sources: Sequence[Finding]) -> Checked:
    """Keeps only sentences whose markers resolve to sources in state and whose text they support.

    Markers are renumbered in order of first use, so citations read [1], [2], ... .
    """
    allowed_urls = {s.url for s in sources if s.url}
    removed_urls: list[str] = []

    def strip_url(match: re.Match[str]) -> str:
        url = match.group(0).rstrip(".,;")
        if url in allowed_urls:
            return match.group(0)
        removed_urls.append(url)
        return ""

    kept: list[tuple[str, list[int]]] = []
    removed_markers: list[str] = []
    unsupported: list[str] = []
    for sentence in split_sentences(URL.sub(strip_url, draft)):
        numbers = [int(n) for n in MARKER.findall(sentence)]
        valid = [n for n in dict.fromkeys(numbers) if 1 <= n <= len(sources)]
        removed_markers += [f"[{n}]" for n in numbers if not 1 <= n <= len(sources)]
        bare = " ".join(MARKER.sub("", sentence).split())
        bare = re.sub(r"\s+([.,;:!?])", r"\1", bare)
        if not bare.strip(" .,;:"):
            continue
        if not valid or looks_like_instruction(bare):
            unsupported.append(bare)
            continue
        cited_text = "\n".join(f"{sources[n - 1].title}\n{sources[n - 1].text}" for n in valid)
        if support(bare, cited_text) < SUPPORT_MIN:
            unsupported.append(bare)
            continue
        kept.append((bare, valid))

    order: dict[int, int] = {}
    for _, valid in kept:
        for n in valid:
            order.setdefault(n, len(order) + 1)
    parts = []
    for bare, valid in kept:
        marks = "".join(f"[{order[n]}]" for n in valid)
        parts.append(_attach(bare, marks))
    citations = [
        Citation(
            n=new,
            source=sources[old - 1].source,
            source_id=sources[old - 1].source_id,
            title=sources[old - 1].title,
            section=sources[old - 1].section,
            version=sources[old - 1].version,
            url=sources[old - 1].url,
            document_date=sources[old - 1].document_date,
            indexed_at=sources[old - 1].indexed_at,
            score=round(sources[old - 1].score, 4),
        )
        for old, new in order.items()
    ]
    return Checked(" ".join(parts), citations, removed_markers, unsupported, removed_urls)


def _attach(sentence: str, marks: str) -> str:
    """Puts markers before the sentence's final punctuation: "... 49 EUR [1]."."""
    if sentence and sentence[-1] in ".!?":
        return f"{sentence[:-1]} {marks}{sentence[-1]}"
    return f"{sentence} {marks}"


_WANTS_NUMBER = re.compile(
    r"\b(how (many|much|long|old|far|large|big|tall|high|often|fast)|what (year|percentage|percent"
    r"|number|amount|date|age|size)|when|in what year)\b",
    re.IGNORECASE,
)
_DIGIT = re.compile(r"\d")
NUMBER_BONUS = 0.3
"""Added to a sentence's coverage when the question asks for a quantity or date and it has a digit."""


def extractive_draft(question: str, sources: Sequence[Finding], max_sentences: int = 2) -> str:
    """Offline answer: the sentences that best cover the question, each with its marker.

    The passage is the one, among the top three, that holds the best such sentence (its relevance
    plus that sentence's coverage), not merely the best passage overall. Key terms weigh by their
    rarity among the passages found, since a term every passage shares does not tell sentences
    apart; a question asking for a quantity or a date prefers sentences with a number.
    """
    if not sources:
        return ""
    top = list(sources)[:3]
    terms = key_terms(question, idf_from(f"{f.title} {f.text}" for f in sources))
    wants_number = bool(_WANTS_NUMBER.search(question))

    def rank(sentence: str) -> float:
        bonus = NUMBER_BONUS if wants_number and _DIGIT.search(sentence) else 0.0
        return coverage(terms, sentence) + bonus

    candidates = []
    for n, passage in enumerate(top):
        sentences = [s for s in split_sentences(passage.text) if not looks_like_instruction(s)]
        if sentences:
            candidates.append((n, sentences, [rank(x) for x in sentences]))
    if not candidates:
        return ""
    best_n, sentences, scores = max(candidates, key=lambda c: top[c[0]].score + max(c[2]))
    ranked = sorted(range(len(sentences)), key=lambda i: scores[i], reverse=True)
    chosen = sorted(i for i in ranked[:max_sentences] if scores[i] > 0) or ranked[:1]
    return " ".join(_attach(sentences[i], f"[{best_n + 1}]") for i in chosen)
