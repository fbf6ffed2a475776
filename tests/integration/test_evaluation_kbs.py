"""`python -m evals --all` on one of the project's own knowledge bases, offline, end to end.

Uses: benchmarks/kbs/<name> (skipped when the project has none yet), all-MiniLM-L6-v2, the
session's embedded PostgreSQL, the KB's own table. SQuAD is pointed at a folder that does not
exist, so `--all` runs the one KB and says why it skipped the SQuAD sets. About 30-45 s.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from grounded_agent.store import StoreSettings

pytestmark = [pytest.mark.integration, pytest.mark.e2e, pytest.mark.slow]

KBS = Path(__file__).resolve().parents[2] / "benchmarks" / "kbs"


def _one_kb() -> Path:
    kbs = sorted(p for p in KBS.glob("*") if (p / "questions.jsonl").exists() and (p / "docs").is_dir())
    if not kbs:
        pytest.skip(f"no project knowledge base in {KBS}")
    preferred = [p for p in kbs if p.name == "harbor_library"]
    return (preferred or kbs)[0]


def test_eval_all_on_a_project_kb_prints_one_table_per_kb(
    store_settings: StoreSettings,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from evals.cli import main
    from evals.data import load_kb_dir

    kb = _one_kb()
    root = tmp_path / "kbs"
    root.mkdir()
    (root / kb.name).symlink_to(kb, target_is_directory=True)
    monkeypatch.setenv("GROUNDED_AGENT_EVAL_DATA", str(tmp_path / "no-squad-here"))
    monkeypatch.delenv("GROUNDED_AGENT_KB_TABLE", raising=False)
    report_dir = tmp_path / "report"
    code = main(["--all", "--kbs-root", str(root), "--offline", "--json",
                 "--report", str(report_dir)])
    out, err = capsys.readouterr()
    assert code == 0, err
    result = json.loads(out)
    assert len(result["skipped"]) == 2 and "SQuAD" in result["skipped"][0]
    assert list(result["sets"]) == [kb.name]
    report = result["sets"][kb.name]

    expected = load_kb_dir(kb)
    assert report["meta"]["n_questions"] == len(expected.questions)
    assert report["meta"]["mode"] == "offline" and report["meta"]["sampled"] is False
    assert report["meta"]["ingest"]["errors"] == 0
    assert set(report["systems"]) == {"full_graph", "thresholds_only", "plain_rag"}
    kinds = {q.kind for q in expected.questions}
    notes = {q.note for q in expected.questions if q.note}
    for m in report["systems"].values():
        assert set(m["by_kind"]) == kinds
        assert set(m["by_note"]) == notes
        assert -1.0 <= m["credited_score_all"] <= 1.0
    assert set(report["criterion"]) == {"full_graph", "thresholds_only", "beats"}
    assert len(report["reliability"]) == 10
    assert sum(b["n"] for b in report["reliability"]) == len(expected.questions)
    bands = report["relevance_bands"]
    assert bands["cuts"] == [0.55, 0.75]
    assert set(bands["counts"]) == {"answerable", "near_miss", "out_of_kb"}
    for group, kind in (("near_miss", "unanswerable_in_kb_topic"), ("out_of_kb", "out_of_kb")):
        assert sum(bands["counts"][group]) == sum(1 for q in expected.questions if q.kind == kind)
    # answerable questions count only with their gold document retrieved
    answerable = sum(1 for q in expected.questions if q.kind == "answerable")
    assert 0 < sum(bands["counts"]["answerable"]) <= answerable
    # the table on stderr, the files in the KB's own folder of the report
    assert f"== {kb.name}:" in err and "mean" in err and "credited" in err
    assert "per note" in err
    run_dir = report_dir / kb.name
    for name in ("report.json", "table.txt", "questions.jsonl", "reliability.png"):
        assert (run_dir / name).exists(), name
    graded = (run_dir / "questions.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(graded) == 3 * len(expected.questions)
