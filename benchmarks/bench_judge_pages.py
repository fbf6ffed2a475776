"""How well the offline judge reads support pages it never saw: 84 invented pages by seven
writers other than those of its training pages, in other domains (benchmarks/judge_pages, written
like scripts/judge_data; never trained on). Per file and in all: answerable and near-miss
questions, whether the page's best sentence by the judge is the answering one, the AUC of the best
sentence's score between answerable and near-miss questions, and, at the manifest's veto, the
share of each kind whose best sentence reaches it.

    python benchmarks/bench_judge_pages.py [--model DIR] [--json]
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path
from typing import Any

from grounded_agent.grounding.judge import MODEL_DIR, Judge, Manifest

ROOT = Path(__file__).resolve().parents[1]
PAGES = ROOT / "benchmarks" / "judge_pages"
sys.path.insert(0, str(ROOT / "scripts"))  # scripts/ lives in the checkout, beside benchmarks/
TRAIN: Any = importlib.import_module("train_judge")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=MODEL_DIR)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    judge = Judge.from_dir(args.model)
    veto = Manifest.read(args.model).veto
    rows = []
    files = sorted(PAGES.glob("*.jsonl"))
    for label, docs in [(p.stem, TRAIN.read_jsonl(p)) for p in files] + [
        ("all", [d for p in files for d in TRAIN.read_jsonl(p)])
    ]:
        rows.append({"pages": label, "documents": len(docs),
                     **TRAIN.page_probe(judge, docs, veto)})
    if args.json:
        print(json.dumps({"model": str(args.model), "veto": veto, "rows": rows}, indent=2))
        return 0
    print(f"judge {args.model} (veto {veto})")
    print(f"{'pages':6s} {'docs':>4s} {'ans':>4s} {'near':>4s} {'best holds':>10s} {'AUC':>6s} "
          f"{'ans>=veto':>9s} {'near>=veto':>10s}")
    for r in rows:
        print(f"{r['pages']:6s} {r['documents']:4d} {r['answerable']:4d} {r['near_miss']:4d} "
              f"{r['best_sentence_holds_answer']:10.1%} {r['auc']:6.3f} "
              f"{r['answerable_reaching_veto']:9.1%} {r['near_miss_reaching_veto']:10.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
