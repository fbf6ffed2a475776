"""Would the offline judge raise "gold top-1" if it re-ranked the retrieved passages?

A study, not a product path: for each answerable question the store is searched exactly as the
evaluation harness measures the agent's first attempt (`store.asearch(question, k=Context.top_k)`
on the harness's own table, questions and split), then the judge scores every candidate sentence
of each passage as judge.reading does (`candidate_sentences`, one pair per run), and the top-k
are re-ordered by a few rules fixed before any result was seen. Printed per rule: the share of
answerable questions whose gold document is first (gold top-1) and in the top k (the same set
for every rule, so the ceiling of any re-order), and the judge's added time per question.

    python benchmarks/bench_rerank.py --judge-split tune --seeds 0 1 2
    python benchmarks/bench_rerank.py --judge-split test --variants retrieval rel+1.0*judge
    python benchmarks/bench_rerank.py --kb-dir benchmarks/kbs/northwind_it ...
    python benchmarks/bench_rerank.py --reranker DIR ...   # a passage re-ranker instead

With `--reranker DIR` (a model scripts/train_reranker.py wrote) every variant reads the passage
model's score in place of the judge's best sentence: each passage read whole, the scores
normalised over the retrieved passages (softmax of the logits), so "judge" names that model.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the evaluation harness lives beside the package, not in it

from evals.cli import default_data_dir  # noqa: E402
from evals.data import (  # noqa: E402
    EvalQuestion,
    EvalSet,
    load_eval_set,
    load_kb_dir,
    stratified_sample,
)
from evals.harness import aingest, awarm_up, gold_rank, open_eval_store  # noqa: E402
from evals.splits import SPLITS, article_of, kb_half, select  # noqa: E402
from grounded_agent.context import Context  # noqa: E402
from grounded_agent.grounding.judge import Judge, load_judge  # noqa: E402
from grounded_agent.grounding.judge.reading import candidate_sentences  # noqa: E402
from grounded_agent.schemas import Finding  # noqa: E402

Order = Callable[[Sequence[Finding], Sequence[float]], list[int]]
"""(passages in retrieval order, judge's best sentence score of each) -> the new order."""


def by_key(key: Callable[[int], float]) -> Callable[[int], list[int]]:
    """Indices 0..n-1, highest key first; ties keep the retrieval order."""
    return lambda n: sorted(range(n), key=lambda i: (-key(i), i))


def retrieval(found: Sequence[Finding], best: Sequence[float]) -> list[int]:
    return list(range(len(found)))


def judge_only(found: Sequence[Finding], best: Sequence[float]) -> list[int]:
    return by_key(lambda i: best[i])(len(found))


def judge_among(top: int) -> Order:
    """The judge re-orders only the first `top` passages (the offline answer reads three)."""

    def order(found: Sequence[Finding], best: Sequence[float]) -> list[int]:
        head = sorted(range(min(top, len(found))), key=lambda i: (-best[i], i))
        return head + list(range(len(head), len(found)))

    return order


def blend(w: float) -> Order:
    """Calibrated relevance plus w times the judge's best sentence probability."""

    def order(found: Sequence[Finding], best: Sequence[float]) -> list[int]:
        return by_key(lambda i: found[i].score + w * best[i])(len(found))

    return order


def switch_if(margin: float) -> Order:
    """Retrieval order, unless another passage's best sentence beats the first's by > margin:
    then that passage goes first."""

    def order(found: Sequence[Finding], best: Sequence[float]) -> list[int]:
        if not found:
            return []
        top = max(range(len(found)), key=lambda i: (best[i], -i))
        if top != 0 and best[top] - best[0] > margin:
            return [top, *(i for i in range(len(found)) if i != top)]
        return list(range(len(found)))

    return order


def relevance(found: Sequence[Finding], best: Sequence[float]) -> list[int]:
    """A control, not a candidate: calibrated relevance alone (the store orders by its pairwise
    rank model, which may differ), the blends' w = 0."""
    return by_key(lambda i: found[i].score)(len(found))


VARIANTS: dict[str, Order] = {
    "retrieval": retrieval,
    "relevance": relevance,
    "judge": judge_only,
    "judge-top3": judge_among(3),
    "judge-top2": judge_among(2),
    **{f"rel+{w}*judge": blend(w) for w in (0.25, 0.5, 1.0, 2.0)},
    **{f"switch>{m}": switch_if(m) for m in (0.0, 0.1, 0.3, 0.5)},
}
"""Fixed before any result was seen; the best on the tune split is reported once on test."""


@dataclass
class Scored:
    """One answerable question: its retrieved passages and the judge's reading of them."""

    q: EvalQuestion
    found: list[Finding]
    best: list[float]
    judge_ms: float
    pairs: int
    group: str = ""


@dataclass
class Tally:
    rows: list[Scored] = field(default_factory=list)

    def top1(self, order: Order) -> float:
        return share(self.rows, order, lambda r: r == 1)

    def in_k(self, order: Order) -> float:
        return share(self.rows, order, lambda r: r is not None)


def share(rows: Sequence[Scored], order: Order, hit: Callable[[int | None], bool]) -> float:
    if not rows:
        return float("nan")
    n = 0
    for s in rows:
        ranked = [s.found[i] for i in order(s.found, s.best)]
        n += hit(gold_rank(ranked, s.q.gold_doc_id, s.q.gold_version))
    return 100.0 * n / len(rows)


def passage_scores(reranker: Judge, question: str,
                   found: Sequence[Finding]) -> tuple[list[float], int]:
    """The passage model's share of each retrieved passage (softmax over them)."""
    if not found:
        return [], 0
    probs = reranker.score(question, [(f.title, f.text) for f in found])
    logits = [math.log(max(p, 1e-9) / max(1 - p, 1e-9)) for p in probs]
    top = max(logits)
    exp = [math.exp(v - top) for v in logits]
    return [e / sum(exp) for e in exp], len(found)


def judge_best(judge: Judge, question: str, found: Sequence[Finding]) -> tuple[list[float], int]:
    """Each passage's best candidate sentence probability (0 where it has none), and the pairs
    scored; the candidates are judge.reading's, one passage at a time."""
    best: list[float] = []
    pairs = 0
    for f in found:
        cands = list(dict.fromkeys(candidate_sentences([f])))
        scores = judge.score(question, cands) if cands else []
        pairs += len(cands)
        best.append(max(scores, default=0.0))
    return best, pairs


async def ascore_set(
    eval_set: EvalSet, groups: dict[str, list[EvalQuestion]], judge: Judge, top_k: int,
    passages: bool = False,
) -> dict[str, Tally]:
    """Ingest (idempotent: the cached table is reused), then one search and one reading per
    question, in sequence."""
    store = open_eval_store(eval_set)
    try:
        report = await aingest(eval_set, store, progress=False)
        print(f"{eval_set.name}: table {store.table_name}: added {report.added}, skipped "
              f"{report.skipped}", file=sys.stderr)
        await awarm_up(store)
        out: dict[str, Tally] = {}
        for name, qs in groups.items():
            tally = out.setdefault(name, Tally())
            for i, q in enumerate(qs, 1):
                found = await store.asearch(q.question, k=top_k)
                t0 = time.perf_counter()
                best, pairs = (passage_scores if passages else judge_best)(judge, q.question, found)
                ms = (time.perf_counter() - t0) * 1000
                tally.rows.append(Scored(q, found, best, ms, pairs, eval_set.name))
                if i % 100 == 0:
                    print(f"  {eval_set.name} {name}: {i}/{len(qs)}", file=sys.stderr)
        return out
    finally:
        await store.aclose()


def first_ok(s: Scored, order: Order) -> tuple[bool, Finding | None]:
    ranked = [s.found[i] for i in order(s.found, s.best)]
    return gold_rank(ranked, s.q.gold_doc_id, s.q.gold_version) == 1, \
        ranked[0] if ranked else None


def complement(rows: Sequence[Scored]) -> str:
    """How the judge's first passage and the retrieval's differ: the most any blend of the two
    could gain or lose, and whether the judge's wrong picks are the gold's own article."""
    only_judge = only_ret = same_article = judge_wrong = 0
    for s in rows:
        r_ok, _ = first_ok(s, retrieval)
        j_ok, j_first = first_ok(s, judge_only)
        only_judge += j_ok and not r_ok
        only_ret += r_ok and not j_ok
        if not j_ok and j_first is not None:
            judge_wrong += 1
            same_article += (article_of(j_first.source_id) or "?") == article_of(s.q.gold_doc_id)
    n = max(1, len(rows))
    out = (f"judge-first right where retrieval-first wrong: {100 * only_judge / n:.1f}%; the "
           f"reverse: {100 * only_ret / n:.1f}%")
    if any(article_of(s.q.gold_doc_id) for s in rows):  # SQuAD: doc ids name their article
        out += f"; the judge's wrong first passages from the gold's own article: " \
               f"{same_article}/{judge_wrong}"
    return out


def pct(values: Sequence[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, round(p / 100 * (len(s) - 1)))] if s else float("nan")


def render(title: str, tallies: dict[str, Tally], names: Sequence[str]) -> tuple[str, dict[str, Any]]:
    """Per variant: gold top-1 per group and their mean, gold in top k (mean)."""
    groups = list(tallies)
    head = f"{'variant':<16}" + "".join(f"{g:>12}" for g in groups) + f"{'mean top1':>11}"
    head += f"{'in top-k':>10}"
    lines = [title, head, "-" * len(head)]
    data: dict[str, dict[str, Any]] = {}
    for name in names:
        order = VARIANTS[name]
        tops = [tallies[g].top1(order) for g in groups]
        ink = statistics.mean(tallies[g].in_k(order) for g in groups)
        data[name] = {"top1": dict(zip(groups, tops, strict=True)),
                      "top1_mean": statistics.mean(tops), "in_top_k_mean": ink}
        lines.append(f"{name:<16}" + "".join(f"{t:>11.1f}%" for t in tops)
                     + f"{statistics.mean(tops):>10.1f}%{ink:>9.1f}%")
    rows = [r for t in tallies.values() for r in t.rows]
    lines.append(complement(rows))
    ms = [r.judge_ms for r in rows]
    pairs = [r.pairs for r in rows]
    lat = {"questions": len(rows), "judge_ms_p50": pct(ms, 50), "judge_ms_p95": pct(ms, 95),
           "pairs_p50": pct(pairs, 50), "pairs_max": max(pairs, default=0)}
    lines.append(f"judge time per question (all top-k passages, {len(rows)} questions): "
                 f"p50 {lat['judge_ms_p50']:.0f} ms, p95 {lat['judge_ms_p95']:.0f} ms; "
                 f"sentences scored p50 {lat['pairs_p50']:.0f}, max {lat['pairs_max']}")
    return "\n".join(lines), {"variants": data, "latency": lat}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=None,
                        help="SQuAD-derived folder (default: the evaluation's)")
    parser.add_argument("--judge-split", choices=SPLITS, default="tune")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--sample", type=int, default=300, help="answerable questions per seed")
    parser.add_argument("--kb-dir", type=Path, action="append", default=None,
                        help="project KBs instead of SQuAD (grouped by evals.splits.kb_half)")
    parser.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=list(VARIANTS))
    parser.add_argument("--reranker", type=Path, default=None,
                        help="a passage re-ranker's folder, read in place of the judge")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)

    ctx = Context(sources=["knowledge_base"])  # the evaluation's Context: its top_k
    judge = Judge.from_dir(args.reranker) if args.reranker else load_judge()
    passages = args.reranker is not None
    if args.kb_dir:
        per_half: dict[str, Tally] = {"tune": Tally(), "test": Tally()}
        for d in args.kb_dir:
            kb = load_kb_dir(d)
            answerable = [q for q in kb.questions if q.kind == "answerable"]
            groups = {h: [q for q in answerable if kb_half(q.id) == h] for h in per_half}
            for h, t in asyncio.run(ascore_set(kb, groups, judge, ctx.top_k, passages)).items():
                per_half[h].rows.extend(t.rows)
        text, data = "", {}
        for h, t in per_half.items():
            part, data[h] = render(f"\nproject KBs, {h} half ({len(t.rows)} answerable "
                                   f"questions, top_k {ctx.top_k})", {h: t}, args.variants)
            text += part + "\n"
    else:
        data_dir = args.data or default_data_dir()
        squad = load_eval_set(data_dir / "questions.jsonl", data_dir / "kb_corpus.jsonl")
        pool = select(squad.questions, args.judge_split)
        groups = {f"seed {s}": stratified_sample(pool, args.sample, s, kinds=("answerable",))
                  for s in args.seeds}
        tallies = asyncio.run(ascore_set(squad, groups, judge, ctx.top_k, passages))
        text, data = render(f"SQuAD, judge split {args.judge_split!r}, {args.sample} answerable "
                            f"per seed, top_k {ctx.top_k}", tallies, args.variants)
    print(json.dumps(data, indent=2) if args.json else text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
