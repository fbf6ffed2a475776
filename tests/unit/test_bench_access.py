"""The access benchmark's own arithmetic: its data, its queries and its recall (the numbers it
prints are only as good as these)."""

from __future__ import annotations

import numpy as np

from tests.support.benchmarks import load_benchmark

BENCH = load_benchmark("bench_access")


def test_every_group_holds_the_same_number_of_chunks_in_both_layouts() -> None:
    data = BENCH.make_data(4, 500, np.random.default_rng(0))
    assert data.x.shape == (2000, BENCH.DIM)
    assert np.allclose(np.linalg.norm(data.x, axis=1), 1.0, atol=1e-5)
    for layout in (data.correlated, data.uncorrelated):
        assert np.bincount(layout).tolist() == [500] * 4
    # correlated: a chunk comes from a cluster its own group owns; uncorrelated: not so
    assert (data.cluster_group[data.cluster] == data.correlated).all()
    assert (data.cluster_group[data.cluster] == data.uncorrelated).mean() < 0.5


def test_queries_come_from_the_principals_topics_or_from_the_others() -> None:
    data = BENCH.make_data(4, 500, np.random.default_rng(0))
    rng = np.random.default_rng(1)
    own = BENCH.query_clusters(data, (1,), "own", 100, rng)
    other = BENCH.query_clusters(data, (1,), "other", 100, rng)
    assert (data.cluster_group[own] == 1).all()
    assert (data.cluster_group[other] != 1).all()
    queries = data.draw(own, rng)
    # a query drawn from a cluster lies nearest to chunks of that cluster
    nearest = np.argmax(queries @ data.x.T, axis=1)
    assert (data.cluster[nearest] == own).mean() > 0.9


def test_exact_top_ranks_only_visible_rows_nearest_first() -> None:
    x = BENCH.unit(np.array([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.8, 0.3]]))
    visible = np.array([False, True, True, True])
    top, cos = BENCH.exact_top(x, visible, BENCH.unit(np.array([[1.0, 0.0]])), 2)
    assert top.tolist() == [[1, 3]]
    assert cos.shape == (1, 3) and cos[0, 0] > cos[0, 1] > cos[0, 2]


def test_recall_counts_missing_rows_of_a_short_answer_as_misses() -> None:
    truth = [[1, 2, 3, 4], [5, 6, 7, 8]]
    assert BENCH.recall([[4, 3, 2, 1], [5, 6, 7, 8]], truth, k=4) == 1.0
    assert BENCH.recall([[1, 2], [5, 6, 7, 9]], truth, k=4) == (0.5 + 0.75) / 2


def test_the_copy_rows_have_three_fields_and_the_binary_trailer() -> None:
    x = np.zeros((3, 4), np.float32)
    data = BENCH.copy_binary(x, np.array([0, 1, 2]))
    assert data.startswith(b"PGCOPY\n\xff\r\n\x00") and data.endswith(b"\xff\xff")
    assert len(data) == 19 + 3 * (2 + 8 + 8 + 4 + 4 + 4 * 4) + 2


def test_the_cosine_loss_is_zero_for_the_truth_and_positive_for_farther_rows() -> None:
    x = BENCH.unit(np.array([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0]]))
    q = BENCH.unit(np.array([[1.0, 0.0]]))
    top, cos = BENCH.exact_top(x, np.ones(3, dtype=bool), q, 2)
    assert abs(BENCH.cos_loss(x, q, top.tolist(), cos[:, :2])) < 1e-6
    assert BENCH.cos_loss(x, q, [[0, 2]], cos[:, :2]) > 0.4
    assert np.isnan(BENCH.cos_loss(x, q, [[0]], cos[:, :2]))  # a short answer has no loss
