"""Chooses the offline judge's veto on tuning data, and reports it on data it was not chosen on.

For each question it replays what the offline agent decides on its first attempt: the store's
real search, the passages at or above the low relevance threshold, the local confidence verdict
and the extractive answer; then the judge's probability for the sentences that answer would
quote, and its best probability for any sentence of the passages the rules chose among. A veto t
turns an answer into an abstention when the first is below t; a margin m does so when the second
exceeds the first by more than m (the two readers disagree on which sentence answers).

Tuning data: the judge's tune articles of SQuAD and swapped SQuAD (300 questions per kind) and
one half of each project KB (questions whose id hashes even, `evals.splits.kb_half`). The veto
chosen is the largest credited gain over the tuning sets (each set weighing the same) among the
pairs (veto, margin) under which no tuning set loses credit: the judge is meant to remove wrong
answers, not to trade one knowledge base's right answers for another's; among equal gains, the one
that intervenes least (lower veto, wider margin). Test data, printed beside it: the judge's
test articles and the other half of each project KB.

    .venv/bin/python benchmarks/calibrate_judge.py [--per-kind 300] [--write]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
from collections import defaultdict
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # evals/ lives in the checkout

from evals.data import EvalQuestion, EvalSet, load_eval_set, load_kb_dir, load_swapped_set
from evals.grading import contains_answer
from evals.harness import ingested
from evals.splits import kb_half, select
from grounded_agent.context import Context
from grounded_agent.grounding.citations import check_answer
from grounded_agent.grounding.extractive import extractive_draft
from grounded_agent.grounding.judge import MODEL_DIR, load_judge
from grounded_agent.grounding.judge.gate import first_attempt
from grounded_agent.grounding.judge.reading import read
from grounded_agent.schemas import Finding

SQUAD = Path(os.environ.get("GROUNDED_AGENT_EVAL_DATA", "../shared/eval/squad"))
KBS = Path("benchmarks/kbs")
TUNING_KBS = ("clearwater_utility", "harbor_library", "lindenpark_clinic", "northwind_it",
              "pinecrest_tenants", "tallyhub_support")
"""The project KBs whose halves tune the veto; a KB written after the judge was frozen is measured
with `python -m evals`, never tuned on."""
VETOES = (0.0, 0.01, 0.02, 0.03, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5)
MARGINS = (0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.7, 1.0)
Cut = tuple[float, float]
OFF: Cut = (0.0, 1.0)
Row = dict[str, Any]


def graded(q: EvalQuestion, evidence: list[Finding]) -> tuple[bool, bool]:
    """Whether the offline extract of these passages cites any, and whether it is right (the gold
    citation and the answer's words)."""
    checked = check_answer(extractive_draft(q.question, evidence), evidence)
    cited = [c.source_id for c in checked.citations]
    right = q.should_answer and q.gold_doc_id in cited and contains_answer(checked.text, q.answers)
    return bool(cited), bool(right)


async def first_attempts(eval_set: EvalSet, questions: list[EvalQuestion], ctx: Context
                         ) -> AsyncIterator[tuple[EvalQuestion, list[Finding], bool, bool]]:
    """Each question's first attempt replayed on the set's store: the passages the offline agent
    keeps, whether the rules' extract of them cites any, and whether it is right."""
    async with ingested(eval_set) as store:
        for q in questions:
            found = await store.asearch(q.question, k=ctx.top_k)
            usable, _, answers = first_attempt(q.question, found, ctx)
            right = False
            if answers:
                answers, right = graded(q, usable)
            yield q, usable, answers, right


async def collect(eval_set: EvalSet, questions: list[EvalQuestion], ctx: Context) -> list[Row]:
    """Per question: kind, whether the rules answer, whether that answer is right, and the judge's
    reading (its best probability for the quoted sentences, and for any candidate sentence)."""
    judge = load_judge()
    rows: list[Row] = []
    async for q, usable, answers, right in first_attempts(eval_set, questions, ctx):
        row: Row = {"id": q.id, "kind": q.kind, "answers": answers, "right": right, "j": 0.0,
                    "b": 0.0}
        if answers:
            reading = read(q.question, usable, judge)
            row["j"], row["b"] = reading.quoted, reading.best
        rows.append(row)
    return rows


def stands(r: Row, cut: Cut) -> bool:
    veto, margin = cut
    return bool(r["answers"]) and r["j"] >= veto and r["b"] - r["j"] <= margin


def credited(rows: list[Row], cut: Cut) -> float:
    """The evaluation's mean credited score with the judge's cut-offs applied."""
    total = 0
    for r in rows:
        answers = stands(r, cut)
        if r["kind"] == "answerable":
            total += (1 if r["right"] else -1) if answers else 0
        else:
            total += -1 if answers else 1
    return total / max(len(rows), 1)


def rates(rows: list[Row], cut: Cut) -> str:
    ans = [r for r in rows if r["kind"] == "answerable"]
    other = [r for r in rows if r["kind"] != "answerable"]
    kept = [r for r in ans if stands(r, cut)]
    right = sum(1 for r in kept if r["right"])
    wrong = len(kept) - right
    abstained = sum(1 for r in other if not stands(r, cut))
    n, m = len(ans) or 1, len(other) or 1
    return (f"answerable {right / n:.1%} right / {wrong / n:.1%} wrong, "
            f"unanswerable {abstained / m:.1%} abstained")


def sample(questions: list[EvalQuestion], per_kind: int) -> list[EvalQuestion]:
    by_kind: dict[str, list[EvalQuestion]] = defaultdict(list)
    for q in questions:
        by_kind[q.kind].append(q)
    out: list[EvalQuestion] = []
    for kind in sorted(by_kind):
        pool = sorted(by_kind[kind], key=lambda q: q.id)
        out += random.Random(7).sample(pool, min(per_kind, len(pool)))
    return out


def choose(tune: dict[str, list[Row]]) -> Cut:
    """The largest mean gain among the cut-offs under which no tuning set loses credit."""
    base = {name: credited(rows, OFF) for name, rows in tune.items()}

    def gain(cut: Cut) -> tuple[float, float]:
        deltas = [credited(rows, cut) - base[name] for name, rows in tune.items()]
        return min(deltas), sum(deltas) / len(deltas)

    safe = [(v, m) for v in VETOES for m in MARGINS if gain((v, m))[0] >= 0.0]
    return max(safe, key=lambda c: (round(gain(c)[1], 9), -c[0], c[1]))


async def main_async(args: argparse.Namespace) -> int:
    ctx = Context(sources=["knowledge_base"])
    tune: dict[str, list[Row]] = {}
    test: dict[str, list[Row]] = {}
    squad = load_eval_set(SQUAD / "questions.jsonl", SQUAD / "kb_corpus.jsonl")
    for name, eval_set in (("squad", squad), ("squad-swapped", load_swapped_set(SQUAD))):
        for split, into in (("tune", tune), ("test", test)):
            chosen = sample(select(eval_set.questions, split), args.per_kind)
            into[name] = await collect(eval_set, chosen, ctx)
        print(f"{name}: read", file=sys.stderr, flush=True)
    for kb_dir in args.kb_dirs:
        kb = load_kb_dir(kb_dir)
        rows = await collect(kb, kb.questions, ctx)
        tune[kb_dir.name] = [r for r in rows if kb_half(r["id"]) == "tune"]
        test[kb_dir.name] = [r for r in rows if kb_half(r["id"]) == "test"]
        print(f"{kb_dir.name}: read", file=sys.stderr, flush=True)
    cut = choose(tune)
    veto, margin = cut
    report: dict[str, Any] = {"veto": veto, "margin": margin, "tune": {}, "test": {}}
    for label, sets in (("tune", tune), ("test", test)):
        print(f"== {label} (credited without the judge -> with veto {veto}, margin {margin})")
        for name, rows in sets.items():
            before, after = credited(rows, OFF), credited(rows, cut)
            report[label][name] = {"questions": len(rows), "credited_without": round(before, 4),
                                   "credited_with": round(after, 4)}
            print(f"{name:22s} {len(rows):4d} q  {before:+.3f} -> {after:+.3f}   "
                  f"{rates(rows, OFF)}  ->  {rates(rows, cut)}")
    if args.write:
        path = MODEL_DIR / "manifest.json"
        manifest = json.loads(path.read_text())
        manifest["veto"] = veto
        manifest["margin"] = margin
        manifest["veto_chosen_by"] = (
            "benchmarks/calibrate_judge.py: the offline agent's first-attempt decisions on the "
            f"judge's tune articles of SQuAD and swapped SQuAD ({args.per_kind} per kind) and the "
            "tuning half of each project KB; the largest mean gain with no tuning set losing "
            "(veto and margin together)")
        manifest["veto_calibration"] = report
        path.write_text(json.dumps(manifest, indent=2) + "\n")
        print(f"written to {path}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-kind", type=int, default=300)
    parser.add_argument("--write", action="store_true", help="store the veto in the manifest")
    args = parser.parse_args()
    args.kb_dirs = [KBS / name for name in TUNING_KBS]
    return asyncio.run(main_async(args))


if __name__ == "__main__":
    sys.exit(main())
