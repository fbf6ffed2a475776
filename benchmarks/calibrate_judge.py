"""Chooses the offline judge's answer threshold on its tuning split, and reports it on the test split.

For each question it runs what the offline agent runs before deciding: the store's real search
(first attempt), the passages at or above the low relevance threshold, the judge's reading of
them. It records the best sentence's probability and whether the answer built from that sentence
would be right (the gold answer in it and the gold document cited). The threshold that maximises
the credited score (+1 a right answer or a right abstention, 0 abstaining on an answerable
question, -1 a wrong answer) over the tuning articles of SQuAD and swapped SQuAD, every kind
weighing the same, is written to the judge's manifest; the same numbers on the test articles and
on every project KB (never used for the choice) are printed beside it.

    .venv/bin/python benchmarks/calibrate_judge.py [--per-kind 300] [--write]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # evals/ lives in the checkout

from evals.data import EvalQuestion, EvalSet, load_eval_set, load_kb_dir, load_swapped_set
from evals.grading import contains_answer
from evals.harness import aingest, open_eval_store
from evals.splits import select
from grounded_agent.context import Context
from grounded_agent.judge import MODEL_DIR, load_judge
from grounded_agent.reading import read

SQUAD = Path(os.environ.get("GROUNDED_AGENT_EVAL_DATA", "../shared/eval/squad"))
KBS = Path("benchmarks/kbs")
Row = tuple[str, float, bool, float]
"""(kind, best judge probability or -1 when nothing was usable, the answer would be right, the
best relevance of the search)."""


async def collect(eval_set: EvalSet, questions: list[EvalQuestion], ctx: Context) -> list[Row]:
    judge = load_judge()
    store = open_eval_store(eval_set)
    try:
        await aingest(eval_set, store, progress=False)
        rows: list[Row] = []
        for q in questions:
            found = await store.asearch(q.question, k=ctx.top_k)
            usable = [f for f in found if f.score >= ctx.low_threshold]
            best = read(judge, q.question, usable)
            relevance = max((f.score for f in found), default=0.0)
            if not best:
                rows.append((q.kind, -1.0, False, relevance))
                continue
            cited = usable[best[0].index].source_id
            right = (q.should_answer and cited == q.gold_doc_id
                     and contains_answer(best[0].sentence, q.answers))
            rows.append((q.kind, best[0].score, right, relevance))
        return rows
    finally:
        await store.aclose()


def credited(rows: list[Row], t: float) -> dict[str, float]:
    """Mean credited score per kind at threshold t, and their mean."""
    by_kind: dict[str, list[int]] = defaultdict(list)
    for kind, score, right, _ in rows:
        answers = score >= t
        if kind == "answerable":
            by_kind[kind].append((1 if right else -1) if answers else 0)
        else:
            by_kind[kind].append(-1 if answers else 1)
    out = {k: sum(v) / len(v) for k, v in by_kind.items()}
    out["mean"] = sum(out.values()) / len(out) if out else 0.0
    return out


def rates(rows: list[Row], t: float) -> dict[str, float]:
    ans = [(s, r) for k, s, r, _ in rows if k == "answerable"]
    n = len(ans) or 1
    out = {"right": sum(1 for s, r in ans if s >= t and r) / n,
           "wrong": sum(1 for s, r in ans if s >= t and not r) / n}
    for kind in ("unanswerable_in_kb_topic", "out_of_kb", "near_miss", "off_topic"):
        kept = [s for k, s, _, _ in rows if k == kind]
        if kept:
            out[f"{kind} abstained"] = sum(1 for s in kept if s < t) / len(kept)
    return out


def sample(questions: list[EvalQuestion], per_kind: int) -> list[EvalQuestion]:
    import random

    by_kind: dict[str, list[EvalQuestion]] = defaultdict(list)
    for q in questions:
        by_kind[q.kind].append(q)
    out: list[EvalQuestion] = []
    for kind in sorted(by_kind):
        pool = sorted(by_kind[kind], key=lambda q: q.id)
        out += random.Random(7).sample(pool, min(per_kind, len(pool)))
    return out


async def main_async(args: argparse.Namespace) -> int:
    ctx = Context(sources=["knowledge_base"])
    squad = load_eval_set(SQUAD / "questions.jsonl", SQUAD / "kb_corpus.jsonl")
    swapped = load_swapped_set(SQUAD)
    tune: list[Row] = []
    test: dict[str, list[Row]] = {}
    for name, eval_set in (("squad", squad), ("squad-swapped", swapped)):
        tune += await collect(eval_set, sample(select(eval_set.questions, "tune"), args.per_kind),
                              ctx)
        test[name] = await collect(eval_set, sample(select(eval_set.questions, "test"),
                                                    args.per_kind), ctx)
        print(f"{name}: read", file=sys.stderr, flush=True)
    for kb_dir in args.kb_dirs:
        kb = load_kb_dir(kb_dir)
        test[kb_dir.name] = await collect(kb, kb.questions, ctx)
        print(f"{kb_dir.name}: read", file=sys.stderr, flush=True)
    if args.dump:
        args.dump.write_text(json.dumps({"tune": tune, **test}))
    for t in (0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8):
        print(f"t={t:.2f} " + " | ".join(
            f"{name} " + " ".join(f"{v:.0%}" for v in rates(rows, t).values())
            for name, rows in {"tune": tune, **test}.items()))
    candidates = sorted({round(s, 3) for _, s, _, _ in tune if s >= 0} | {0.5})
    best_t = max(candidates, key=lambda t: credited(tune, t)["mean"])
    report: dict[str, Any] = {"threshold": best_t, "tune": {"credited": credited(tune, best_t),
                                                            "rates": rates(tune, best_t)}}
    print(f"threshold {best_t:.3f} (tuning articles, {len(tune)} questions): "
          f"credited {credited(tune, best_t)}")
    for name, rows in test.items():
        report[name] = {"credited": credited(rows, best_t), "rates": rates(rows, best_t)}
        shown = ", ".join(f"{k} {v:.1%}" for k, v in rates(rows, best_t).items())
        print(f"{name:22s} credited {credited(rows, best_t)['mean']:+.3f}  {shown}")
    if args.write:
        path = MODEL_DIR / "manifest.json"
        manifest = json.loads(path.read_text())
        manifest["threshold"] = best_t
        manifest["threshold_chosen_by"] = (
            "benchmarks/calibrate_judge.py: the agent's first-attempt reading on the tuning "
            f"articles of SQuAD and swapped SQuAD, {args.per_kind} questions per kind each")
        manifest["calibration"] = report
        path.write_text(json.dumps(manifest, indent=2) + "\n")
        print(f"written to {path}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-kind", type=int, default=300)
    parser.add_argument("--dump", type=Path, default=None, help="write every row as JSON")
    parser.add_argument("--write", action="store_true", help="store the threshold in the manifest")
    args = parser.parse_args()
    args.kb_dirs = sorted(p for p in KBS.iterdir() if (p / "questions.jsonl").is_file())
    return asyncio.run(main_async(args))


if __name__ == "__main__":
    sys.exit(main())
