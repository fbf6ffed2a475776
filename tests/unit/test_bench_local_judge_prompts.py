"""benchmarks/bench_local_judge_prompts.py: every wording it compares is a whole prompt (the
shipped one among them), and the judge that picks a sentence is credited for that sentence."""

from __future__ import annotations

from typing import Any

import pytest

from grounded_agent.prompts.local_judge import LOCAL_JUDGE_PROMPT
from tests.support.benchmarks import load_benchmark

load_benchmark("bench_local_judge")  # imported by name by the script below
BENCH = load_benchmark("bench_local_judge_prompts")


def test_every_wording_takes_the_question_title_and_sentence_and_the_shipped_one_is_p0() -> None:
    assert BENCH.VARIANTS["P0"][0] == LOCAL_JUDGE_PROMPT
    for name, (template, mode) in BENCH.VARIANTS.items():
        text = template.format(question="Q-MARK", title="T-MARK", sentence="S-MARK")
        assert text.count("Q-MARK") == text.count("T-MARK") == text.count("S-MARK") == 1, name
        assert text.endswith("<|im_start|>assistant\n"), name  # the model's reply comes next
        assert mode in ("yes", "none")


def row(j: float, b: float, scores: dict[int, float], right: bool, hits: list[bool],
        kind: str = "answerable") -> dict[str, Any]:
    return {"kind": kind, "answers": True, "right": right, "j": j, "b": b, "scores": scores,
            "hits": hits}


def test_picking_credits_the_best_rated_sentence_where_the_quoted_one_fails() -> None:
    cut = (0.5, 0.1)
    # the quoted sentence passes: the rules' answer stands, right or wrong
    assert BENCH.picked(row(0.9, 0.9, {0: 0.9}, True, [True]), cut) is True
    # quoted too low, another sentence above the veto: that sentence is the answer
    assert BENCH.picked(row(0.2, 0.8, {0: 0.2, 1: 0.8}, False, [False, True]), cut) is True
    assert BENCH.picked(row(0.2, 0.8, {0: 0.2, 1: 0.8}, True, [True, False]), cut) is False
    # nothing passes the veto: abstain
    assert BENCH.picked(row(0.2, 0.3, {0: 0.2, 1: 0.3}, True, [True, True]), cut) is None
    rows = [row(0.2, 0.8, {0: 0.2, 1: 0.8}, False, [False, True]),
            row(0.2, 0.3, {0: 0.2}, False, [False], kind="unanswerable_in_kb_topic")]
    assert BENCH.credited_picked(rows, cut) == pytest.approx((1 + 1) / 2)
