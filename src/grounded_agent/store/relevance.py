"""Calibrated relevance: one [0, 1] scale for every source (by default >= 0.75 answers, < 0.55 does not: Context decides)."""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from typing import Protocol

from langchain_core.embeddings import Embeddings

from grounded_agent.grounding.sentences import split_sentences
from grounded_agent.grounding.text import (
    content_stems,
    stems_coverage,
    term_weights,
    terms,
    weighted_coverage,
)

log = logging.getLogger(__name__)

# --- Calibration --------------------------------------------------------------------------------
# Fitted by benchmarks/calibrate_relevance.py (see CalibratedRelevance for the data and split).
FEATURE_NAMES = ("cosine", "coverage", "sentence_coverage", "rare_missing")
COEFFICIENTS = (11.095, -2.741, 3.634, -0.678, -4.076)
"""One weight per feature, then the intercept."""
RANK_COEFFICIENTS = (21.826, 3.288, 5.178, -2.866)
"""The order among one question's candidates (a pairwise model: only differences count)."""

RARE_WEIGHT = 6.0
"""A term this rare (in under about 1 of 400 chunks) names something: a name, a code, a number."""


def features(weights: Mapping[str, float], passage: str, cosine: float) -> list[float]:
    """What the calibrated score looks at: meaning (cosine of the embeddings), how much of the
    question's term weight the passage holds, how much one sentence of it holds, and which share
    of the question's rare terms (names, codes, numbers) it lacks: a passage about something
    else with the same words lacks exactly those."""
    present = content_stems(passage)
    cov = stems_coverage(weights, present)
    sent = 0.0
    if cov > 0.0:
        sent = max((weighted_coverage(weights, x) for x in split_sentences(passage)), default=0.0)
    rare = {t: w for t, w in weights.items() if w >= RARE_WEIGHT}
    missing = 1.0 - stems_coverage(rare, present) if rare else 0.0
    return [float(cosine), cov, sent, missing]


def calibrated_from(feats: Sequence[float]) -> float:
    """The logistic model: P(passage answers | features)."""
    z = COEFFICIENTS[-1] + sum(c * f for c, f in zip(COEFFICIENTS[:-1], feats, strict=True))
    if z >= 0:
        return 1.0 / (1.0 + math.exp(-z))
    e = math.exp(z)
    return e / (1.0 + e)


def rank_score(feats: Sequence[float]) -> float:
    """Which of one question's candidates answers it best (a comparison, not a probability)."""
    return sum(c * f for c, f in zip(RANK_COEFFICIENTS, feats, strict=True))


def calibrated(cosine: float, sentence_cov: float, rare_missing: float = 0.0) -> float:
    """`calibrated_from` for callers holding the features apart."""
    return calibrated_from([cosine, sentence_cov, sentence_cov, rare_missing])


class TermStats(Protocol):
    """Document frequencies of the knowledge base: (number of chunks, df of each asked term)."""

    def document_frequencies(self, terms: Collection[str]) -> tuple[int, dict[str, int]]: ...

    def adocument_frequencies(
        self, terms: Collection[str]
    ) -> Awaitable[tuple[int, dict[str, int]]]: ...


def cosine_similarities(query: Sequence[float], passages: Sequence[Sequence[float]]) -> list[float]:
    """Cosine of the query vector with each passage vector (vectors need not be normalised)."""
    qn = math.sqrt(sum(x * x for x in query)) or 1.0
    out: list[float] = []
    for vec in passages:
        pn = math.sqrt(sum(x * x for x in vec)) or 1.0
        out.append(sum(a * b for a, b in zip(query, vec, strict=True)) / (qn * pn))
    return out


class CalibratedRelevance:
    """Relevance in [0, 1] that means the same on any knowledge base, and the order of passages.

    Why: raw all-MiniLM-L6-v2 cosine has no fixed meaning for the graph's thresholds, and term
    overlap alone turns away a question asked in other words than the document's ("monthly" vs
    "per month", "cost" vs "price"). The score is a logistic model

        p = sigmoid(COEFFICIENTS . features + intercept)

    over `features`: cosine of the question with title + heading path + text; the share of the
    question's term weight in the passage and in its best sentence (rarity blends the KB's own
    statistics with general English, so a one-domain KB's common words keep a weight); and the
    share of the question's rare terms (names, codes) the passage lacks. Coverage and sentence
    coverage move together: their net weight is positive.

    Fit (benchmarks/calibrate_relevance.py, seed 0): positives are answerable questions with
    the gold chunk, negatives questions of another knowledge base (out-of-KB) with their
    best-ranked chunk; SQuAD and swapped SQuAD split by article (train 70%), plus three of the
    project's one-domain KBs; every KB weighs the same. Judged on what it was not fitted on
    (held-out SQuAD articles, and two further KBs, tallyhub_support and lindenpark_clinic):
    answerable best score >= 0.75 for 57-86%, < 0.55 for 4-23%; out-of-KB < 0.55 for 81-88% on
    SQuAD, 100% on the small KBs. A near-miss (on the KB's topic, answer absent) scores like an
    answerable question: telling those apart is the confidence step's job, not relevance's.

    The order among one question's candidates comes from a second, pairwise model over the same
    features (`rank_score`, RANK_COEFFICIENTS), which weighs the words more: held-out gold top-1
    0.865 on SQuAD and 0.77-0.83 on the two held-out KBs, against 0.70-0.77 by relevance.

    `score(query, texts)` embeds passages itself, so Wikipedia or web passages are scored on the
    same scale as knowledge-base chunks; without KB statistics rarity is general English alone.
    """

    def __init__(
        self,
        embeddings: Embeddings | Callable[[], Embeddings],
        stats: TermStats | None = None,
    ) -> None:
        self._embeddings = embeddings
        self._stats = stats

    @property
    def embeddings(self) -> Embeddings:
        emb = self._embeddings
        return emb if isinstance(emb, Embeddings) else emb()

    def term_weights(self, query: str) -> dict[str, float]:
        """Rarity of each query term: the knowledge base's statistics blended with general
        English; general English alone without statistics (a source outside the KB, or the
        statistics unreachable)."""
        if not terms(query) or self._stats is None:
            return term_weights(query)
        try:
            n_docs, dfs = self._stats.document_frequencies(set(terms(query)))
        except Exception as exc:  # statistics are an aid: general-language rarity instead
            log.warning("term statistics unavailable (%s); using general word rarity",
                        type(exc).__name__)
            return term_weights(query)
        return term_weights(query, n_docs, dfs)

    async def aterm_weights(self, query: str) -> dict[str, float]:
        if not terms(query) or self._stats is None:
            return term_weights(query)
        try:
            n_docs, dfs = await self._stats.adocument_frequencies(set(terms(query)))
        except Exception as exc:  # statistics are an aid: general-language rarity instead
            log.warning("term statistics unavailable (%s); using general word rarity",
                        type(exc).__name__)
            return term_weights(query)
        return term_weights(query, n_docs, dfs)

    @staticmethod
    def score_with(
        weights: Mapping[str, float], texts: Sequence[str], cosine: Sequence[float]
    ) -> list[float]:
        """Scores passages given the query's term weights and their cosine similarities."""
        return [calibrated_from(f) for f in CalibratedRelevance.features_of(weights, texts, cosine)]

    @staticmethod
    def features_of(
        weights: Mapping[str, float], texts: Sequence[str], cosine: Sequence[float]
    ) -> list[list[float]]:
        if len(texts) != len(cosine):
            raise ValueError("texts and cosine must have the same length")
        return [features(weights, t, float(c)) for t, c in zip(texts, cosine, strict=True)]

    @staticmethod
    def rank(
        weights: Mapping[str, float], texts: Sequence[str], cosine: Sequence[float]
    ) -> list[tuple[int, float]]:
        """(index, relevance) of each passage, best answer first."""
        feats = CalibratedRelevance.features_of(weights, texts, cosine)
        order = sorted(range(len(feats)), key=lambda i: (rank_score(feats[i]), cosine[i]),
                       reverse=True)
        return [(i, calibrated_from(feats[i])) for i in order]

    async def arank(self, query: str, texts: Sequence[str]) -> list[tuple[int, float]]:
        """`rank` for passages read from elsewhere (a user's source): they are embedded here, in
        a worker thread, and the query's term weights read as `aterm_weights` reads them."""
        if not texts:
            return []
        weights = await self.aterm_weights(query)
        cos = await asyncio.to_thread(self._cosines, query, texts)
        return self.rank(weights, texts, cos)

    def _cosines(self, query: str, texts: Sequence[str]) -> list[float]:
        emb = self.embeddings
        return cosine_similarities(emb.embed_query(query), emb.embed_documents(list(texts)))

    def score(
        self, query: str, texts: Sequence[str], cosine: Sequence[float] | None = None
    ) -> list[float]:
        """RelevanceScorer: calibrated relevance of each passage to the query (blocking)."""
        if not texts:
            return []
        cos = list(cosine) if cosine is not None else self._cosines(query, texts)
        return self.score_with(self.term_weights(query), texts, cos)

    async def ascore(
        self, query: str, texts: Sequence[str], cosine: Sequence[float] | None = None
    ) -> list[float]:
        """`score` for async callers: embedding runs in a worker thread."""
        if not texts:
            return []
        if cosine is not None:
            cos = list(cosine)
        else:
            cos = await asyncio.to_thread(self._cosines, query, texts)
        return self.score_with(await self.aterm_weights(query), texts, cos)
