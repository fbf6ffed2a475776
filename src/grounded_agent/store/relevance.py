"""Calibrated relevance: one [0, 1] scale for every source (>= 0.75 answers, < 0.55 does not)."""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping, Sequence
from typing import Protocol

from langchain_core.embeddings import Embeddings

from grounded_agent.text import rarity, term_weights, terms, weighted_coverage

log = logging.getLogger(__name__)

UNKNOWN_TERM_N_FLOOR = 0
"""Kept for callers of the old API; rarity now comes from `grounded_agent.text.rarity`."""


def idf_weight(df: int, n_docs: int, word: str = "") -> float:
    """Rarity of a term in a knowledge base of `n_docs` chunks, `df` of which hold it."""
    return rarity(word, df, n_docs)


def coverage(query_terms: Iterable[str], passage: str, weights: Mapping[str, float]) -> float:
    """Share of the query's rarity weight whose terms occur in the passage, in [0, 1]."""
    uniq = set(query_terms)
    return weighted_coverage({t: weights.get(t, 0.0) for t in uniq}, passage)


# --- Calibration --------------------------------------------------------------------------------
# Fitted by benchmarks/calibrate_relevance.py on ../shared/eval/squad (see CalibratedRelevance).
COEF_COSINE = 7.309
COEF_COVERAGE = 9.312
INTERCEPT = -7.253


def calibrated(cosine: float, cov: float) -> float:
    """The logistic model: P(passage answers | cosine, IDF-weighted coverage)."""
    z = COEF_COSINE * cosine + COEF_COVERAGE * cov + INTERCEPT
    if z >= 0:
        return 1.0 / (1.0 + math.exp(-z))
    e = math.exp(z)
    return e / (1.0 + e)


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
    """Relevance in [0, 1] from a logistic model over cosine and IDF-weighted term coverage.

    Why: raw all-MiniLM-L6-v2 cosine does not separate answerable from off-topic questions
    well (top-1 medians 0.61 vs 0.35 on SQuAD, wide overlap), and its scale means nothing for the
    graph's thresholds. Whether the passage contains the question's *rare* terms separates them
    much better, so the score is

        p = sigmoid(COEF_COSINE * cosine + COEF_COVERAGE * coverage + INTERCEPT)

    where coverage = sum of IDF over the question's content terms found in the passage divided by
    the sum over all of them. IDF comes from the knowledge base's own chunk statistics (a
    `<table>_terms` table maintained at ingestion); a term the corpus never saw gets the highest
    IDF, ln(2(max(N, 1204)+1)), so an unknown name in the question must appear in the passage. Without
    statistics (store unreachable) every term weighs the same.

    Fit (benchmarks/calibrate_relevance.py, seed 0): 1,500 answerable SQuAD questions paired
    with their gold paragraph (label 1) and 1,500 out_of_kb questions paired with their top
    retrieved paragraph (label 0), 70/30 split: held-out accuracy 0.947 at p = 0.5 (cosine
    alone: 0.852). Taking the best calibrated score over the top 20 candidates (as
    `KnowledgeStore.asearch` does), held-out answerable questions score >= 0.75 in 91% of cases
    (median 0.99) and out_of_kb questions score < 0.55 in 89% (median 0.06). SQuAD's adversarial
    unanswerable questions, which reuse their paragraph's words, mostly score high (81% >= 0.75):
    telling those apart is the confidence step's job, not retrieval's.

    `score(query, texts)` embeds passages itself, so Wikipedia or web passages are scored on the
    same scale as knowledge-base chunks.
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
        if len(texts) != len(cosine):
            raise ValueError("texts and cosine must have the same length")
        return [
            calibrated(float(c), weighted_coverage(weights, t))
            for t, c in zip(texts, cosine, strict=True)
        ]

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
