"""benchmarks/bench_gate_ceiling.py: its ceiling never breaks the limits it reports against, and
its arithmetic (credit, shares, the AUC a target needs) is the evaluation's."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.benchmarks import load_benchmark

BENCH = load_benchmark("bench_gate_ceiling")


def row(kind: str, right: bool, signal: float, answers: bool = True) -> dict[str, Any]:
    x = [signal] + [0.0] * (len(BENCH.FEATURES) - 1)
    return {"set": "s", "kind": kind, "answers": answers, "right": right, "x": x}


def test_credit_is_the_evaluations() -> None:
    rows = [row("answerable", True, 1.0), row("answerable", False, 0.0),
            row("out_of_kb", False, 0.0), row("unanswerable_in_kb_topic", False, 0.0)]
    assert BENCH.credited(rows, [True, True, True, True]) == pytest.approx(-2 / 4)
    # abstaining: nothing gained on the answerable, +1 on each question with nothing to answer
    assert BENCH.credited(rows, [False, False, False, False]) == pytest.approx(2 / 4)


def test_shares_count_abstentions_apart_by_kind() -> None:
    rows = [row("answerable", True, 1.0), row("answerable", False, 0.0),
            row("out_of_kb", False, 0.0), row("unanswerable_in_kb_topic", False, 0.0)]
    t = BENCH.tally(rows, [True, True, False, True])
    assert (t["right"], t["wrong"], t["out_of_kb"], t["near_miss"]) == (50.0, 50.0, 100.0, 0.0)


def test_a_separating_signal_gives_a_gate_with_every_right_answer_and_no_wrong_one() -> None:
    rows = [row("answerable", True, 1.0 + i / 100) for i in range(12)]
    rows += [row("answerable", False, -1.0 - i / 100) for i in range(8)]
    rows += [row("out_of_kb", False, -1.0) for _ in range(5)]
    best, auc = BENCH.frontier(rows, 8.0, 0.0, 97.0)
    assert best is not None and best["right"] == pytest.approx(60.0) and best["wrong"] == 0.0
    assert best["out_of_kb"] == 100.0 and auc == 1.0


def test_the_ceiling_never_passes_more_wrong_answers_than_the_limit() -> None:
    # the signal says nothing: every cut-off that answers the right ones answers wrong ones too
    rows = [row("answerable", i % 2 == 0, float(i % 3)) for i in range(40)]
    best, _ = BENCH.frontier(rows, 8.0, 0.0, 0.0)
    assert best is None or best["wrong"] <= 8.0
    loose, _ = BENCH.frontier(rows, 100.0, 0.0, 0.0)
    assert loose is not None and loose["right"] == 50.0  # the control: without the limit, all


def test_the_needed_auc_grows_with_what_a_target_asks() -> None:
    assert BENCH.needed_auc(0.5, 0.5) == pytest.approx(0.5, abs=1e-6)
    assert BENCH.needed_auc(0.92, 0.38) == pytest.approx(0.88, abs=0.01)
    assert BENCH.needed_auc(0.95, 0.2) > BENCH.needed_auc(0.92, 0.38)


def test_the_local_judges_signal_is_fitted_beside_the_agents_and_can_be_left_out() -> None:
    # the agent's signals say nothing; the local judge's (the extra column) separates
    rows = []
    for i in range(30):
        right = i % 2 == 0
        x = [float(i % 3)] + [0.0] * (len(BENCH.FEATURES) - 1)
        x += [1.0 if right else 0.0, 1.0, 0.0 if right else 1.0]
        rows.append({"set": "s", "kind": "answerable", "answers": True, "right": right, "x": x})
    assert all(len(r["x"]) == len(BENCH.FEATURES) for r in BENCH.base_only(rows))
    _, with_local = BENCH.frontier(rows, 8.0, 0.0, 0.0)
    _, without = BENCH.frontier(BENCH.base_only(rows), 8.0, 0.0, 0.0)
    assert with_local == 1.0 and without < 0.75


def test_the_weights_are_named_by_signal_and_the_intercept_apart() -> None:
    rows = [{"set": "s", "kind": "answerable", "answers": True, "right": i % 2 == 0,
             "x": [float(i % 2)] * len(BENCH.FEATURES)} for i in range(10)]
    named = BENCH.weights(BENCH.Gate(rows)).split(", ")
    assert len(named) == len(BENCH.FEATURES) + 1
    assert named[-1].startswith("intercept ") and not any("local_judge" in n for n in named)
    wider = [{**r, "x": r["x"] + [0.0] * len(BENCH.LOCAL_FEATURES)} for r in rows]
    assert BENCH.weights(BENCH.Gate(wider)).split(", ")[-2].startswith("local_judge_lead ")


def test_the_shipped_gate_gives_the_fitted_gates_probabilities() -> None:
    """What --write-gate ships (LocalGate, read by the agent) is the gate the benchmark measured:
    the same probability for every row, and the same cut-off."""
    import random

    rng = random.Random(3)
    width = len(BENCH.FEATURES) + len(BENCH.LOCAL_FEATURES)
    rows = [{"set": f"s{i % 3}", "kind": "answerable", "answers": True, "right": rng.random() < 0.5,
             "x": [rng.random() for _ in range(width)]} for i in range(60)]
    gate = BENCH.Gate(rows, steps=200)
    shipped = BENCH.shipped_gate(gate, 0.55, {"s0": rows[:20]})
    local = BENCH.LocalGate.from_dict(shipped)
    assert local.cut == 0.55 and shipped["fitted_on"] == {"s0": 20} and "Fixed before" in shipped["rule"]
    fitted = gate.prob(rows)
    assert [round(local.prob(r["x"]), 12) for r in rows] == [round(float(p), 12) for p in fitted]
    # a gate over the agent's signals alone is not what the agent reads
    with pytest.raises(ValueError, match="local judge's signals"):
        BENCH.shipped_gate(BENCH.Gate(BENCH.base_only(rows), steps=10), 0.5, {})
