"""benchmarks/bench_extraction.py puts each answerable question in the row where it was lost."""

from __future__ import annotations

from evals.data import EvalQuestion
from grounded_agent.context import Context
from grounded_agent.schemas import Finding
from tests.fakes import finding
from tests.support.benchmarks import load_benchmark

BENCH = load_benchmark("bench_extraction")
CTX = Context()
LOANS = "Books can be borrowed for 21 days. Loans can be renewed online."
HOURS = "The library opens at 09:00 on weekdays. It closes at 20:00."
Q = EvalQuestion(id="q1", question="How many days can I borrow a book for?", kind="answerable",
                 answers=("21 days",), gold_doc_id="loans")


def row(findings: list[Finding]) -> str:
    return str(BENCH.classify(Q, findings, CTX, 2))


def test_a_quoted_gold_answer_is_correct() -> None:
    assert row([finding(source_id="loans", text=LOANS, score=0.9)]) == "correct"


def test_under_the_found_threshold_the_question_is_abstained_and_the_gold_rank_told_apart() -> None:
    gold_first = [finding(source_id="loans", text=LOANS, score=0.6),
                  finding(source_id="hours", text=HOURS, score=0.5)]
    assert row(gold_first) == "abstained, gold first"
    gold_second = [finding(source_id="hours", text=HOURS, score=0.6),
                   finding(source_id="loans", text=LOANS, score=0.5)]
    assert row(gold_second) == "abstained, otherwise"
    assert row([]) == "abstained, otherwise"


def test_an_answer_from_another_document_is_a_passage_choice_or_not_retrieved() -> None:
    # the other passage is ranked first and the gold one second: the answer quotes the first
    decoy = "Any book on the club shelf can be borrowed for as many days as you like."
    other_first = [finding(source_id="club", text=decoy, score=0.95),
                   finding(source_id="loans", text=LOANS, score=0.8)]
    quoted = BENCH.extractive_draft(Q.question, other_first)
    assert "[1]" in quoted and "21 days" not in quoted
    assert row(other_first) == "wrong, passage choice"
    assert row([finding(source_id="hours", text=HOURS, score=0.9)]) == "wrong, not retrieved"


def test_a_gold_passage_below_the_three_the_answer_chooses_from_is_out_of_reach() -> None:
    decoys = [finding(source_id=f"d{i}", text=f"Book club {i} meets every day at the branch.",
                      score=0.95 - i / 100) for i in range(3)]
    found = [*decoys, finding(source_id="loans", text=LOANS, score=0.76)]
    assert row(found) == "wrong, out of reach"


def test_with_no_gate_an_abstained_question_counts_where_its_extraction_is_right() -> None:
    """The ceiling line: the gold passage under the found threshold is answered and right."""
    ungated = Context(found_threshold=0.0, low_threshold=0.0)
    weak = [finding(source_id="loans", text=LOANS, score=0.4)]
    assert row(weak) == "abstained, gold first"
    assert BENCH.classify(Q, weak, ungated, 2) == "correct"
    assert BENCH.classify(Q, [finding(source_id="hours", text=HOURS, score=0.4)], ungated, 2) != "correct"


def test_the_ceiling_line_is_printed_apart_from_the_partition() -> None:
    from collections import Counter

    counts = Counter({"correct": 1, "abstained, gold first": 1, BENCH.UNGATED: 2})
    text = BENCH.render({"kb": counts})
    assert "correct with no gate" in text and "100.0%" in text.splitlines()[-1]
    assert text.splitlines()[-2].split()[-1] == "2"  # two questions, the ceiling not among them
