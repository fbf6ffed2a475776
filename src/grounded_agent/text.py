"""Lexical signals the agent trusts without a model: key terms, coverage, sentence support."""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Iterable

_TOKEN = re.compile(
    r"[A-Za-z0-9\u00C0-\u024F][A-Za-z0-9\u00C0-\u024F'\-\.]*[A-Za-z0-9\u00C0-\u024F]|[A-Za-z0-9\u00C0-\u024F]"
)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[]?[A-Z0-9])")
_NUMBER = re.compile(r"^\d[\d.,]*$")

STOPWORDS = frozenset(
    ["a", "about", "above", "after", "again", "against", "all", "also", "am", "an", "and", "any", "are", "as", "at", "be", "because", "been", "before", "being", "below", "between", "both", "but", "by", "can", "could", "did", "do", "does", "doing", "down", "during", "each", "few", "for", "from", "further", "had", "has", "have", "having", "he", "her", "here", "hers", "herself", "him", "himself", "his", "how", "i", "if", "in", "into", "is", "it", "its", "itself", "just", "me", "more", "most", "my", "myself", "no", "nor", "not", "now", "of", "off", "on", "once", "only", "or", "other", "our", "ours", "ourselves", "out", "over", "own", "same", "she", "should", "so", "some", "such", "than", "that", "the", "their", "theirs", "them", "themselves", "then", "there", "these", "they", "this", "those", "through", "to", "too", "under", "until", "up", "very", "was", "we", "were", "what", "when", "where", "which", "while", "who", "whom", "why", "will", "with", "would", "you", "your", "yours", "yourself", "yourselves", "whose", "many", "much", "one", "two", "first", "name", "named", "called", "kind", "type", "use", "used", "according", "per", "via", "tell", "please", "give", "list", "show", "find", "describe", "explain", "say", "says", "said", "many", "does", "did", "get", "got"]
)

_QUESTION_LEADS = frozenset(
    {"what", "which", "who", "whom", "whose", "when", "where", "why", "how"}
)


def _norm(raw: str) -> str:
    """One word as every signal sees it: lower-cased, a possessive "'s" dropped."""
    tok = raw.strip(".-'").lower()
    if tok.endswith("'s") and len(tok) > 2:
        tok = tok[:-2]
    return tok


def tokens(text: str) -> list[str]:
    """Lower-cased word tokens; "Houghton's" meets "Houghton"."""
    return [tok for tok in map(_norm, _TOKEN.findall(text)) if tok]


@functools.lru_cache(maxsize=65536)
def stem(token: str) -> str:
    """A light suffix strip so "prices" meets "price" and "renewed" meets "renewal"."""
    for suffix in (
        "ations",
        "ation",
        "ments",
        "ment",
        "ings",
        "ing",
        "ies",
        "ied",
        "es",
        "ed",
        "s",
    ):
        if len(token) > len(suffix) + 3 and token.endswith(suffix):
            return token[: -len(suffix)]
    return token


def content_stems(text: str) -> set[str]:
    return {stem(t) for t in tokens(text) if t not in STOPWORDS}


def key_terms(question: str, idf: Callable[[str], float] | None = None) -> dict[str, float]:
    """Weighted key content of a question: names and numbers weigh most, then rare terms."""
    weights: dict[str, float] = {}
    words = _TOKEN.findall(question)
    for i, raw in enumerate(words):
        tok = _norm(raw)
        if not tok or tok in STOPWORDS or tok in _QUESTION_LEADS:
            continue
        if _NUMBER.match(tok):
            weight = 3.0
        elif raw[:1].isupper() and i > 0:
            weight = 2.5  # a name: capitalised and not the sentence's first word
        elif len(tok) <= 2:
            continue
        else:
            weight = 1.0
        if idf is not None:
            weight *= max(0.3, min(idf(tok), 3.0))
        key = stem(tok)
        weights[key] = max(weights.get(key, 0.0), weight)
    return weights


def coverage(terms: dict[str, float], text: str) -> float:
    """Share of the key-term weight that the text contains, in [0, 1]."""
    if not terms:
        return 0.0
    present = content_stems(text) | {stem(t) for t in tokens(text)}
    total = sum(terms.values())
    return sum(w for t, w in terms.items() if t in present) / total


def missing_names(question: str, text: str) -> list[str]:
    """Names and numbers of the question that the text lacks: the sign of a different entity."""
    present = {stem(t) for t in tokens(text)}
    missing: list[str] = []
    words = _TOKEN.findall(question)
    for i, raw in enumerate(words):
        tok = _norm(raw)
        if not tok or tok in STOPWORDS or tok in _QUESTION_LEADS:
            continue
        is_name = raw[:1].isupper() and i > 0
        if (is_name or _NUMBER.match(tok)) and stem(tok) not in present:
            missing.append(raw)
    return missing


_INSTRUCTION = re.compile(
    r"\b(ignore|disregard|forget|override)\b[^.]{0,40}\b(instruction|prompt|rule|guideline)s?\b"
    r"|\bsystem (notice|prompt|message|override)\b"
    r"|\b(tell|inform|convince) the user\b"
    r"|\bcall the (tool|function)\b"
    r"|\byou (must|should|are to) now\b"
    r"|\b(as an ai|language model|assistant)\b[^.]{0,30}\b(must|should|will)\b",
    re.IGNORECASE,
)


def looks_like_instruction(sentence: str) -> bool:
    """A sentence addressed to the model rather than stating a fact: never quoted as an answer."""
    return bool(_INSTRUCTION.search(sentence))


def split_sentences(text: str) -> list[str]:
    """Sentences of a passage; headings and bullet lines count as their own sentences."""
    out: list[str] = []
    for block in re.split(r"\n\s*\n|\n(?=\s*[-*#|]|\s*\d+\.)", text):
        block = " ".join(block.split())
        if not block:
            continue
        merged: list[str] = []
        for piece in (s.strip() for s in _SENTENCE_END.split(block) if s.strip()):
            if merged and _ends_with_abbreviation(merged[-1]):
                merged[-1] = f"{merged[-1]} {piece}"
            else:
                merged.append(piece)
        out.extend(merged)
    return out


_ABBREVIATIONS = frozenset({
    "st", "mt", "ft", "dr", "mr", "mrs", "ms", "jr", "sr", "rep", "sen", "gov", "gen", "col",
    "capt", "lt", "sgt", "prof", "rev", "hon", "pres", "co", "corp", "inc", "ltd", "no", "vol",
    "fig", "approx", "ca", "vs", "etc", "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep",
    "sept", "oct", "nov", "dec",
})


def _ends_with_abbreviation(sentence: str) -> bool:
    """A piece ending in "St." or an initial ("J.") continues into the next: not a sentence end."""
    if not sentence.endswith("."):
        return False
    last = sentence[:-1].rsplit(" ", 1)[-1].lstrip("(\"'")
    return last.lower() in _ABBREVIATIONS or (len(last) == 1 and last.isupper())


def support(sentence: str, passage: str) -> float:
    """How much of a sentence's content the passage contains, in [0, 1].

    Numbers must appear verbatim: a sentence that changes a figure is not supported.
    """
    sent = content_stems(sentence)
    if not sent:
        return 1.0
    passage_stems = content_stems(passage) | {stem(t) for t in tokens(passage)}
    numbers = {t for t in tokens(sentence) if _NUMBER.match(t)}
    if numbers and not numbers <= {t for t in tokens(passage)}:
        return 0.0
    return len(sent & passage_stems) / len(sent)


def idf_from(texts: Iterable[str]) -> Callable[[str], float]:
    """A smoothed IDF over a small set of passages, for sources without corpus statistics."""
    docs = [set(tokens(t)) for t in texts]
    n = max(len(docs), 1)

    def idf(term: str) -> float:
        df = sum(1 for d in docs if term in d)
        return math.log((n + 1) / (df + 0.5))

    return idf
