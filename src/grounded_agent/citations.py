"""Code, not prompts, decides what an answer may cite and which sentences survive."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from grounded_agent.schemas import Citation, Finding
from grounded_agent.text import looks_like_instruction, split_sentences, support

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
        parts.append(attach_markers(bare, marks))
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


def attach_markers(sentence: str, marks: str) -> str:
    """Puts markers before the sentence's final punctuation: "... 49 EUR [1]."."""
    if sentence and sentence[-1] in ".!?":
        return f"{sentence[:-1]} {marks}{sentence[-1]}"
    return f"{sentence} {marks}"
