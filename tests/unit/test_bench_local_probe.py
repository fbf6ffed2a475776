"""benchmarks/bench_local_probe.py: the yes/no direction it compares against is the judge's own
score, and its read-out and AUC are what they claim."""

from __future__ import annotations

import numpy as np
import pytest

from tests.support.benchmarks import load_benchmark

BENCH = load_benchmark("bench_local_probe")


def test_direction_is_the_judges_log_odds() -> None:
    rng = np.random.default_rng(1)
    h = rng.normal(size=(4, 8))
    vocab = rng.normal(size=(10, 8))
    yes_ids, no_ids = [2, 5], [7]
    logits = h @ vocab.T
    p = np.exp(logits - logits.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    judge = p[:, yes_ids].sum(1) / (p[:, yes_ids].sum(1) + p[:, no_ids].sum(1))
    got = BENCH.direction_score(h, vocab[yes_ids], vocab[no_ids])
    assert got == pytest.approx(np.log(judge / (1 - judge)))


def test_auc_counts_ties_half_and_orders() -> None:
    y = np.array([1, 1, 0, 0])
    assert BENCH.auc(np.array([0.9, 0.8, 0.1, 0.2]), y) == 1.0
    assert BENCH.auc(np.array([0.1, 0.2, 0.9, 0.8]), y) == 0.0
    assert BENCH.auc(np.array([0.5, 0.5, 0.5, 0.5]), y) == 0.5


def test_read_out_learns_a_separable_direction_and_l2_shrinks_it() -> None:
    rng = np.random.default_rng(2)
    x = rng.normal(size=(200, 5))
    y = (x[:, 3] > 0).astype(float)
    w = BENCH.fit(x, y, l2=0.01)
    assert abs(w[3]) == max(abs(w[:-1]))
    assert BENCH.auc(x @ w[:-1], y) > 0.99
    assert abs(BENCH.fit(x, y, l2=1.0)[3]) < abs(w[3])


def test_auc_difference_is_paired_and_signed() -> None:
    rng = np.random.default_rng(3)
    y = np.r_[np.ones(60), np.zeros(60)]
    noise = rng.normal(size=120)
    better, worse = y + 0.3 * noise, y + 3.0 * noise
    lo, hi = BENCH.auc_difference(better, worse, y)
    assert 0 < lo <= hi
    assert BENCH.auc_difference(worse, better, y)[1] < 0
    assert BENCH.auc_difference(worse, worse, y) == (0.0, 0.0)
