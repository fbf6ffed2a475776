"""How far any offline gate over the agent's own signals could go, and whether one fitted on
tuning data beats the agent's.

The offline agent answers with the rules' extract of its top passages, or abstains. Every gate it
has (relevance bands, missing names, the figure check, the judge's veto and margin) decides from a
handful of signals of the same first attempt. This replays that attempt with no gate at all: the
store's real search, the passages the graph's scoring step reads of it (check_grounding's evidence:
those at or above the low relevance threshold; until 2026-12-07 every passage found, which the
graph never reads), the extract of them, whether it is right (gold citation and the answer's
words), and the signals (grounding/judge/gate.py, shared with the agent).

1. The ceiling: on each held-out set it fits a logistic gate over all the signals together on that
   very set and sweeps its cut-off. The best it finds is what thresholds over these signals could
   reach if they were chosen with the answers known: an upper bound, not a result. A target above
   it needs a better reader or retriever, not other constants.
2. The honest version: the same gate fitted on the tuning data only (the judge's tune articles of
   SQuAD and swapped SQuAD, the tuning half of six project KBs, each set weighing the same), its
   cut-off chosen there by calibrate_judge.py's rule (the largest mean credited gain over the
   agent's own gate with no tuning set losing), then reported on the held-out sets.

    .venv/bin/python benchmarks/bench_gate_ceiling.py [--per-kind 300] [--rows FILE | --load FILE]
        [--local-url URL] [--tune-only] [--write-gate] [--squad-seed N] [--blind]

With --local-url (a `scripts/local_model.py serve --model qwen2.5-coder-1.5b-instruct --judge`
server, issue 47), the local judge reads the same sentences as the shipped one and its quoted,
best and lead scores join the signals; every gate is then fitted twice on the same questions,
without and with them, so the two AUCs compare like for like. The local judge reads only where
the extract answers: about 3 s a question on two cores.

SQuAD: the judge's test and tune articles, sampled as calibrate_judge.py samples them; the project
KBs: every question, split into halves by `evals.splits.kb_half` (alpenrail_travel, written blind,
is held out whole). About 10 minutes on two quiet cores.
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
from statistics import NormalDist
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # evals/ lives in the checkout
sys.path.insert(0, str(ROOT / "benchmarks"))

from evals.data import (  # noqa: E402
    EvalQuestion,
    EvalSet,
    load_blind_kb,
    load_eval_set,
    load_kb_dir,
    load_swapped_set,
    stratified_sample,
)
from evals.grading import Outcome, credited_score  # noqa: E402
from evals.harness import ingested  # noqa: E402
from evals.splits import kb_half, select  # noqa: E402
from grounded_agent.context import Context  # noqa: E402
from grounded_agent.grounding.judge import SentenceJudge, load_judge  # noqa: E402
from grounded_agent.grounding.judge.gate import (  # noqa: E402
    FEATURES,
    GATE,
    LOCAL_FEATURES,
    LocalGate,
    agent_signals,
    first_attempt,
    local_signals,
)
from grounded_agent.nodes.check_grounding import collect_evidence  # noqa: E402
from grounded_agent.schemas import Finding, ToolOutcome  # noqa: E402

sys.path.insert(0, str(ROOT / "scripts"))
CALIBRATE: Any = importlib.import_module("calibrate_judge")
TRAIN: Any = importlib.import_module("train_judge")  # scripts/, beside benchmarks/
LOCAL: Any = importlib.import_module("bench_local_judge")
Row = dict[str, Any]


async def collect(
    name: str, eval_set: EvalSet, questions: list[EvalQuestion], ctx: Context,
    local: SentenceJudge | None = None,
) -> list[Row]:
    """Per question: its kind, whether the ungated extract is right, and every signal."""
    judge = load_judge()
    width = len(FEATURES) + (len(LOCAL_FEATURES) if local else 0)
    rows: list[Row] = []
    async with ingested(eval_set) as store:
        for q in questions:
            found = await store.asearch(q.question, k=ctx.top_k)
            evidence = graph_evidence(q.question, found, ctx)
            row: Row = {"set": name, "id": q.id, "kind": q.kind, "note": q.note,
                        "answers": False, "right": False, "x": [0.0] * width}
            if evidence:  # with none usable, the graph abstains before any gate
                row["answers"], row["right"] = CALIBRATE.graded(q, evidence)
                row["x"], agent = agent_signals(q.question, evidence, ctx, judge)
                if local and row["answers"]:  # where no extract answers, no gate decides
                    row["x"] += local_signals(q.question, evidence, local)
                elif local:
                    row["x"] += [0.0] * len(LOCAL_FEATURES)
                row["agent"] = agent
                if agent:  # the agent quotes from the passages it kept, which may differ
                    usable, _, _ = first_attempt(q.question, evidence, ctx)
                    row["agent_right"] = CALIBRATE.graded(q, usable)[1]
            rows.append(row)
    return rows


def graph_evidence(question: str, found: list[Finding], ctx: Context) -> list[Finding]:
    """What the graph's scoring step reads of a knowledge-base search: check_grounding's
    evidence (the passages at or above the low threshold, deduplicated, in the source's order)."""
    outcome = ToolOutcome.from_items("knowledge_base", question, found,
                                     thresholds=ctx.thresholds, ranked=True)
    return collect_evidence([outcome], ctx.low_threshold)


class Gate:
    """Logistic regression by gradient descent on standardised signals, each set weighing the
    same: P(answering is right)."""

    def __init__(self, rows: list[Row], steps: int = 4000) -> None:
        x = np.array([r["x"] for r in rows], dtype=float)
        y = np.array([1.0 if r["right"] else 0.0 for r in rows])
        sizes: dict[str, int] = {}
        for r in rows:
            sizes[r["set"]] = sizes.get(r["set"], 0) + 1
        weight = np.array([1.0 / sizes[r["set"]] for r in rows])
        weight /= weight.sum()
        self.mu, self.sd = x.mean(0), x.std(0) + 1e-9
        z = self._design(x)
        self.w = np.zeros(z.shape[1])
        for _ in range(steps):
            p = 1.0 / (1.0 + np.exp(-z @ self.w))
            self.w -= z.T @ ((p - y) * weight) + 1e-3 * self.w

    def _design(self, x: np.ndarray) -> np.ndarray:
        return np.hstack([(x - self.mu) / self.sd, np.ones((len(x), 1))])

    def prob(self, rows: list[Row]) -> np.ndarray:
        z = self._design(np.array([r["x"] for r in rows], dtype=float))
        return np.asarray(1.0 / (1.0 + np.exp(-z @ self.w)))


def weights(gate: Gate) -> str:
    """Each signal's weight by name, then the intercept (the design's last column)."""
    names = (*FEATURES, *LOCAL_FEATURES)[: len(gate.w) - 1]
    return ", ".join(f"{n} {w:+.2f}" for n, w in zip((*names, "intercept"), gate.w, strict=True))


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
    score = Gate(rows).prob(rows)
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
    pos = np.array([s for s, r in ans if r["right"]])
    neg = np.array([s for s, r in ans if not r["right"]])
    return best, TRAIN.pair_order_auc(pos, neg) if len(pos) and len(neg) else float("nan")


def needed_auc(right_kept: float, wrong_kept: float) -> float:
    """The AUC a gate needs (equal-variance normal scores) to keep these shares of right and of
    wrong answers."""
    normal = NormalDist()
    d = normal.inv_cdf(min(max(right_kept, 1e-6), 1 - 1e-6)) - normal.inv_cdf(
        min(max(wrong_kept, 1e-6), 1 - 1e-6))
    return normal.cdf(d / math.sqrt(2))


def line(name: str, t: dict[str, float] | None) -> str:
    return f"  {name:34s} " + ("no cut-off meets the limits" if t is None else rates(t))


def report(name: str, rows: list[Row], target_right: float, wrong_max: float, near_min: float,
           ook_min: float) -> None:
    plain = tally(rows, [bool(r["answers"]) for r in rows])
    agent = tally(rows, [bool(r.get("agent")) for r in rows], "agent_right")
    best, fitted_auc = frontier(rows, wrong_max, near_min, ook_min)
    with_local = len(rows[0]["x"]) > len(FEATURES)
    if with_local:
        best_base, base_auc = frontier(base_only(rows), wrong_max, near_min, ook_min)
    ans = [r for r in rows if r["kind"] == "answerable" and r["answers"]]
    n_right = sum(r["right"] for r in ans) or 1
    n_wrong = (len(ans) - sum(r["right"] for r in ans)) or 1
    print(f"== {name} ({len(rows)} questions)")
    print(line("no gate (every extract)", plain))
    print(line("the agent's gate (first attempt)", agent))
    if with_local:
        print(line(f"best fitted gate, wrong <= {wrong_max:g}%", best_base))
        print(line("  the same with the local judge", best))
        print(f"  fitted gate AUC, right against wrong answers: {base_auc:.3f}, with the local "
              f"judge's signals {fitted_auc:.3f}")
    else:
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


def base_only(rows: list[Row]) -> list[Row]:
    """The rows with the agent's own signals only (the local judge's left out)."""
    return [{**r, "x": r["x"][:len(FEATURES)]} for r in rows]


def credited(rows: list[Row], answered: Sequence[bool], right: str = "right") -> float:
    """The evaluation's mean credited score (evals.grading.credited_score)."""
    total = 0
    for r, a in zip(rows, answered, strict=True):
        outcome: Outcome = ("correct" if r.get(right) else "wrong") if a else "abstained"
        total += credited_score(outcome, r["kind"] == "answerable")
    return total / max(len(rows), 1)


def rates(t: dict[str, float]) -> str:
    near = "-" if math.isnan(t["near_miss"]) else f"{t['near_miss']:.1f}"
    return f"{t['right']:5.1f} / {t['wrong']:4.1f}%, near-miss {near}%, out-of-KB {t['out_of_kb']:.1f}%"


def fitted_on_tuning(tune: dict[str, list[Row]], test: dict[str, list[Row]]
                     ) -> tuple[Gate, float, bool]:
    """The gate fitted and cut on tuning data, against the agent's gate on both; the gate, its
    cut-off, and whether the cut-off met the rule (no tuning set below the agent's gate)."""
    gate = Gate([r for rows in tune.values() for r in rows])

    def answered(rows: list[Row], cut: float) -> list[bool]:
        return [bool(r["answers"]) and p >= cut for r, p in zip(rows, gate.prob(rows), strict=True)]

    def agent(rows: list[Row]) -> list[bool]:
        return [bool(r.get("agent")) for r in rows]

    base = {name: credited(rows, agent(rows), "agent_right") for name, rows in tune.items()}
    safe: list[tuple[float, float]] = []
    for cut in np.round(np.arange(0.05, 0.96, 0.01), 2):
        gains = [credited(rows, answered(rows, cut)) - base[n] for n, rows in tune.items()]
        if min(gains) >= 0.0:
            safe.append((float(np.mean(gains)), -float(cut)))
    if safe:
        gain, cut = max(safe)[0], -max(safe)[1]
        print(f"\n== A gate fitted on the tuning data: cut-off {cut:.2f} (mean tuning gain {gain:+.3f})")
    else:
        cut = max((float(np.mean([credited(rows, answered(rows, c)) - base[n]
                                  for n, rows in tune.items()])), float(c))
                  for c in np.round(np.arange(0.05, 0.96, 0.01), 2))[1]
        print("\n== A gate fitted on the tuning data: no cut-off leaves every tuning set at least "
              f"where the agent's gate has it; shown at {cut:.2f}, the best mean (not kept)")
    print("   weights (standardised): " + weights(gate))
    for label, sets in (("tuning", tune), ("held-out", test)):
        print(f"-- {label} (credited; answerable right / wrong, unanswerable abstained)")
        for name, rows in sorted(sets.items()):
            mine, theirs = answered(rows, cut), agent(rows)
            print(f"  {name:22s} {len(rows):4d} q  agent {credited(rows, theirs, 'agent_right'):+.3f} "
                  f"{rates(tally(rows, theirs, 'agent_right'))}")
            print(f"  {'':22s} {'':6s} fitted {credited(rows, mine):+.3f} "
                  f"{rates(tally(rows, mine))}")
    return gate, cut, bool(safe)


def shipped_gate(gate: Gate, cut: float, tune: dict[str, list[Row]]) -> dict[str, Any]:
    """The gate as grounding/judge/local_gate.json keeps it (LocalGate), with how it was made."""
    names = (*FEATURES, *LOCAL_FEATURES)
    if len(gate.w) != len(names) + 1:
        raise ValueError("only a gate over the local judge's signals too is shipped")
    local = LocalGate(features=names, mean=tuple(map(float, gate.mu)),
                      scale=tuple(map(float, gate.sd)), weights=tuple(map(float, gate.w[:-1])),
                      intercept=float(gate.w[-1]), cut=float(cut))
    return {
        "features": list(local.features), "mean": list(local.mean), "scale": list(local.scale),
        "weights": list(local.weights), "intercept": local.intercept, "cut": local.cut,
        "model": LOCAL.local_manifest().raw.get("model", ""),
        "fitted_on": {name: len(rows) for name, rows in sorted(tune.items())},
        "rule": GATE_RULE,
    }


GATE_RULE = (
    "Fixed before the run (issue 47, 2026-12-07): benchmarks/bench_gate_ceiling.py --per-kind 50 "
    "--local-url --tune-only replays the offline first attempt with no gate on the tuning data only "
    "(SQuAD and swapped SQuAD tune articles, 50 per kind; the tuning half of the six project KBs "
    "by evals.splits.kb_half), over the evidence the graph's scoring step reads (check_grounding's "
    "passages at or above the low threshold, in the store's order), fits a logistic regression of 'the extract is right' on the "
    "standardised signals (FEATURES, then LOCAL_FEATURES; gradient descent, 4000 steps, L2 1e-3, "
    "each set weighing the same), and takes the cut-off in 0.05..0.95 (step 0.01) with the largest "
    "mean credited gain over the agent's own gate among those under which no tuning set loses "
    "(calibrate_judge.py's rule; ties: the lower cut-off). Held-out sets only report.")


def dump(path: Path, rows: list[Row]) -> None:
    with path.open("w", encoding="utf-8") as out:
        for r in rows:
            out.write(json.dumps(r) + "\n")


async def gather(per_kind: int, local: SentenceJudge | None = None, tune_only: bool = False
                 ) -> list[Row]:
    ctx = Context(sources=["knowledge_base"])
    squad = load_eval_set(CALIBRATE.SQUAD / "questions.jsonl", CALIBRATE.SQUAD / "kb_corpus.jsonl")
    rows: list[Row] = []
    for name, eval_set in (("squad", squad), ("squad-swapped", load_swapped_set(CALIBRATE.SQUAD))):
        for split in ("tune",) if tune_only else ("tune", "test"):
            chosen = CALIBRATE.sample(select(eval_set.questions, split), per_kind)
            rows += [{**r, "split": split} for r in await collect(name, eval_set, chosen, ctx, local)]
        print(f"{name}: read", file=sys.stderr, flush=True)
    for kb_dir in sorted(p for p in CALIBRATE.KBS.iterdir() if p.is_dir()):
        kb = load_kb_dir(kb_dir)
        wanted = [q for q in kb.questions if not tune_only or (
            kb_dir.name in CALIBRATE.TUNING_KBS and kb_half(q.id) == "tune")]
        if not wanted:
            continue
        for r in await collect(kb_dir.name, kb, wanted, ctx, local):
            tuned = kb_dir.name in CALIBRATE.TUNING_KBS and kb_half(r["id"]) == "tune"
            rows.append({**r, "split": "tune" if tuned else "test"})
        print(f"{kb_dir.name}: read", file=sys.stderr, flush=True)
    return rows


async def gather_squad_seed(seed: int, per_kind: int, local: SentenceJudge | None) -> list[Row]:
    """The held-out SQuAD sample as `python -m evals` draws it (test articles, per kind, seed)."""
    ctx = Context(sources=["knowledge_base"])
    squad = load_eval_set(CALIBRATE.SQUAD / "questions.jsonl", CALIBRATE.SQUAD / "kb_corpus.jsonl")
    chosen = stratified_sample(select(squad.questions, "test"), per_kind, seed)
    rows = await collect(f"squad-s{seed}", squad, chosen, ctx, local)
    return [{**r, "split": "test"} for r in rows]


async def gather_blind(local: SentenceJudge | None) -> list[Row]:
    """The small KBs written blind and held out (bench_local_judge.BLIND_TEST), every question."""
    ctx = Context(sources=["knowledge_base"])
    rows: list[Row] = []
    for name in LOCAL.BLIND_TEST:
        kb = load_blind_kb(LOCAL.BLIND / name)
        rows += [{**r, "split": "test"} for r in await collect(name, kb, kb.questions, ctx, local)]
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-kind", type=int, default=300)
    parser.add_argument("--rows", type=Path, help="also write every question's signals here")
    parser.add_argument("--load", type=Path, help="read the signals from --rows instead of replaying")
    parser.add_argument("--local-url", help="a local judge server: its scores join the signals")
    parser.add_argument("--squad-seed", type=int, action="append", default=[],
                        help="with --load: add the held-out SQuAD sample of this seed (as "
                        "`python -m evals` draws it, --per-kind per kind) to the loaded rows")
    parser.add_argument("--write-gate", action="store_true",
                        help="with --local-url or --load of rows that have them: write the gate "
                        "fitted on the tuning rows to grounding/judge/local_gate.json")
    parser.add_argument("--tune-only", action="store_true",
                        help="replay the tuning data only (what --write-gate fits on)")
    parser.add_argument("--blind", action="store_true",
                        help="with --load: add the blind KBs held out (tests/data/blind_kb, "
                        "blind_kb2) to the loaded rows")
    args = parser.parse_args()
    local = LOCAL.local_judge(args.local_url.rstrip("/").removesuffix("/v1")) \
        if args.local_url else None
    if args.load:
        rows = [json.loads(line) for line in args.load.open(encoding="utf-8")]
        for seed in args.squad_seed:
            rows += asyncio.run(gather_squad_seed(seed, args.per_kind, local))
            print(f"squad-s{seed}: read", file=sys.stderr, flush=True)
        if args.blind:
            rows += asyncio.run(gather_blind(local))
    else:
        if not CALIBRATE.SQUAD.exists():
            print(f"no evaluation data at {CALIBRATE.SQUAD} (set GROUNDED_AGENT_EVAL_DATA)")
            return 2
        rows = asyncio.run(gather(args.per_kind, local, args.tune_only))
    if args.rows:
        dump(args.rows, rows)
    tune: dict[str, list[Row]] = {}
    test: dict[str, list[Row]] = {}
    for r in rows:
        (tune if r["split"] == "tune" else test).setdefault(r["set"], []).append(r)
    print("== The ceiling: a gate fitted on the held-out questions themselves")
    for name, held in sorted(test.items()):
        if name == "squad-swapped":
            report(f"{name}, test articles", held, 70.0, 10.0, 0.0, 97.0)
        elif name.startswith("squad"):  # squad, and squad-sN from --squad-seed
            report(f"{name}, test articles", held, 72.0, 8.0, 40.0, 97.0)
        else:
            whole = held + tune.get(name, [])
            report(f"{name}, every question", whole, 50.0, 8.0, 80.0, 100.0)
    if len(rows[0]["x"]) > len(FEATURES):
        print("\n== Without the local judge's signals (the same questions)")
        fitted_on_tuning({n: base_only(r) for n, r in tune.items()},
                         {n: base_only(r) for n, r in test.items()})
        print("\n== With the local judge's signals")
    gate, cut, kept = fitted_on_tuning(tune, test)
    if args.write_gate:
        if not kept:
            print("no cut-off met the rule: no gate written")
            return 1
        GATE.write_text(json.dumps(shipped_gate(gate, cut, tune), indent=2) + "\n",
                        encoding="utf-8")
        print(f"wrote {GATE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
