"""The written support pages the offline judge also trains on (scripts/judge_data): well-formed,
and turned into the pairs the training script says -- a near-miss question gives only negatives,
so a page that does not state the asked fact can never teach the judge that it does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.benchmarks import ROOT, load_script

TRAIN = load_script(ROOT / "scripts" / "train_judge.py")
PAGES = ROOT / "scripts" / "judge_data"
UNSEEN = ROOT / "benchmarks" / "judge_pages"  # never trained on: bench_judge_pages.py reads them


@pytest.mark.parametrize("folder", [PAGES, UNSEEN], ids=["training", "unseen"])
def test_every_page_is_well_formed(folder: Path) -> None:
    files = sorted(folder.glob("*.jsonl"))
    assert files, f"{folder} holds no pages"
    ids = set()
    for path in files:
        for line in path.read_text(encoding="utf-8").splitlines():
            doc = json.loads(line)
            assert doc["doc_id"] not in ids
            ids.add(doc["doc_id"])
            assert doc["title"].strip() and len(doc["sentences"]) >= 3
            kinds = {bool(q["answers"]) for q in doc["questions"]}
            assert kinds == {True, False}, f"{doc['doc_id']}: answerable and near-miss both"
            for q in doc["questions"]:
                assert q["question"].strip()
                assert all(0 <= i < len(doc["sentences"]) for i in q["answers"])


def test_the_unseen_pages_are_not_training_pages() -> None:
    trained = {line for p in PAGES.glob("*.jsonl") for line in p.read_text().splitlines()}
    unseen = {line for p in UNSEEN.glob("*.jsonl") for line in p.read_text().splitlines()}
    assert unseen and not trained & unseen


def test_probe_documents_stay_out_of_training(tmp_path: Path) -> None:
    docs = [{"doc_id": f"d{i}", "title": "t", "sentences": ["a"], "questions": []}
            for i in range(5)]
    (tmp_path / "x.jsonl").write_text("\n".join(json.dumps(d) for d in docs) + "\n")
    train, probe = TRAIN.read_pages(tmp_path)
    assert [d["doc_id"] for d in probe] == ["d3", "d4"]
    assert [d["doc_id"] for d in train] == ["d0", "d1", "d2"]
    assert TRAIN.read_pages(tmp_path / "missing") == ([], [])


def test_pairs_of_a_page() -> None:
    doc = {
        "title": "Riverside pool",
        "sentences": [
            "The Riverside pool opens at 6:30 on weekdays.",
            "Adults pay 5 euros for a swim at the Riverside pool.",
            "Children under six swim free at the Riverside pool.",
            "The sauna is closed in August.",
        ],
        "questions": [
            {"question": "How much does a swim at the Riverside pool cost an adult?", "answers": [1]},
            {"question": "Does the Riverside pool offer a monthly pass?", "answers": []},
        ],
    }
    pairs = TRAIN.page_pairs([doc], answer_negatives=2, near_miss_negatives=3)
    first = [p for p in pairs if p.question.startswith("How much")]
    assert [(p.sentence, p.label) for p in first if p.label == 1.0] == [(doc["sentences"][1], 1.0)]
    assert len([p for p in first if p.label == 0.0]) == 2
    assert doc["sentences"][1] not in {p.sentence for p in first if p.label == 0.0}
    near = [p for p in pairs if p.question.startswith("Does")]
    assert len(near) == 3 and all(p.label == 0.0 for p in near)
    # the closest sentences by shared words come first: the sauna shares none
    assert doc["sentences"][3] not in {p.sentence for p in near}
