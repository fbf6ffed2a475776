"""benchmarks/bench_local_judge.py passages: the unit read is the passage the answer quotes from,
whole, and only the veto decides (there is no other passage read to compare with)."""

from __future__ import annotations

from grounded_agent.schemas import Finding
from tests.support.benchmarks import load_benchmark

BENCH = load_benchmark("bench_local_judge")


def _page(section: str, text: str) -> Finding:
    return Finding(source="knowledge_base", source_id="billing", title="Bills and payment",
                   section=section, text=text, score=0.96)


def test_the_passage_read_is_the_one_the_answer_quotes_whole() -> None:
    intro = _page("Bills", "This page explains what a bill shows and how it can be paid. "
                  "Customer Service answers questions by phone.")
    when = _page("When bills are sent", "Household customers receive a bill every two months. "
                 "Business customers receive one every month.")
    read = BENCH.quoted_passages("How often will I get a water bill?", [intro, when])
    assert read == [("Bills and payment", when.text)]


def test_the_passage_score_is_the_reading_and_the_margin_never_trips() -> None:
    rows = [{"answers": True, "right": True, "j": 0.9, "b": 0.9, "pj": 0.7},
            {"answers": True, "right": False, "j": 0.1, "b": 0.95, "pj": 0.3},
            {"answers": True, "right": False, "j": 0.9, "b": 0.9}]  # not read: no passage score
    stands = [BENCH.cal.stands(r, (0.5, 0.0)) for r in BENCH.as_passage(rows)]
    assert stands == [True, False, False]
    # the sentence scores (j, b) would have let the unread third through and vetoed nothing else
    assert [BENCH.cal.stands(r, (0.5, 0.0)) for r in rows] == [True, False, True]
