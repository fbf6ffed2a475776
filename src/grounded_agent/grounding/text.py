"""The one lexical layer: tokens, Snowball stems, term rarity and coverage (sentences.py splits
text into sentences).

Relevance, confidence scoring, sentence choice and query rewriting all see words through these
functions, so "monthly" meets "month" the same way everywhere. Stems come from the Snowball
English stemmer (PyStemmer). Term rarity blends the knowledge base's own document frequencies
with general-language word frequencies (wordfreq), so a word that is common in one small,
one-domain knowledge base ("water" for a water utility) still weighs by what it says, and a
term no corpus has seen (a product name) weighs most.
"""

from __future__ import annotations

import functools
import math
import re
import threading
from collections.abc import Callable, Collection, Iterable, Mapping
from importlib.resources import files

# Words: letter runs (with an inner apostrophe) or numbers with inner separators ("12.40",
# "61,200", "24/7" is two numbers). Hyphenated names split ("Acme-Guest" -> "acme", "guest") so
# a question that says "guest" meets them.
_TOKEN = re.compile(r"\d+(?:[.,:]\d+)*|[^\W\d_]+(?:['’][^\W\d_]+)*")
_NUMBER = re.compile(r"^\d[\d.,:]*$")
_VOWEL = re.compile(r"[aeiouy]")


def data_lines(name: str) -> list[str]:
    """A table shipped as package data (data/NAME, which states its source): its entries, one a
    line, without the "#" comment lines."""
    text = files("grounded_agent").joinpath("data", name).read_text(encoding="utf-8")
    return [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]


STOPWORDS = frozenset(data_lines("stopwords.txt"))
"""The one stoplist (data/stopwords.txt, which states its source)."""

QUESTION_LEADS = frozenset({"what", "which", "who", "whom", "whose", "when", "where", "why", "how"})

_local = threading.local()


def _stemmer() -> object:
    """One Snowball stemmer per thread: PyStemmer objects must not be shared between threads."""
    st = getattr(_local, "stemmer", None)
    if st is None:
        import Stemmer

        st = Stemmer.Stemmer("english")
        _local.stemmer = st
    return st


def _norm(raw: str) -> str:
    """One word as every signal sees it: lower-cased, curly apostrophe straightened, a
    possessive "'s" dropped ("Houghton's" meets "Houghton")."""
    tok = raw.lower().replace("’", "'")
    if tok.endswith("'s") and len(tok) > 2:
        tok = tok[:-2]
    return tok.strip("'")


def tokens(text: str) -> list[str]:
    """Lower-cased word and number tokens."""
    return [tok for tok in map(_norm, _TOKEN.findall(text)) if tok]


@functools.lru_cache(maxsize=131072)
def stem(token: str) -> str:
    """Snowball (Porter2) English stem; numbers stay as they are."""
    if _NUMBER.match(token):
        return token
    if len(token) >= 3 and token.endswith("s") and not _VOWEL.search(token[:-1]):
        return token[:-1]  # an acronym's plural ("DVDs", "PDFs"), which Snowball leaves alone
    return str(_stemmer().stemWord(token))  # type: ignore[attr-defined]


def is_content(tok: str) -> bool:
    """A word that carries meaning: not a stop word, not a lone letter."""
    return tok not in STOPWORDS and (len(tok) > 1 or tok.isdigit())


def terms(text: str) -> list[str]:
    """Content terms in order: stems of the words that are not stop words."""
    return [stem(t) for t in tokens(text) if is_content(t)]


@functools.lru_cache(maxsize=8192)
def content_stems(text: str) -> frozenset[str]:
    return frozenset(terms(text))


# --- Term rarity ----------------------------------------------------------------------------

CHUNK_TOKENS = 120
"""Typical chunk length in tokens: turns a word's frequency per token into the chance that a chunk
contains it."""
PRIOR_CHUNKS = 50.0
"""Strength of the general-language prior, in chunks: a knowledge base of 20 chunks is mostly
prior, one of 2,000 mostly its own statistics."""
MIN_CHUNK_PROBABILITY = 2e-5
"""Floor of a word's chance to occur in a chunk: an unknown word weighs ln(1/2e-5) = 10.8."""


@functools.lru_cache(maxsize=65536)
def general_chunk_probability(word: str) -> float:
    """The chance that a chunk of general English text contains `word` (wordfreq's frequency)."""
    if _NUMBER.match(word):
        return MIN_CHUNK_PROBABILITY
    try:
        from wordfreq import word_frequency

        freq = float(word_frequency(word, "en"))
    except Exception:  # no word list: every word counts as rare, the KB statistics still apply
        freq = 0.0
    return min(0.9, max(MIN_CHUNK_PROBABILITY, 1.0 - math.exp(-CHUNK_TOKENS * freq)))


def warm_up() -> None:
    """Loads the stemmer and the word-frequency list (about a second) before any timed work."""
    stem("warming")
    general_chunk_probability("warm")


def rarity(word: str, df: int, n_docs: int) -> float:
    """ln(1/p), p the smoothed chance that a chunk of this knowledge base contains the term:

        p = (df + PRIOR_CHUNKS * p_general) / (n_docs + PRIOR_CHUNKS)

    `word` is the surface form (for the general frequency), `df` the number of chunks of the
    knowledge base holding its stem, `n_docs` their count (0 when there are no statistics).
    """
    p0 = general_chunk_probability(word)
    df = max(0, min(df, n_docs))
    p = (df + PRIOR_CHUNKS * p0) / (max(n_docs, 0) + PRIOR_CHUNKS)
    return max(0.0, -math.log(min(1.0, max(p, 1e-12))))


def surface_forms(text: str) -> dict[str, str]:
    """Each content stem of a text with the commonest-looking surface word it came from."""
    out: dict[str, str] = {}
    for tok in tokens(text):
        if is_content(tok):
            s = stem(tok)
            if s not in out or len(tok) < len(out[s]):
                out[s] = tok
    return out


def term_weights(
    text: str, n_docs: int = 0, dfs: Mapping[str, int] | None = None
) -> dict[str, float]:
    """Rarity weight of each content stem of `text` (a question); KB statistics when given."""
    dfs = dfs or {}
    return {s: rarity(w, dfs.get(s, 0), n_docs) for s, w in surface_forms(text).items()}


# --- Matching -------------------------------------------------------------------------------

PREFIX_CREDIT = 0.5
"""Credit for a stem that only shares a long prefix with a passage stem ("respond"/"respons")."""


@functools.lru_cache(maxsize=16384)
def _prefixes(present: frozenset[str]) -> frozenset[str]:
    return frozenset(p[:k] for p in present if len(p) >= 5 for k in range(5, len(p) + 1))


def match_credit(term: str, present: Collection[str]) -> float:
    """1 for a stem the passage has, PREFIX_CREDIT for a near form (the term without its last two
    letters, at least five, begins a passage stem: "respond" meets "respons"), else 0."""
    if term in present:
        return 1.0
    if len(term) < 5 or _NUMBER.match(term):
        return 0.0
    frozen = present if isinstance(present, frozenset) else frozenset(present)
    return PREFIX_CREDIT if term[: max(5, len(term) - 2)] in _prefixes(frozen) else 0.0


def weighted_coverage(weights: Mapping[str, float], text: str) -> float:
    """Share of the question's term weight that the text contains, in [0, 1]."""
    return stems_coverage(weights, content_stems(text))


def stems_coverage(weights: Mapping[str, float], present: Collection[str]) -> float:
    """`weighted_coverage` over a text's stems computed once."""
    total = sum(weights.values())
    if total <= 0.0:
        return 0.0
    return sum(w * match_credit(t, present) for t, w in weights.items()) / total


def key_terms(question: str, idf: Callable[[str], float] | None = None) -> dict[str, float]:
    """Weighted key content of a question: names and numbers weigh most, then rare terms.

    Without `idf` a plain word's weight comes from its general-language rarity.
    """
    weights: dict[str, float] = {}
    words = _TOKEN.findall(question)
    for i, raw in enumerate(words):
        tok = _norm(raw)
        if not tok or not is_content(tok) or tok in QUESTION_LEADS:
            continue
        key = stem(tok)
        if _NUMBER.match(tok):
            weight = 3.0
        elif raw[:1].isupper() and i > 0:
            weight = 2.5  # a name: capitalised and not the sentence's first word
        elif len(tok) <= 2:
            continue
        else:
            weight = 1.0
        if idf is not None:
            weight *= max(0.3, min(idf(key), 3.0))
        elif weight == 1.0:  # a plain word: as rare as it is in general English
            weight = max(0.3, min(rarity(tok, 0, 0) / 4.0, 1.5))
        weights[key] = max(weights.get(key, 0.0), weight)
    return weights


_CONDITION = re.compile(r"\b(?:if|unless|in case|since|because|as long as)\b[^,;?]*", re.IGNORECASE)


def asked_part(question: str) -> str:
    """The part of a question that asks, without what the user says about their own case.

    "I run a shop in Lyon. Which form do I file?" asks about the form, and "... if my flat is on
    floor 3?" about the rule for floors: the user's own circumstances need not be named in a
    passage that answers."""
    sentences = [s for s in re.split(r"(?<=[.?!])\s+", question.strip()) if s]
    asking = [s for s in sentences if s.rstrip().endswith("?")] or sentences
    return " ".join(_CONDITION.sub(" ", s) for s in asking)


def missing_names(question: str, text: str) -> list[str]:
    """Names and numbers that the question asks about and the text lacks: the sign of a different
    entity (the user's own circumstances are left out: `asked_part`)."""
    present = {stem(t) for t in tokens(text)}
    missing: list[str] = []
    words = _TOKEN.findall(asked_part(question))
    for i, raw in enumerate(words):
        tok = _norm(raw)
        if not tok or not is_content(tok) or tok in QUESTION_LEADS:
            continue
        is_name = raw[:1].isupper() and i > 0 and general_chunk_probability(tok) < 0.05
        if (is_name or _NUMBER.match(tok)) and stem(tok) not in present:
            missing.append(raw)
    return missing


def idf_from(texts: Iterable[str]) -> Callable[[str], float]:
    """Rarity of a stem among a small set of passages: a term every passage shares does not tell
    their sentences apart."""
    docs = [content_stems(t) for t in texts]
    n = max(len(docs), 1)

    def idf(term: str) -> float:
        df = sum(1 for d in docs if term in d)
        return math.log((n + 1) / (df + 0.5))

    return idf
