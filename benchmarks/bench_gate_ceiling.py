"""How far any offline gate over the agent's own signals could go: an upper bound, not a result.

The offline agent answers with the rules' extract of its top passages, or abstains. Every gate it
has (relevance bands, missing names, the figure check, the judge's veto and margin) decides from a
handful of signals of the same first attempt. This replays that attempt with no gate at all: the
store's real search, the extract of every passage found, whether it is right (gold citation and the
answer's words), and the signals. Then it fits, on the very questions it reports, a logistic gate
over all the signals together and sweeps its cut-off: the best it finds is what thresholds over
these signals could reach if they were chosen with the answers known. A target above that line
needs a better reader or retriever, not other constants.

    .venv/bin/python benchmarks/bench_gate_ceiling.py [--per-kind 300] [--split test]

SQuAD: the judge's test (or tune) articles, as calibrate_judge.py samples them; the project KBs:
every question, both halves together (it fits on what it reports, so no half is spared).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # evals/ lives in the checkout
sys.path.insert(0, str(ROOT / "benchmarks"))

from evals.data import EvalQuestion, EvalSet, load_eval_set, load_kb_dir, load_swapped_set  # noqa: E402
from evals.grading import contains_answer  # noqa: E402
from evals.harness import aingest, open_eval_store  # noqa: E402
from evals.splits import select  # noqa: E402
from grounded_agent.citations import check_answer  # noqa: E402
from grounded_agent.context import Context  # noqa: E402
from grounded_agent.extractive import extractive_draft  # noqa: E402
from grounded_agent.judge import load_judge  # noqa: E402
from grounded_agent.judge.reading import read  # noqa: E402
from grounded_agent.scoring import decisive, local_confidence, signals  # noqa: E402

CALIBRATE: Any = importlib.import_module("calibrate_judge")
FEATURES = ("relevance", "top_gap", "coverage", "top_coverage", "missing_names", "local_verdict",
            "judge_quoted", "judge_best", "judge_lead", "agent_answers")
Row = dict[str, Any]


async def collect(eval_set: EvalSet, questions: list[EvalQuestion], ctx: Context) -> list[Row]:
    """Per question: its kind, whether the ungated extract is right, and every signal."""
    judge = load_judge()
    manifest = judge.manifest
    store = open_eval_store(eval_set)
    try:
        await aingest(eval_set, store, progress=False)
        rows: list[Row] = []
        for q in questions:
            found = await store.asearch(q.question, k=ctx.top_k)
            row: Row = {"id": q.id, "kind": q.kind, "note": q.note, "answers": False, "right": False,
                        "x": [0.0] * len(FEATURES)}
            if found:
                extract = extractive_draft(q.question, found)
                checked = check_answer(extract, found)
                cited = [c.source_id for c in checked.citations]
                row["answers"] = bool(cited)
                row["right"] = bool(q.should_answer and q.gold_doc_id in cited
                                    and contains_answer(checked.text, q.answers))
                s = signals(q.question, found)
                reading = read(q.question, found, judge)
                usable = [f for f in found if f.score >= ctx.low_threshold]
                verdict = decisive(q.question, usable, ctx.found_threshold, ctx.low_threshold)
                conf = verdict[0] if verdict else local_confidence(
                    q.question, usable, ctx.found_threshold, ctx.low_threshold)
                agent = (bool(usable) and conf.can_answer and conf.level in ("HIGH", "MEDIUM")
                         and reading.quoted >= manifest.veto
                         and reading.best - reading.quoted <= manifest.margin)
                gap = found[0].score - (found[1].score if len(found) > 1 else 0.0)
                row["x"] = [s.best_score, gap, s.coverage, s.top_coverage, float(bool(s.missing)),
                            float(conf.can_answer), reading.quoted, reading.best,
                            reading.best - reading.quoted, float(agent)]
                row["agent"] = agent
                if agent:  # the agent quotes from the passages it kept, which may differ
                    mine = check_answer(extractive_draft(q.question, usable), usable)
                    row["agent_right"] = bool(
                        q.should_answer and q.gold_doc_id in [c.source_id for c in mine.citations]
                        and contains_answer(mine.text, q.answers))
            rows.append(row)
        return rows
    finally:
        await store.aclose()


def fit(x: np.ndarray, y: np.ndarray, steps: int = 3000) -> np.ndarray:
    """Logistic regression by gradient descent on standardised features: a score to sort by."""
    mu, sd = x.mean(0), x.std(0) + 1e-9
    z = np.hstack([(x - mu) / sd, np.ones((len(x), 1))])
    w = np.zeros(z.shape[1])
    for _ in range(steps):
        p = 1.0 / (1.0 + np.exp(-z @ w))
        w -= 0.5 * (z.T @ (p - y) / len(y) + 1e-4 * w)
    return np.asarray(z @ w)


def auc(pos: Sequence[float], neg: Sequence[float]) -> float:
    if not pos or not neg:
        return float("nan")
    wins = sum((p > n) + 0.5 * (p == n) for p in pos for n in neg)
    return wins / (len(pos) * len(neg))


def tally(rows: list[Row], answered: Sequence[bool], right: str = "right") -> dict[str, float]:
    """Right and wrong of the answerable, abstained of each unanswerable kind, in per cent."""
    ans = [(r, a) for r, a in zip(rows, answered, strict=True) if r["kind"] == "answerable"]
    n = max(len(ans), 1)
    out = {"right": 100 * sum(a and r.get(right, False) for r, a in ans) / n,
           "wrong": 100 * sum(a and not r.get(right, False) for r, a in ans) / n}
    for label, kind in (("near_miss", "unanswerable_in_kb_topic"), ("out_of_kb", "out_of_kb")):
        pool = [a for r, a in zip(rows, answered, strict=True) if r["kind"] == kind]
        out[label] = 100 * sum(not a for a in pool) / len(pool) if pool else float("nan")
    return out


def frontier(rows: list[Row], wrong_max: float, near_min: float, ook_min: float
             ) -> tuple[dict[str, float] | None, float]:
    """The best in-sample gate meeting the limits, and its AUC for right against wrong answers."""
    x = np.array([r["x"] for r in rows], dtype=float)
    y = np.array([1.0 if r["right"] else 0.0 for r in rows])
    score = fit(x, y)
    order = np.argsort(-score)
    best: dict[str, float] | None = None
    answered = [False] * len(rows)
    for i in order:
        answered[i] = bool(rows[i]["answers"])
        t = tally(rows, answered)
        ok = (t["wrong"] <= wrong_max
              and not t["near_miss"] < near_min and not t["out_of_kb"] < ook_min)
        if ok and (best is None or t["right"] > best["right"]):
            best = t
    ans = [(s, r) for s, r in zip(score, rows, strict=True) if r["kind"] == "answerable"
           and r["answers"]]
    return best, auc([s for s, r in ans if r["right"]], [s for s, r in ans if not r["right"]])


def needed_auc(right_kept: float, wrong_kept: float) -> float:
    """The AUC a gate needs (equal-variance normal scores) to keep these shares of right and of
    wrong answers."""
    def z(p: float) -> float:
        p = min(max(p, 1e-6), 1 - 1e-6)
        lo, hi = -10.0, 10.0
        for _ in range(100):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if 0.5 * (1 + math.erf(mid / math.sqrt(2))) < p else (lo, mid)
        return lo
    d = z(right_kept) - z(wrong_kept)
    return 0.5 * (1 + math.erf(d / 2))


def line(name: str, t: dict[str, float] | None) -> str:
    if t is None:
        return f"  {name:34s} no cut-off meets the limits"
    return (f"  {name:34s} right {t['right']:5.1f}%  wrong {t['wrong']:5.1f}%  near-miss "
            f"abstained {t['near_miss']:5.1f}%  out-of-KB abstained {t['out_of_kb']:5.1f}%")


def report(name: str, rows: list[Row], target_right: float, wrong_max: float, near_min: float,
           ook_min: float) -> None:
    plain = tally(rows, [bool(r["answers"]) for r in rows])
    agent = tally(rows, [bool(r.get("agent")) for r in rows], "agent_right")
    best, fitted_auc = frontier(rows, wrong_max, near_min, ook_min)
    ans = [r for r in rows if r["kind"] == "answerable" and r["answers"]]
    n_right = sum(r["right"] for r in ans) or 1
    n_wrong = (len(ans) - sum(r["right"] for r in ans)) or 1
    print(f"== {name} ({len(rows)} questions)")
    print(line("no gate (every extract)", plain))
    print(line("the agent's gate (first attempt)", agent))
    print(line(f"best fitted gate, wrong <= {wrong_max:g}%", best))
    print(f"  fitted gate AUC, right against wrong answers: {fitted_auc:.3f}")
    if plain["right"] >= target_right:
        keep = target_right / plain["right"]
        drop = min(1.0, wrong_max * len([r for r in rows if r["kind"] == "answerable"])
                   / 100 / n_wrong)
        print(f"  {target_right:g}% right at <= {wrong_max:g}% wrong keeps {keep:.0%} of the "
              f"{n_right} right and at most {drop:.0%} of the {n_wrong} wrong extracts: "
              f"an AUC of about {needed_auc(keep, drop):.2f}")
    else:
        print(f"  {target_right:g}% right is above the no-gate extract ({plain['right']:.1f}%): "
              "only better retrieval or reading reaches it")


def dump(path: Path | None, name: str, rows: list[Row]) -> None:
    """The rows as JSON Lines, for a look at a gate fitted on one split and applied to another."""
    if path is not None:
        with path.open("a", encoding="utf-8") as out:
            for r in rows:
                out.write(json.dumps({**r, "set": name}) + "\n")


async def main_async(args: argparse.Namespace) -> int:
    ctx = Context(sources=["knowledge_base"])
    squad = load_eval_set(CALIBRATE.SQUAD / "questions.jsonl", CALIBRATE.SQUAD / "kb_corpus.jsonl")
    for name, eval_set, target in (("squad", squad, 72.0),
                                   ("squad-swapped", load_swapped_set(CALIBRATE.SQUAD), 70.0)):
        chosen = CALIBRATE.sample(select(eval_set.questions, args.split), args.per_kind)
        rows = await collect(eval_set, chosen, ctx)
        wrong_max = 8.0 if name == "squad" else 10.0
        near_min = 40.0 if name == "squad" else 0.0
        report(f"{name}, {args.split} articles", rows, target, wrong_max, near_min, 97.0)
        dump(args.rows, name, rows)
    for kb_dir in sorted(p for p in CALIBRATE.KBS.iterdir() if p.is_dir()):
        kb = load_kb_dir(kb_dir)
        rows = await collect(kb, kb.questions, ctx)
        report(kb_dir.name, rows, 50.0, 8.0, 80.0, 100.0)
        dump(args.rows, kb_dir.name, rows)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-kind", type=int, default=300)
    parser.add_argument("--split", choices=("test", "tune"), default="test")
    parser.add_argument("--rows", type=Path, help="append every question's signals to this file")
    return asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
