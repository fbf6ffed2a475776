"""Chooses the offline answer decision (grounded_agent.grounding.scoring) across several knowledge bases.

For every question of the fitting KBs it runs the store's real search (first attempt), keeps the
usable passages (relevance >= low threshold), computes `scoring.signals` and the extractive answer
the agent would give, and grades it (the gold answer in the text and the gold document cited).
A logistic model P(the extractive answer is right | signals) is fitted with every KB weighing the
same, with the answer cut-off that maximises the credited score on the fitting data (+1 right
answer or right abstention, 0 abstaining on an answerable question, -1 a wrong answer); then
simple rules are compared with the thresholds-only baseline on every KB (the rule in scoring.py is
the one that beat it everywhere).

Fitting data: the project KBs named by --fit-kbs and a SQuAD calibration sample that excludes
the report samples of seeds 0, 1 and 2 (`evaluation.calibrate.calibration_sample`). Everything
else (the other project KBs, the report samples) is for judging, with `python -m evals`.

    .venv/bin/python benchmarks/calibrate_confidence.py [--fit-kbs ...] [--squad-per-kind 200]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # evals/ and tests/ live in the checkout, not the wheel

from evals.calibrate import calibration_sample
from evals.data import EvalQuestion, EvalSet, load_eval_set, load_kb_dir
from evals.grading import contains_answer
from evals.harness import aingest, open_eval_store
from grounded_agent import scoring
from grounded_agent.context import Context
from grounded_agent.grounding.citations import check_answer
from grounded_agent.grounding.extractive import extractive_draft

sys.path.insert(0, str(Path(__file__).resolve().parent))
from calibrate_relevance import fit_logistic

SQUAD = Path(os.environ.get("GROUNDED_AGENT_EVAL_DATA", "../shared/eval/squad"))


FEATURES = ("best_score", "top_coverage", "coverage", "type_found", "names_missing")


def signal_row(s: scoring.Signals) -> list[float]:
    return [s.best_score, s.top_coverage, s.coverage, float(s.type_found), float(bool(s.missing))]


async def collect(eval_set: EvalSet, questions: list[EvalQuestion], ctx: Context
                  ) -> list[tuple[list[float], int, str]]:
    """(features, outcome, kind): outcome 1 right answer, 0 wrong answer, -1 nothing usable."""
    store = open_eval_store(eval_set)
    await aingest(eval_set, store, progress=False)
    out = []
    for q in questions:
        found = await store.asearch(q.question, k=ctx.top_k)
        usable = [f for f in found if f.score >= ctx.low_threshold]
        if not usable:
            out.append(([], -1, q.kind))
            continue
        s = scoring.signals(q.question, usable)
        checked = check_answer(extractive_draft(q.question, usable), usable)
        cited = {c.source_id for c in checked.citations}
        right = (q.kind == "answerable" and q.gold_doc_id in cited
                 and contains_answer(checked.text, q.answers))
        out.append((signal_row(s), int(right), q.kind))
    await store.aclose()
    return out


def credited(p: np.ndarray, y: np.ndarray, kinds: list[str], cut: float) -> float:
    total = 0.0
    for pi, yi, k in zip(p, y, kinds, strict=True):
        if pi >= cut:
            total += 1 if yi else -1
        else:
            total += 0 if k == "answerable" else 1
    return total / len(y)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kbs-root", type=Path, default=Path("benchmarks/kbs"))
    ap.add_argument("--fit-kbs", nargs="*",
                    default=["northwind_it", "harbor_library", "clearwater_utility"])
    ap.add_argument("--judge-kbs", nargs="*", default=["tallyhub_support", "lindenpark_clinic"])
    ap.add_argument("--squad-per-kind", type=int, default=200)
    args = ap.parse_args()
    ctx = Context(sources=["knowledge_base"])

    async def run() -> dict[str, list[tuple[list[float], int, str]]]:
        data: dict[str, list[tuple[list[float], int, str]]] = {}
        for name in [*args.fit_kbs, *args.judge_kbs]:
            es = load_kb_dir(args.kbs_root / name)
            data[name] = await collect(es, es.questions, ctx)
        if (SQUAD / "questions.jsonl").exists() and args.squad_per_kind > 0:
            es = load_eval_set(SQUAD / "questions.jsonl", SQUAD / "kb_corpus.jsonl")
            sample = calibration_sample(es.questions, args.squad_per_kind, 5, [0, 1, 2])
            data["squad_calibration"] = await collect(es, sample, ctx)
        return data

    data = asyncio.run(run())
    fit_names = [n for n in data if n in args.fit_kbs or n == "squad_calibration"]
    rows = [(n, f, y, k) for n in fit_names for f, y, k in data[n] if f]
    per = {n: sum(1 for r in rows if r[0] == n) for n in fit_names}
    x = np.array([r[1] for r in rows])
    y = np.array([float(r[2]) for r in rows])
    sw = np.array([len(rows) / (len(per) * per[r[0]]) for r in rows])
    w = fit_logistic(x, y, sw)
    print(f"fitted on {len(rows)} questions with usable passages, per KB {per}")
    for n, v in zip([*FEATURES, "intercept"], w, strict=True):
        print(f"  {n:>16s} = {v:.3f}")

    def probs(name: str) -> tuple[np.ndarray, np.ndarray, list[str]]:
        items = data[name]
        p = np.array([1 / (1 + np.exp(-(np.dot(w[:-1], f) + w[-1]))) if f else 0.0
                      for f, _, _ in items])
        return p, np.array([max(0, o) for _, o, _ in items]), [k for _, _, k in items]

    cuts = np.arange(0.2, 0.96, 0.02)
    mean_fit = [np.mean([credited(*probs(n), c) for n in fit_names]) for c in cuts]
    best = float(cuts[int(np.argmax(mean_fit))])
    print(f"answer cut-off maximising the mean credited score over the fitting KBs: {best:.2f}")
    print(f"\n{'kb':20s} {'':6s} credited at cut {best:.2f} (answer-all {0.0:.2f} for reference)")
    for name in data:
        p, yy, kinds = probs(name)
        role = "fit" if name in fit_names else "JUDGE"
        ans = sum(1 for k in kinds if k == "answerable")
        right = sum(1 for pi, yi in zip(p, yy, strict=True) if pi >= best and yi)
        could = int(yy.sum())
        print(f"{name:20s} {role:6s} {credited(p, yy, kinds, best):+.3f} "
              f"(answer-all {credited(p, yy, kinds, 0.0):+.3f}); right answers {right}/{ans} "
              f"(answering all: {could}); p of right ones: "
              f"{np.percentile(p[yy == 1], [10, 50, 90]).round(2) if could else '-'}")
    print("\nRULES (answer if ...): credited / right answers / right abstentions")
    idx = {n: i for i, n in enumerate(FEATURES)}

    def rule(name: str, f: list[float]) -> bool:
        if not f:
            return False
        best, top, typ, miss = (f[idx["best_score"]], f[idx["top_coverage"]],
                                f[idx["type_found"]], f[idx["names_missing"]])
        if name == "thresholds_only":
            return best >= 0.75
        veto = typ < 0.5 or miss > 0.5
        if name == "found_names_veto":
            return best >= 0.75 and miss < 0.5
        if name == "found_type_veto":
            return best >= 0.75 and typ > 0.5
        if name == "found_with_vetoes":
            return best >= 0.75 and not veto
        if name.startswith("vetoes+medium"):
            c = float(name.split("@")[1])
            return not veto and (best >= 0.75 or top >= c)
        raise ValueError(name)

    for name in ["thresholds_only", "found_names_veto", "found_type_veto", "found_with_vetoes", "vetoes+medium@0.5",
                 "vetoes+medium@0.7", "vetoes+medium@0.9"]:
        cells = []
        for kb in data:
            items = data[kb]
            cr = ra = ab = 0.0
            for f, o, k in items:
                if rule(name, f):
                    cr += 1 if o == 1 else -1
                    ra += o == 1
                else:
                    cr += 0 if k == "answerable" else 1
                    ab += k != "answerable"
            cells.append(f"{kb[:10]} {cr / len(items):+.2f}/{int(ra)}/{int(ab)}")
        print(f"{name:22s} " + "  ".join(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
