"""`python -m evals` end to end on a tiny SQuAD sample: real embeddings, real embedded store.

Uses: ../shared/eval/squad (skipped when absent), all-MiniLM-L6-v2, an embedded PostgreSQL in a
temporary home, its own table. The knowledge base is cut down to the sampled questions' gold
paragraphs plus a few others, so ingestion takes seconds, not the full corpus's minute.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from evals.data import read_jsonl, stratified_sample
from evals.splits import select
from tests.conftest import squad_path

pytestmark = [pytest.mark.integration, pytest.mark.e2e]


def test_eval_runs_end_to_end_on_three_questions_per_kind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from evals.cli import main
    from evals.data import load_jsonl_set
    from grounded_agent.store.server import stop_embedded_server

    questions, kb = squad_path("questions.jsonl"), squad_path("kb_corpus.jsonl")
    full = load_jsonl_set(questions, kb)
    # from the articles the offline judge was neither trained nor tuned on: the others' questions
    # the evaluation drops by default (--judge-split test)
    sample = stratified_sample(select(full.questions, "test"), 3, seed=0)
    docs = read_jsonl(kb)
    gold = {q.gold_doc_id for q in sample} & {
        d["doc_id"] for d in docs
    }  # out_of_kb golds are not in it
    extra = random.Random(0).sample([d for d in docs if d["doc_id"] not in gold], 12)
    small_kb = tmp_path / "kb.jsonl"
    small_kb.write_text(
        "".join(json.dumps(d) + "\n" for d in docs if d["doc_id"] in gold)
        + "".join(json.dumps(d) + "\n" for d in extra),
        encoding="utf-8",
    )
    small_q = tmp_path / "questions.jsonl"
    ids = {q.id for q in sample}
    small_q.write_text(
        "".join(
            line
            for line in questions.read_text(encoding="utf-8").splitlines(True)
            if json.loads(line)["id"] in ids
        ),
        encoding="utf-8",
    )

    home = tmp_path / "home"
    monkeypatch.setenv("GROUNDED_AGENT_HOME", str(home))
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.delenv("GROUNDED_AGENT_KB_TABLE", raising=False)
    report_dir = tmp_path / "report"
    args = [
        "--questions",
        str(small_q),
        "--kb",
        str(small_kb),
        "--sample",
        "3",
        "--seed",
        "0",
        "--json",
        "--report",
        str(report_dir),
        "--concurrency",
        "2",
    ]
    try:
        assert main(args) == 0
        report = json.loads(capsys.readouterr().out)
        # a second run reuses the table: nothing is embedded again
        assert main([*args, "--no-plots", "--systems", "thresholds_only"]) == 0
        again = json.loads(capsys.readouterr().out)
    finally:
        stop_embedded_server(home)

    assert report["meta"]["mode"] == "offline"
    assert report["meta"]["n_questions"] == 9
    assert report["meta"]["ingest"]["added"] == len(gold) + 12
    assert (
        again["meta"]["ingest"]["added"] == 0
        and again["meta"]["ingest"]["skipped"] == len(gold) + 12
    )
    assert again["meta"]["table"] == report["meta"]["table"]
    assert set(report["systems"]) == {"full_graph", "thresholds_only", "plain_rag"}
    for system in report["systems"].values():
        for kind in ("answerable", "unanswerable_in_kb_topic", "out_of_kb"):
            assert system["by_kind"][kind]["n"] == 3
    # plain RAG never abstains: every unanswerable question is a hallucination
    assert report["systems"]["plain_rag"]["by_kind"]["out_of_kb"]["hallucination_rate"] == 1.0
    assert report["systems"]["full_graph"]["by_kind"]["answerable"]["llm_calls_mean"] == 0
    assert (report_dir / "report.json").exists() and (report_dir / "table.txt").exists()
    rows = (report_dir / "questions.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(rows) == 9  # the second run wrote only thresholds_only rows over the same directory
    assert {Path(p).name for p in report["meta"]["plots"]} == {
        "outcomes.png",
        "scores.png",
        "relevance.png",
    }
