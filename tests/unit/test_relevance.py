"""The calibrated relevance model: terms, IDF coverage and the logistic score."""

from __future__ import annotations

from collections.abc import Collection

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

from grounded_agent.grounding.text import rarity, weighted_coverage
from grounded_agent.store.relevance import CalibratedRelevance, calibrated, terms
from grounded_agent.tools.base import RelevanceScorer


def test_terms_drop_stopwords_and_stem() -> None:
    assert terms("What are the prices of the Pro plans?") == ["price", "pro", "plan"]
    assert terms("Bluefin Health's contract") == ["bluefin", "health", "contract"]
    assert terms("monthly") == terms("month")  # the everyday word meets the document's


def test_unknown_terms_weigh_most() -> None:
    assert rarity("zyxplan", 0, 30) > rarity("plan", 1, 30) > rarity("plan", 20, 30)
    assert rarity("plan", 20, 30) >= 0.0
    # an unknown name weighs about the same in a small and a large knowledge base
    assert abs(rarity("zyxplan", 0, 30) - rarity("zyxplan", 0, 1204)) < 3.0


def test_a_domain_word_keeps_weight_in_a_one_domain_kb() -> None:
    # "water" is in 15 of 22 chunks of a water utility's KB: it still weighs something, and a
    # general word everyone uses weighs less than a specific one in the same situation
    assert rarity("water", 15, 22) > 0.5
    assert rarity("the", 0, 22) < rarity("hardness", 0, 22)


def test_coverage_weights_rare_terms() -> None:
    weights = {"contoso": 7.0, "contract": 1.0, "fee": 1.0}
    assert weighted_coverage(
        weights, "The Northwind contract fee is 61,200 euros."
    ) == pytest.approx(2 / 9)
    assert weighted_coverage(weights, "Contoso pays a fee under its contract.") == 1.0
    assert weighted_coverage({}, "anything") == 0.0


def test_score_is_monotone_and_on_the_graph_scale() -> None:
    assert calibrated(0.75, 1.0) >= 0.75  # a close passage with every rare term answers
    assert calibrated(0.15, 0.05) < 0.55  # an off-topic passage does not
    assert calibrated(0.6, 0.5) < calibrated(0.7, 0.5) < calibrated(0.7, 0.8)
    assert 0.0 <= calibrated(-1.0, 0.0) < calibrated(1.0, 1.0) <= 1.0


class _Stats:
    def __init__(self, n: int, dfs: dict[str, int]) -> None:
        self.n, self.dfs = n, dfs

    def document_frequencies(self, wanted: Collection[str]) -> tuple[int, dict[str, int]]:
        return self.n, {t: self.dfs[t] for t in wanted if t in self.dfs}

    async def adocument_frequencies(self, wanted: Collection[str]) -> tuple[int, dict[str, int]]:
        return self.document_frequencies(wanted)


class _Broken(_Stats):
    def document_frequencies(self, wanted: Collection[str]) -> tuple[int, dict[str, int]]:
        raise ConnectionError("down")


def test_scorer_embeds_passages_itself_and_follows_the_protocol() -> None:
    scorer = CalibratedRelevance(DeterministicFakeEmbedding(size=32), _Stats(100, {"plan": 40}))
    as_protocol: RelevanceScorer = scorer
    texts = ["The Pro plan costs 29 euros.", "Nitrogen boils at 77 K."]
    scores = as_protocol.score("Pro plan price", texts)
    assert len(scores) == 2 and all(0.0 <= s <= 1.0 for s in scores)
    given = scorer.score("Pro plan price", texts, cosine=[0.8, 0.8])
    assert given[0] > given[1]
    assert scorer.score("anything", []) == []


def test_scorer_falls_back_to_general_word_rarity() -> None:
    scorer = CalibratedRelevance(DeterministicFakeEmbedding(size=8), _Broken(0, {}))
    weights = scorer.term_weights("Lumenary plan price")
    assert set(weights) == {"lumenari", "plan", "price"}
    assert weights["lumenari"] > weights["plan"] > 0.0  # an unknown name weighs most


async def test_async_scoring_matches_sync() -> None:
    scorer = CalibratedRelevance(DeterministicFakeEmbedding(size=16), _Stats(10, {"plan": 5}))
    texts = ["The Pro plan costs 29 euros."]
    assert await scorer.ascore("Pro plan", texts, cosine=[0.5]) == scorer.score(
        "Pro plan", texts, cosine=[0.5]
    )
