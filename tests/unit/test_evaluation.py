"""The evaluation harness's parts without a store: grading, sampling, SQuAD conversion, report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from grounded_agent import aask, build_graph
from grounded_agent.context import Context
from grounded_agent.evaluation.baselines import plain_rag, thresholds_only
from grounded_agent.evaluation.data import (
    EvalDataError,
    EvalQuestion,
    convert_squad,
    load_eval_set,
    stratified_sample,
)
from grounded_agent.evaluation.grading import (
    Response,
    contains_answer,
    grade,
    kind_metrics,
    normalise,
    percentile,
    system_metrics,
)
from grounded_agent.evaluation.report import build_report, render_table
from grounded_agent.evaluation.scripted import DecisionFollowingModel
from tests.fakes import ScriptedSource, finding, found

ANSWERABLE = EvalQuestion("a1", "In what country is Normandy located?", "answerable", ("France",), "Normans#0")
UNANSWERABLE = EvalQuestion("u1", "Who gave their name to Normandy in the 1000s?", "unanswerable_in_kb_topic",
                            (), "Normans#0")
OUT_OF_KB = EvalQuestion("o1", "Who won Super Bowl 50?", "out_of_kb", ("Denver Broncos",), None)


# --- answer strings -------------------------------------------------------------------------------


def test_normalise_folds_case_accents_punctuation_and_whitespace() -> None:
    assert normalise("  Denmark,  Iceland and\nNORWAY. ") == "denmark iceland and norway"
    assert normalise("Fort St. Frédéric") == "fort st frederic"


def test_contains_answer_matches_whole_words_after_normalisation() -> None:
    assert contains_answer("They came from denmark, iceland and norway [1].", ["Denmark, Iceland and Norway"])
    assert contains_answer("It was in the 10th-century.", ["10th century"])
    assert not contains_answer("It happened in 1990 [1].", ["199"])  # no partial words
    assert not contains_answer("See source [1].", ["1"])  # citation markers never match
    assert not contains_answer("anything", [""])


# --- the +1 / 0 / -1 rules ------------------------------------------------------------------------


def test_correct_needs_the_gold_citation_and_the_answer() -> None:
    ok = grade(ANSWERABLE, Response("answered", "Normandy is in France [1].", ["Normans#0"]), "s")
    assert (ok.outcome, ok.score) == ("correct", 1)
    caveat = grade(ANSWERABLE, Response("answered_with_caveat", "France [1]", ["x", "Normans#0"]), "s")
    assert caveat.score == 1
    partial = grade(ANSWERABLE, Response("partial", "France [1]", ["Normans#0"]), "s")
    assert partial.score == 1


def test_wrong_citation_or_missing_answer_scores_minus_one() -> None:
    wrong_doc = grade(ANSWERABLE, Response("answered", "France [1].", ["Normans#3"]), "s")
    assert (wrong_doc.outcome, wrong_doc.score) == ("wrong", -1)
    no_answer = grade(ANSWERABLE, Response("answered", "The Normans were a people [1].", ["Normans#0"]), "s")
    assert (no_answer.outcome, no_answer.score, no_answer.cites_gold) == ("wrong", -1, True)


@pytest.mark.parametrize("status", ["not_found", "unavailable"])
@pytest.mark.parametrize("q", [ANSWERABLE, UNANSWERABLE, OUT_OF_KB])
def test_abstention_scores_zero_for_every_kind(status: str, q: EvalQuestion) -> None:
    g = grade(q, Response(status), "s")
    assert (g.outcome, g.score) == ("abstained", 0)


@pytest.mark.parametrize("q", [UNANSWERABLE, OUT_OF_KB])
def test_any_answer_where_an_abstention_is_expected_is_a_hallucination(q: EvalQuestion) -> None:
    # even an answer that happens to contain a gold string: the KB does not hold it
    g = grade(q, Response("answered", "The Denver Broncos won [1].", ["Normans#0"]), "s")
    assert (g.outcome, g.score) == ("hallucinated", -1)


def test_kind_metrics_rates_and_citation_precision() -> None:
    rows = [
        grade(ANSWERABLE, Response("answered", "France [1][2]", ["Normans#0", "Normans#1"],
                                   latency_ms=10), "s"),
        grade(ANSWERABLE, Response("answered", "Spain [1]", ["Normans#2"], latency_ms=20), "s"),
        grade(ANSWERABLE, Response("not_found", latency_ms=30), "s"),
        grade(ANSWERABLE, Response("answered", "France [1]", ["Normans#0"], llm_calls=2,
                                   latency_ms=40), "s"),
    ]
    m = kind_metrics(rows)
    assert m["n"] == 4
    assert m["correct_rate"] == 0.5 and m["abstention_rate"] == 0.25 and m["wrong_rate"] == 0.25
    assert m["hallucination_rate"] == 0.0
    assert m["citation_precision"] == 0.5  # 2 gold of 4 citations
    assert m["mean_score"] == 0.25
    assert m["llm_calls_mean"] == 0.5 and m["llm_calls_max"] == 2
    assert m["latency_ms_p50"] == 25.0


def test_pooled_scores_with_and_without_credit_for_abstaining() -> None:
    rows = [
        grade(ANSWERABLE, Response("answered", "France [1]", ["Normans#0"]), "s"),
        grade(OUT_OF_KB, Response("not_found"), "s"),
        grade(UNANSWERABLE, Response("answered", "x [1]", ["Normans#0"]), "s"),
    ]
    m = system_metrics(rows)
    assert m["mean_score_answerable_out_of_kb"] == 0.5
    assert m["credited_score_answerable_out_of_kb"] == 1.0
    assert m["by_kind"]["unanswerable_in_kb_topic"]["hallucination_rate"] == 1.0
    assert m["by_kind"]["out_of_kb"]["credited_score"] == 1.0


def test_percentile_interpolates() -> None:
    assert percentile([], 50) is None
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5
    assert percentile([5.0], 95) == 5.0


# --- sampling -------------------------------------------------------------------------------------


def _pool() -> list[EvalQuestion]:
    kinds = ["answerable"] * 50 + ["unanswerable_in_kb_topic"] * 30 + ["out_of_kb"] * 5
    return [EvalQuestion(f"q{i}", f"question {i}?", k, ("x",), "d#0")  # type: ignore[arg-type]
            for i, k in enumerate(kinds)]


def test_stratified_sample_is_per_kind_and_reproducible() -> None:
    pool = _pool()
    a = stratified_sample(pool, 10, seed=0)
    assert [q.kind for q in a].count("answerable") == 10
    assert [q.kind for q in a].count("unanswerable_in_kb_topic") == 10
    assert [q.kind for q in a].count("out_of_kb") == 5  # all there are
    assert [q.id for q in a] == [q.id for q in stratified_sample(list(reversed(pool)), 10, seed=0)]
    assert {q.id for q in a} != {q.id for q in stratified_sample(pool, 10, seed=1)}
    only = stratified_sample(pool, 3, seed=0, kinds=["out_of_kb"])
    assert len(only) == 3 and {q.kind for q in only} == {"out_of_kb"}


# --- data files -----------------------------------------------------------------------------------

SQUAD = {
    "version": "v2.0",
    "data": [
        {"title": "Normans", "paragraphs": [
            {"context": "The Normans gave their name to Normandy, a region in France.",
             "qas": [
                 {"id": "n1", "question": "In what country is Normandy located?", "is_impossible": False,
                  "answers": [{"text": "France", "answer_start": 54}, {"text": "France", "answer_start": 54}]},
                 {"id": "n2", "question": "Who gave Normandy its name in 1000 BC?", "is_impossible": True,
                  "answers": [], "plausible_answers": [{"text": "Normans", "answer_start": 4}]},
             ]},
            {"context": "Rollo was their leader.", "qas": []},
        ]},
        {"title": "Super_Bowl_50", "paragraphs": [
            {"context": "The Denver Broncos won Super Bowl 50.",
             "qas": [
                 {"id": "s1", "question": "Who won Super Bowl 50?", "is_impossible": False,
                  "answers": [{"text": "Denver Broncos", "answer_start": 4}]},
                 {"id": "s2", "question": "Who lost Super Bowl 12?", "is_impossible": True, "answers": []},
             ]},
        ]},
        {"title": "Oxygen", "paragraphs": [
            {"context": "Oxygen is a chemical element with symbol O.",
             "qas": [{"id": "o1", "question": "What is the symbol of oxygen?", "is_impossible": False,
                      "answers": [{"text": "O", "answer_start": 42}]}]},
        ]},
    ],
}


def test_official_squad_converts_with_held_out_articles() -> None:
    s = convert_squad(SQUAD, holdout_articles=1, seed=0)
    held = {q.id for q in s.questions if q.kind == "out_of_kb"}
    kb_titles = {d["article"] for d in s.kb_docs}
    assert len(kb_titles) == 2
    held_title = ({"Normans", "Super_Bowl_50", "Oxygen"} - kb_titles).pop()
    assert all(not d["doc_id"].startswith(held_title) for d in s.kb_docs)
    by_id = {q.id: q for q in s.questions}
    for q in s.questions:
        if q.kind != "out_of_kb":
            assert q.gold_doc_id is not None and q.gold_doc_id.split("#")[0] in kb_titles
    if held_title != "Normans":
        assert by_id["n1"].kind == "answerable" and by_id["n1"].gold_doc_id == "Normans#0"
        assert by_id["n1"].answers == ("France",)  # duplicates collapsed
        assert by_id["n2"].kind == "unanswerable_in_kb_topic" and by_id["n2"].answers == ()
    # a held-out article's impossible questions are dropped, its answerable ones are out_of_kb
    assert held and all(not q.id.endswith("2") or q.id == "o1" for q in s.questions if q.id in held)
    assert convert_squad(SQUAD, 1, seed=0).kb_docs == s.kb_docs  # reproducible
    none_held = convert_squad(SQUAD, 0)
    assert not [q for q in none_held.questions if q.kind == "out_of_kb"]
    assert {d["doc_id"] for d in none_held.kb_docs} == {"Normans#0", "Normans#1", "Super_Bowl_50#0", "Oxygen#0"}
    assert none_held.corpus_digest() != s.corpus_digest()


def test_squad_conversion_rejects_bad_input() -> None:
    with pytest.raises(EvalDataError, match="holdout"):
        convert_squad(SQUAD, holdout_articles=3)
    with pytest.raises(EvalDataError, match="no 'data'"):
        convert_squad({"version": "v2.0"}, 1)


def test_load_eval_set_reads_both_formats_and_says_where_data_comes_from(tmp_path: Path) -> None:
    with pytest.raises(EvalDataError, match="ships no evaluation data"):
        load_eval_set(tmp_path / "questions.jsonl", tmp_path / "kb_corpus.jsonl")
    official = tmp_path / "dev-v2.0.json"
    official.write_text(json.dumps(SQUAD), encoding="utf-8")
    s = load_eval_set(official, None, holdout_articles=1)
    assert s.kb_docs and s.kb_path is None
    qfile, kbfile = tmp_path / "q.jsonl", tmp_path / "kb.jsonl"
    qfile.write_text(json.dumps({"id": "1", "question": "Where?", "kind": "answerable",
                                 "answers": ["France"], "gold_doc_id": "N#0"}) + "\n", encoding="utf-8")
    kbfile.write_text(json.dumps({"doc_id": "N#0", "title": "N", "text": "In France."}) + "\n",
                      encoding="utf-8")
    s2 = load_eval_set(qfile, kbfile)
    assert s2.questions[0].gold_doc_id == "N#0" and s2.kb_path == kbfile
    qfile.write_text(json.dumps({"id": "1", "question": "Where?", "kind": "maybe"}) + "\n", encoding="utf-8")
    with pytest.raises(EvalDataError, match="kind must be one of"):
        load_eval_set(qfile, kbfile)


# --- baselines, report, scripted model ------------------------------------------------------------

NORMANS = finding(source_id="Normans#0", title="Normans", score=0.9,
                  text="The Normans were a people. They gave their name to Normandy, a region in France.")
ROLLO = finding(source_id="Normans#1", title="Normans", score=0.6, text="Rollo was their leader.")


def test_plain_rag_always_answers_from_the_top_passage() -> None:
    r = plain_rag("In what country is Normandy located?", [NORMANS, ROLLO])
    assert r.status == "answered" and r.cited == ["Normans#0"] and "France" in r.answer
    weak = finding(source_id="x", text="Something else entirely.", score=0.01)
    assert plain_rag("In what country is Normandy located?", [weak]).status == "answered"
    assert plain_rag("q", []).status == "not_found"


def test_thresholds_only_answers_at_the_found_threshold_only() -> None:
    assert thresholds_only("In what country is Normandy?", [NORMANS, ROLLO], 0.75, 0.55).status == "answered"
    low = [ROLLO]
    r = thresholds_only("Who led them?", low, 0.75, 0.55)
    assert r.status == "not_found" and r.best_score == 0.6


def test_report_table_and_targets() -> None:
    rows = [
        grade(ANSWERABLE, Response("answered", "France [1]", ["Normans#0"]), "full_graph", gold_rank=1),
        grade(OUT_OF_KB, Response("not_found"), "full_graph"),
        grade(UNANSWERABLE, Response("not_found"), "full_graph"),
        grade(ANSWERABLE, Response("answered", "France [1]", ["Normans#0"]), "plain_rag", gold_rank=1),
    ]
    report = build_report(rows, {"a1": 1, "o1": None, "u1": None}, {"top_k": 5})
    assert report["retrieval"]["gold_top1"] == 1.0
    assert report["targets"]["answerable_correct_rate"]["met"] is True
    assert report["targets"]["out_of_kb_abstention_rate"]["value"] == 1.0
    assert report["full_graph_answerable_failures"]["correct"] == 1
    table = render_table(report)
    assert "full_graph" in table and "plain_rag" in table and "target" in table
    json.dumps(report)  # JSON-able


async def test_decision_following_model_takes_the_agents_path() -> None:
    kb = ScriptedSource("knowledge_base", [found("knowledge_base", NORMANS, ROLLO)])
    model = DecisionFollowingModel()
    graph = build_graph(chat_model=model, tools={"knowledge_base": kb.tool()})
    result = await aask("In what country is Normandy located?", graph=graph,
                        context=Context(sources=["knowledge_base"]))
    assert result.status in ("answered", "answered_with_caveat")
    assert "France" in result.answer and result.citations[0].source_id == "Normans#0"
    assert result.usage.llm_calls == sum(model.calls.values())
    assert model.calls["call_tools"] == 1 and model.calls["answer"] == 1


def test_eval_arguments_parse() -> None:
    from grounded_agent.cli import build_parser

    args = build_parser().parse_args(
        ["eval", "--sample", "5", "--seed", "2", "--kinds", "out_of_kb", "--json", "--holdout-articles", "3"]
    )
    assert (args.sample, args.seed, args.kinds, args.json, args.holdout_articles) == (
        5, 2, ["out_of_kb"], True, 3)
    assert args.questions.name == "questions.jsonl"
