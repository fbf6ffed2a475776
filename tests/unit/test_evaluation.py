"""The evaluation harness's parts without a store: grading, sampling, SQuAD conversion, report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evals.baselines import plain_rag, thresholds_only
from evals.data import (
    EvalDataError,
    EvalQuestion,
    active_versions,
    convert_squad,
    load_eval_set,
    load_kb_dir,
    load_swapped_set,
    stratified_sample,
)
from evals.grading import (
    Response,
    contains_answer,
    credited_score,
    grade,
    kind_metrics,
    normalise,
    percentile,
    system_metrics,
)
from evals.report import (
    build_report,
    render_kb_table,
    render_table,
    summarise_seeds,
)
from evals.scripted import DecisionFollowingModel
from grounded_agent import aask, build_graph
from grounded_agent.context import Context
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
    with pytest.raises(EvalDataError, match="ships no SQuAD data"):
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
                        context=Context(sources=["knowledge_base"], choose_one_source=True))
    assert result.status in ("answered", "answered_with_caveat")
    assert "France" in result.answer and result.citations[0].source_id == "Normans#0"
    assert result.usage.llm_calls == sum(model.calls.values())
    assert model.calls["call_tools"] == 1 and model.calls["answer"] == 1


def test_eval_arguments_parse() -> None:
    from evals.cli import build_parser

    args = build_parser().parse_args(
        ["--sample", "5", "--seed", "2", "--kinds", "out_of_kb", "--json", "--holdout-articles", "3"]
    )
    assert (args.sample, args.seed, args.kinds, args.json, args.holdout_articles) == (
        5, 2, ["out_of_kb"], True, 3)
    assert args.questions is None and args.data is None  # resolved at run time, from the cwd
    more = build_parser().parse_args(
        ["--all", "--seeds", "0", "1", "2", "--kbs-root", "kbs", "--offline"])
    assert more.all and more.seeds == [0, 1, 2] and more.kbs_root == Path("kbs") and more.offline
    two = build_parser().parse_args(["--kb-dir", "a", "--kb-dir", "b", "--swapped"])
    assert two.kb_dir == [Path("a"), Path("b")] and two.swapped


# --- versions, the credited score, notes ----------------------------------------------------------

FEE_2026 = EvalQuestion("v1", "What's the daily fine for a late book?", "answerable", ("EUR 0.25",),
                        "fees", gold_version="2026.1", note="version")


def test_gold_version_is_part_of_the_gold_citation() -> None:
    right = grade(FEE_2026, Response("answered", "EUR 0.25 a day [1].", ["fees"], ["2026.1"]), "s")
    assert (right.outcome, right.cites_gold, right.wrong_version) == ("correct", True, False)
    old = grade(FEE_2026, Response("answered", "EUR 0.25 a day [1].", ["fees"], ["2025.1"]), "s")
    assert (old.outcome, old.score, old.cites_gold, old.wrong_version) == ("wrong", -1, False, True)
    # the right version beside the wrong one is still a citation of a superseded text: wrong
    both = grade(FEE_2026, Response("answered", "EUR 0.25 [1][2].", ["fees", "fees"],
                                    ["2026.1", "2025.1"]), "s")
    assert both.outcome == "wrong" and both.wrong_version
    unknown = grade(FEE_2026, Response("answered", "EUR 0.25 [1].", ["fees"]), "s")
    assert unknown.outcome == "wrong"  # a version that is not known is not the gold version
    # without gold_version any version of the gold document is the gold citation
    any_version = EvalQuestion("v2", "fine?", "answerable", ("EUR 0.25",), "fees")
    assert grade(any_version, Response("answered", "EUR 0.25 [1]", ["fees"], ["2025.1"]), "s").score == 1
    m = kind_metrics([right, old])
    assert m["citation_precision"] == 0.5
    fails = build_report([grade(FEE_2026, Response("answered", "EUR 0.25", ["fees"], ["2025.1"]),
                                "full_graph")], {"v1": 1}, {})["full_graph_answerable_failures"]
    assert fails["gold_cited_wrong_version"] == 1


def test_credited_score_rules() -> None:
    assert credited_score("correct", True) == 1
    assert credited_score("abstained", False) == 1  # right abstention
    assert credited_score("abstained", True) == 0  # wrong abstention
    assert credited_score("wrong", True) == -1 and credited_score("hallucinated", False) == -1
    rows = [
        grade(ANSWERABLE, Response("answered", "France [1]", ["Normans#0"]), "s"),  # +1
        grade(ANSWERABLE, Response("not_found"), "s"),  # 0
        grade(UNANSWERABLE, Response("not_found"), "s"),  # +1
        grade(OUT_OF_KB, Response("answered", "Denver [1]", ["x"]), "s"),  # -1
    ]
    assert [r.credited for r in rows] == [1, 0, 1, -1]
    m = system_metrics(rows)
    assert m["credited_score_all"] == 0.25
    assert m["by_kind"]["unanswerable_in_kb_topic"]["credited_score"] == 1.0


def test_per_note_breakdown() -> None:
    near = EvalQuestion("n1", "Do you lend telescopes?", "unanswerable_in_kb_topic", (), None,
                        note="near_miss")
    para = EvalQuestion("p1", "How long can I keep a book?", "answerable", ("21 days",), "loans",
                        note="paraphrase")
    rows = [
        grade(near, Response("not_found"), "full_graph"),
        grade(para, Response("answered", "21 days [1]", ["loans"], [None]), "full_graph"),
        grade(FEE_2026, Response("not_found"), "full_graph"),
        grade(near, Response("answered", "Yes [1]", ["loans"]), "thresholds_only"),
        grade(para, Response("not_found"), "thresholds_only"),
        grade(FEE_2026, Response("answered", "EUR 0.25 [1]", ["fees"], ["2026.1"]),
              "thresholds_only"),
    ]
    full = system_metrics([r for r in rows if r.system == "full_graph"])
    assert list(full["by_note"]) == ["paraphrase", "version", "near_miss"]  # NOTES order
    assert full["by_note"]["near_miss"]["right_rate"] == 1.0
    assert full["by_note"]["version"]["counts"]["abstained"] == 1
    report = build_report(rows, {"p1": 1, "v1": 2}, {"corpus": "tiny", "sampled": False},
                          {"n1": 0.2, "p1": 0.8, "v1": 0.95})
    assert report["criterion"] == {"full_graph": 0.6667, "thresholds_only": 0.0, "beats": True}
    table = render_kb_table(report)
    assert "== tiny: 3 questions" in table and "all questions" in table
    assert "+0.667" in table and "beats" in table
    assert "near_miss" in table and "paraphrase" in table
    json.dumps(report)


def test_reliability_bins_in_the_report() -> None:
    from evals.plots import reliability_bins, write_reliability_plot

    bins = reliability_bins([(0.05, False, False), (0.95, True, True), (1.0, True, False),
                             (0.55, False, False), (None, True, True)])
    assert len(bins) == 10 and [b["n"] for b in bins] == [1, 0, 0, 0, 0, 1, 0, 0, 0, 2]
    assert bins[9]["share"] == 1.0 and bins[9]["share_gold_top1"] == 0.5
    assert bins[1]["share"] is None and bins[0]["bin"] == "0.0-0.1"
    rows = [grade(ANSWERABLE, Response("not_found"), "thresholds_only"),
            grade(OUT_OF_KB, Response("not_found"), "thresholds_only")]
    report = build_report(rows, {"a1": 1, "o1": None}, {}, {"a1": 0.81, "o1": 0.12})
    rel = {b["bin"]: b for b in report["reliability"]}
    assert rel["0.8-0.9"] == {**rel["0.8-0.9"], "n": 1, "share": 1.0}
    assert rel["0.1-0.2"]["n"] == 1 and rel["0.1-0.2"]["share"] == 0.0
    assert write_reliability_plot([{**b, "n": 0} for b in bins], Path("unused.png")) is None


def test_relevance_bands_count_each_kind_at_the_graphs_cut_offs() -> None:
    from evals.report import band_group, relevance_bands

    assert band_group("answerable", 3) == "answerable"
    assert band_group("answerable", None) is None  # gold not retrieved: its score says nothing
    assert band_group("unanswerable_in_kb_topic", None) == "near_miss"
    assert band_group("out_of_kb", None) == "out_of_kb"
    points = [(0.54, "answerable"), (0.55, "answerable"), (0.75, "answerable"),
              (0.9, "near_miss"), (0.1, "out_of_kb"), (None, "out_of_kb"), (0.99, None)]
    bands = relevance_bands(points, (0.55, 0.75))
    assert bands["cuts"] == [0.55, 0.75]
    assert bands["counts"] == {"answerable": [1, 1, 1], "near_miss": [0, 0, 1],
                               "out_of_kb": [1, 0, 0]}
    hist = bands["hist"]["answerable"]  # 20 bins of 0.05: 0.54 -> 10, 0.55 -> 11, 0.75 -> 15
    assert len(hist) == 20 and [i for i, c in enumerate(hist) if c] == [10, 11, 15]
    # a run with other cut-offs is banded by its own
    rows = [grade(ANSWERABLE, Response("not_found"), "thresholds_only"),
            grade(OUT_OF_KB, Response("not_found"), "thresholds_only")]
    report = build_report(rows, {"a1": 1, "o1": None},
                          {"low_threshold": 0.5, "found_threshold": 0.8}, {"a1": 0.79, "o1": 0.3})
    assert report["relevance_bands"]["cuts"] == [0.5, 0.8]
    assert report["relevance_bands"]["counts"] == {"answerable": [0, 1, 0], "out_of_kb": [1, 0, 0]}


def test_bands_table_puts_every_kb_side_by_side() -> None:
    from evals.report import relevance_bands, render_bands_table

    small = relevance_bands([(0.3, "answerable"), (0.9, "answerable"), (0.8, "answerable"),
                             (0.6, "near_miss"), (0.1, "out_of_kb")], (0.55, 0.75))
    other = relevance_bands([(0.9, "answerable"), (0.2, "out_of_kb")], (0.55, 0.75))
    table = render_bands_table({"small_kb": {"relevance_bands": small},
                                "other_kb": {"relevance_bands": other},
                                "no_bands": {}})
    lines = table.splitlines()
    assert "answerable, gold retrieved" in lines[1] and "out of KB" in lines[1]
    assert lines[2].count("< 0.55") == 3 and lines[2].count(">= 0.75") == 3
    small_row = next(x for x in lines if x.startswith("small_kb"))
    assert "33.3%" in small_row and "66.7%" in small_row and small_row.endswith("(3, 1, 1)")
    other_row = next(x for x in lines if x.startswith("other_kb"))
    assert " - " in other_row and other_row.endswith("(1, 1)")  # no near-misses on that KB
    assert not any(x.startswith("no_bands") for x in lines)
    assert render_bands_table({"x": {}}) == ""


def test_relevance_by_kb_plot_needs_two_knowledge_bases(tmp_path: Path) -> None:
    from evals.plots import write_relevance_by_kb
    from evals.report import BAND_GROUPS, relevance_bands

    one = relevance_bands([(i / 20, "answerable") for i in range(20)]
                          + [(i / 40, "out_of_kb") for i in range(20)], (0.55, 0.75))
    path = tmp_path / "by_kb.png"
    assert write_relevance_by_kb({"a": one}, path, BAND_GROUPS) is None and not path.exists()
    assert write_relevance_by_kb({"a": one, "b": one}, path, BAND_GROUPS) == path
    assert path.stat().st_size > 1000


def test_an_abstention_that_lists_the_gold_document_among_the_closest_is_counted() -> None:
    pointed = grade(ANSWERABLE, Response("not_found", closest=["Other#1", "Normans#0"]),
                    "full_graph")
    missed = grade(ANSWERABLE, Response("not_found", closest=["Other#1"]), "full_graph")
    answered = grade(ANSWERABLE, Response("answered", "France [1]", ["Normans#0"],
                                          closest=["Normans#0"]), "full_graph")
    off = grade(OUT_OF_KB, Response("not_found", closest=["Normans#0"]), "full_graph")
    assert (pointed.gold_closest, missed.gold_closest, answered.gold_closest,
            off.gold_closest) == (True, False, False, False)
    assert pointed.outcome == "abstained" and pointed.credited == 0  # still no answer
    report = build_report([pointed, missed, answered, off], {"a1": 1, "o1": None},
                          {"corpus": "x"})
    answerable = report["systems"]["full_graph"]["by_kind"]["answerable"]
    assert answerable["abstained_gold_closest"] == 1
    assert "closest listed for 1 of 2 (50%)" in render_kb_table(report)


def test_seeds_summary_is_the_mean() -> None:
    def one(seed: int, outcome_ok: bool) -> dict:
        rows = [grade(ANSWERABLE, Response("answered", "France [1]" if outcome_ok else "Spain [1]",
                                           ["Normans#0"]), s) for s in ("full_graph", "thresholds_only")]
        rows.append(grade(OUT_OF_KB, Response("not_found"), "full_graph"))
        rows.append(grade(OUT_OF_KB, Response("not_found"), "thresholds_only"))
        return build_report(rows, {"a1": 1 if outcome_ok else 2, "o1": None},
                            {"corpus": "squad", "seed": seed, "sampled": True,
                             "sample_per_kind": 1}, {"a1": 0.9, "o1": 0.1})

    summary = summarise_seeds([one(0, True), one(1, False)])
    full = summary["systems"]["full_graph"]
    assert full["by_kind"]["answerable"]["correct_rate"] == 0.5
    assert full["credited_score_all"] == 0.5  # (1.0 + 0.0) / 2
    assert summary["retrieval"]["gold_top1"] == 0.5
    assert [p["seed"] for p in summary["per_seed"]] == [0, 1]
    assert summary["reliability"][9]["n"] == 2 and summary["reliability"][9]["share"] == 1.0
    # the bands are pooled the same way: both seeds' questions, counts added
    assert summary["relevance_bands"]["counts"] == {"answerable": [0, 0, 2],
                                                    "out_of_kb": [2, 0, 0]}
    assert summary["relevance_bands"]["hist"]["answerable"][18] == 2  # 0.9, both seeds
    table = render_kb_table(summary)
    assert "mean of seeds 0, 1" in table and "does NOT beat" in table
    json.dumps(summary)


# --- the swapped SQuAD set ------------------------------------------------------------------------


def _write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_swapped_set_turns_held_out_questions_answerable(tmp_path: Path) -> None:
    _write_jsonl(tmp_path / "kb_corpus.jsonl", [
        {"doc_id": "Normans#0", "title": "Normans", "text": "Normandy is a region in France."}])
    _write_jsonl(tmp_path / "heldout_corpus.jsonl", [
        {"doc_id": "SB#0", "title": "SB", "text": "The Denver Broncos won Super Bowl 50 in 2016."},
        {"doc_id": "SB#1", "title": "SB", "text": "The game was played at Levi's Stadium."},
    ])
    _write_jsonl(tmp_path / "questions.jsonl", [
        {"id": "a", "question": "Where is Normandy?", "kind": "answerable", "answers": ["France"],
         "gold_doc_id": "Normans#0"},
        {"id": "u", "question": "Where is Normandy in 1000 BC?", "kind": "unanswerable_in_kb_topic",
         "answers": [], "gold_doc_id": "Normans#0"},
        # mapped by the data: answers checked against the paragraph; "8" is not in it -> dropped
        {"id": "o1", "question": "Who won Super Bowl 50?", "kind": "out_of_kb",
         "answers": ["Denver Broncos", "8"], "gold_doc_id": "SB#0"},
        # no gold_doc_id: the one held-out paragraph holding an answer
        {"id": "o2", "question": "Where was it played?", "kind": "out_of_kb",
         "answers": ["Levi's Stadium"], "gold_doc_id": None},
        # the answer is in no held-out paragraph: dropped
        {"id": "o3", "question": "Who sang?", "kind": "out_of_kb", "answers": ["Coldplay"],
         "gold_doc_id": "SB#0"},
    ])
    s = load_swapped_set(tmp_path)
    by_id = {q.id: q for q in s.questions}
    assert set(by_id) == {"a", "o1", "o2"}
    assert by_id["a"].kind == "out_of_kb"
    assert (by_id["o1"].kind, by_id["o1"].gold_doc_id, by_id["o1"].answers) == (
        "answerable", "SB#0", ("Denver Broncos",))
    assert (by_id["o2"].kind, by_id["o2"].gold_doc_id) == ("answerable", "SB#1")
    assert s.kb_path == tmp_path / "heldout_corpus.jsonl" and s.sampled
    assert s.info["dropped_in_topic_unanswerable"] == 1
    assert s.info["dropped_no_checked_gold"] == 1 and s.info["gold_found_by_answer_search"] == 1
    assert s.info["answers_dropped_not_in_gold"] == 1
    assert {d["doc_id"] for d in s.iter_kb()} == {"SB#0", "SB#1"}
    with pytest.raises(EvalDataError, match=r"heldout_corpus\.jsonl"):
        load_swapped_set(tmp_path / "nowhere")


# --- a project knowledge base ---------------------------------------------------------------------


def _md(meta: dict[str, str], body: str) -> str:
    return "---\n" + "".join(f"{k}: {v}\n" for k, v in meta.items()) + "---\n" + body


def _tiny_kb(root: Path) -> Path:
    docs = root / "docs"
    docs.mkdir(parents=True)
    (docs / "fees_2025.md").write_text(_md(
        {"id": "fees", "title": "Fees", "version": '"2025.1"', "document_date": "2025-01-15",
         "language": "en", "source_url": "https://example.org/fees"},
        "# Fees\n\nThe daily fine for a book is EUR 0.20.\n"), encoding="utf-8")
    (docs / "fees_2026.md").write_text(_md(
        {"id": "fees", "title": "Fees", "version": '"2026.1"', "document_date": "2026-02-01",
         "language": "en", "source_url": "https://example.org/fees"},
        "# Fees\n\nThe daily fine for a book is EUR 0.25.\n"), encoding="utf-8")
    (docs / "loans.md").write_text(_md(
        {"id": "loans", "title": "Loans", "version": '"2026.1"', "document_date": "2026-01-12"},
        "# Loans\n\nBooks are lent for 21 days.\n"), encoding="utf-8")
    _write_jsonl(root / "questions.jsonl", [
        {"id": "q1", "question": "How long can I keep a book?", "kind": "answerable",
         "answers": ["21 days"], "gold_doc_id": "loans", "note": "paraphrase"},
        {"id": "q2", "question": "What's the fine per day now?", "kind": "answerable",
         "answers": ["EUR 0.25"], "gold_doc_id": "fees", "gold_version": "2026.1", "note": "version"},
        {"id": "q3", "question": "Do you lend telescopes?", "kind": "unanswerable_in_kb_topic",
         "answers": [], "gold_doc_id": None, "note": "near_miss"},
        {"id": "q4", "question": "Who won Super Bowl 50?", "kind": "out_of_kb", "answers": [],
         "gold_doc_id": None, "note": "off_topic"},
    ])
    return root


def test_kb_dir_loader_reads_markdown_and_questions(tmp_path: Path) -> None:
    kb = _tiny_kb(tmp_path / "tiny")
    s = load_kb_dir(kb)
    assert s.name == "tiny" and not s.sampled and s.kb_path == kb / "docs"
    assert [q.id for q in s.questions] == ["q1", "q2", "q3", "q4"]
    q2 = s.questions[1]
    assert (q2.gold_doc_id, q2.gold_version, q2.note) == ("fees", "2026.1", "version")
    assert s.info["documents"] == 2 and s.info["document_versions"] == 3
    assert s.warnings == []
    docs = list(s.iter_kb())
    assert {(d["doc_id"], d["version"]) for d in docs} == {
        ("fees", "2025.1"), ("fees", "2026.1"), ("loans", "2026.1")}
    assert active_versions(docs) == {"fees": "2026.1", "loans": "2026.1"}
    digest = s.corpus_digest()
    assert digest == load_kb_dir(kb).corpus_digest()
    (kb / "docs" / "loans.md").write_text(_md({"id": "loans"}, "Books are lent for 28 days.\n"),
                                          encoding="utf-8")
    assert load_kb_dir(kb).corpus_digest() != digest
    # every question is asked, whatever --sample
    from evals.cli import _questions_for, build_parser

    args = build_parser().parse_args(["--sample", "1"])
    assert len(_questions_for(s, args, 0)) == 4


def test_kb_dir_loader_flags_what_cannot_be_graded(tmp_path: Path) -> None:
    kb = _tiny_kb(tmp_path / "tiny")
    qfile = kb / "questions.jsonl"
    lines = qfile.read_text(encoding="utf-8").splitlines()
    extra = [
        {"id": "q5", "question": "What was the fine in 2025?", "kind": "answerable",
         "answers": ["EUR 0.20"], "gold_doc_id": "fees", "gold_version": "2025.1", "note": "stale"},
        {"id": "q6", "question": "How long?", "kind": "answerable", "answers": ["3 weeks"],
         "gold_doc_id": "loans", "note": "paraphrase"},
    ]
    qfile.write_text("\n".join(lines + [json.dumps(o) for o in extra]) + "\n", encoding="utf-8")
    s = load_kb_dir(kb)
    assert any("q5" in w and "not the active version" in w for w in s.warnings)
    assert any("q6" in w and "no answer string" in w for w in s.warnings)
    for bad, match in (
        ({"gold_doc_id": "nowhere"}, "not a document id"),
        ({"gold_version": "1999"}, "has no version"),
        ({"id": "q1"}, "duplicate id"),
    ):
        obj = {"id": "q9", "question": "How long?", "kind": "answerable", "answers": ["21 days"],
               "gold_doc_id": "loans", **bad}
        qfile.write_text("\n".join([*lines, json.dumps(obj)]) + "\n", encoding="utf-8")
        with pytest.raises(EvalDataError, match=match):
            load_kb_dir(kb)
    other = _tiny_kb(tmp_path / "other")
    (other / "questions.jsonl").unlink()
    with pytest.raises(EvalDataError, match="questions file"):
        load_kb_dir(other)
    with pytest.raises(EvalDataError, match=r"folder .* not found"):
        load_kb_dir(tmp_path / "missing")
    (tmp_path / "nodocs").mkdir()
    with pytest.raises(EvalDataError, match="documents folder"):
        load_kb_dir(tmp_path / "nodocs")


# --- which sets a command evaluates ---------------------------------------------------------------


def test_data_paths_come_from_options_env_or_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from evals.cli import build_parser, default_data_dir, resolve_sets

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GROUNDED_AGENT_EVAL_DATA", raising=False)
    assert default_data_dir() == Path("..") / "shared" / "eval" / "squad"
    monkeypatch.setenv("GROUNDED_AGENT_EVAL_DATA", str(tmp_path / "squad"))
    assert default_data_dir() == tmp_path / "squad"

    parse = build_parser().parse_args
    # --all without benchmarks/kbs under the cwd: a clear failure
    with pytest.raises(EvalDataError, match="run from the repository root or pass --kbs-root"):
        resolve_sets(parse(["--all"]))
    # with KBs but no SQuAD data: SQuAD skipped with a reason, every KB folder taken
    _tiny_kb(tmp_path / "benchmarks" / "kbs" / "alpha")
    _tiny_kb(tmp_path / "benchmarks" / "kbs" / "beta")
    specs, skipped = resolve_sets(parse(["--all"]))
    assert [s.label for s in specs] == ["alpha", "beta"]
    assert len(skipped) == 2 and all("GROUNDED_AGENT_EVAL_DATA" in m for m in skipped)
    assert specs[0].load().name == "alpha"
    # SQuAD files present: both SQuAD sets come first
    (tmp_path / "squad").mkdir()
    for name in ("questions.jsonl", "kb_corpus.jsonl", "heldout_corpus.jsonl"):
        (tmp_path / "squad" / name).write_text("", encoding="utf-8")
    specs, skipped = resolve_sets(parse(["--all", "--kbs-root", "benchmarks/kbs"]))
    assert [s.label for s in specs] == ["squad", "squad-swapped", "alpha", "beta"] and not skipped
    # --swapped without data, --kb-dir alone
    monkeypatch.setenv("GROUNDED_AGENT_EVAL_DATA", str(tmp_path / "nowhere"))
    with pytest.raises(EvalDataError, match="--swapped"):
        resolve_sets(parse(["--swapped"]))
    specs, _ = resolve_sets(parse(["--kb-dir", "benchmarks/kbs/alpha"]))
    assert [s.label for s in specs] == ["alpha"]


def test_eval_all_fails_clearly_without_kbs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    from evals.cli import main

    monkeypatch.chdir(tmp_path)
    assert main(["--all", "--offline"]) == 2
    assert "--kbs-root" in capsys.readouterr().err


# --- the harness's shared search ------------------------------------------------------------------


async def test_run_question_records_rank_best_score_and_cited_versions() -> None:
    from evals.harness import gold_rank, run_question, versions_of

    old = finding(source_id="fees", title="Fees", score=0.9, text="The daily fine is EUR 0.25.")
    old = old.model_copy(update={"version": "2025.1"})
    new = old.model_copy(update={"version": "2026.1", "score": 0.8})
    assert gold_rank([old, new], "fees") == 1 and gold_rank([old, new], "fees", "2026.1") == 2
    assert gold_rank([old], "fees", "2026.1") is None and gold_rank([old], None) is None
    assert versions_of(["fees", "x"], [old, new]) == ["2025.1", None]

    class Store:
        async def asearch(self, query: str, k: int = 5) -> list:
            return [old]

    rows, rank, best = await run_question(
        FEE_2026, store=Store(), graph=None, ctx=Context(sources=["knowledge_base"], choose_one_source=True),  # type: ignore[arg-type]
        systems=["thresholds_only", "plain_rag"],
    )
    assert rank is None and best == 0.9  # the gold version is not in the search
    assert {r.system for r in rows} == {"thresholds_only", "plain_rag"}
    for r in rows:
        assert r.cited == ["fees"] and r.cited_versions == ["2025.1"]
        assert r.outcome == "wrong" and r.wrong_version


def test_grounded_agent_eval_runs_the_harness_from_a_checkout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from grounded_agent.cli import main

    root = Path(__file__).resolve().parents[2]
    monkeypatch.chdir(root)
    with pytest.raises(SystemExit) as done:
        main(["eval", "--help"])
    assert done.value.code == 0
    assert "--swapped" in capsys.readouterr().out  # the harness's own options, passed through

    monkeypatch.chdir(tmp_path)  # an install without the checkout: a clear error, no traceback
    assert main(["eval", "--sample", "3"]) == 2
    err = capsys.readouterr().err
    assert "root of a clone" in err and "Traceback" not in err


BLIND_KBS = sorted((Path(__file__).resolve().parents[1] / "data").glob("blind_kb*"))


@pytest.mark.parametrize("kb_dir", BLIND_KBS, ids=lambda p: p.name)
def test_a_blind_kb_loads_as_answerable_and_near_miss_questions_on_its_own_documents(
    kb_dir: Path,
) -> None:
    from evals.data import load_blind_kb, read_kb_dir_docs

    blind = load_blind_kb(kb_dir)
    docs = {d["doc_id"]: d["title"] + " " + d["text"] for d in read_kb_dir_docs(kb_dir / "docs")}
    kinds = {q.kind for q in blind.questions}
    assert kinds == {"answerable", "unanswerable_in_kb_topic"}
    for q in blind.questions:
        assert q.gold_doc_id in docs, q.id
        if q.should_answer:  # every answer is quoted from the document it names
            assert q.answers and q.answers[0] in docs[q.gold_doc_id], q.id
        else:
            assert q.note == "near_miss" and not q.answers


def test_a_blind_kb_with_another_kind_of_question_is_refused(tmp_path: Path) -> None:
    from evals.data import load_blind_kb

    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# A\n\nText.\n", encoding="utf-8")
    (tmp_path / "questions.jsonl").write_text(
        '{"id": "x", "question": "Q?", "kind": "maybe", "doc_id": "a", "answer": null}\n',
        encoding="utf-8")
    with pytest.raises(EvalDataError, match="kind must be answerable or unstated"):
        load_blind_kb(tmp_path)
