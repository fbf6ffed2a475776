"""Calibration of the local scorer on questions kept apart from the reported samples.

`python -m evals.calibrate` draws a calibration sample that excludes the
report samples (seeds 0 and 2 by default), records every knowledge-base search the agent makes on
it once (`CachedSearch`), and then re-runs the whole offline graph and the baselines from that
record in seconds, so cut-offs in `grounded_agent.grounding.scoring` can be compared without re-embedding.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evals.data import (
    KINDS,
    EvalQuestion,
    load_eval_set,
    stratified_sample,
)
from grounded_agent.schemas import Finding

if TYPE_CHECKING:
    from grounded_agent.store import KnowledgeStore, SearchFilters


class CachedSearch:
    """`asearch` of a store, memoised by (query, k) and persisted as JSON.

    Only for calibration: the relevance of a passage to a query does not change between runs
    on the same table, so a recorded search stands in for a new one.
    """

    def __init__(self, store: KnowledgeStore | None, path: Path | None = None) -> None:
        self.store = store
        self.path = path
        self.cache: dict[str, list[dict[str, Any]]] = {}
        self.misses = 0
        if path is not None and path.exists():
            self.cache = json.loads(path.read_text(encoding="utf-8"))

    async def asearch(
        self, query: str, k: int = 5, filters: SearchFilters | None = None
    ) -> list[Finding]:
        key = f"{k}\t{query}"
        if key not in self.cache:
            if self.store is None:
                raise KeyError(f"search not recorded: {query!r}")
            self.misses += 1
            found = await self.store.asearch(query, k=k, filters=filters)
            self.cache[key] = [f.model_dump(mode="json") for f in found]
        return [Finding.model_validate(f) for f in self.cache[key]]

    def save(self) -> None:
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.path.write_text(json.dumps(self.cache), encoding="utf-8")


def calibration_sample(
    questions: Sequence[EvalQuestion], per_kind: int, seed: int, exclude_seeds: Sequence[int],
    report_per_kind: int = 300,
) -> list[EvalQuestion]:
    """A stratified sample drawn from the questions no report sample (of `exclude_seeds`) holds."""
    held = {q.id for s in exclude_seeds for q in stratified_sample(questions, report_per_kind, s)}
    return stratified_sample([q for q in questions if q.id not in held], per_kind, seed)


async def arun(
    sample: Sequence[EvalQuestion], searcher: Any, concurrency: int = 4
) -> list[Any]:
    """The offline graph and both baselines over `sample`, searches served by `searcher`."""
    from evals.harness import arun_sample
    from grounded_agent.context import Context
    from grounded_agent.graph.builder import build_graph
    from grounded_agent.tools.knowledge_base import make_knowledge_base_tool

    ctx = Context(sources=["knowledge_base"])
    graph = build_graph(chat_model=None, tools={"knowledge_base": make_knowledge_base_tool(searcher)})
    run = await arun_sample(sample, store=searcher, graph=graph, ctx=ctx,
                            concurrency=concurrency, progress=sys.stderr.isatty())
    return run.rows


def main(argv: list[str] | None = None) -> int:
    from evals.cli import DEFAULT_DATA
    from evals.grading import system_metrics
    from evals.harness import open_eval_store

    p = argparse.ArgumentParser(prog="python -m evals.calibrate")
    p.add_argument("--questions", type=Path, default=DEFAULT_DATA / "questions.jsonl")
    p.add_argument("--kb", type=Path, default=DEFAULT_DATA / "kb_corpus.jsonl")
    p.add_argument("--per-kind", type=int, default=600)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--exclude-seeds", type=int, nargs="*", default=[0, 2])
    p.add_argument("--cache", type=Path, default=Path("reports/calibration-searches.json"))
    p.add_argument("--rows", type=Path, default=None, help="write graded rows as JSON Lines")
    args = p.parse_args(argv)

    eval_set = load_eval_set(args.questions, args.kb)
    sample = calibration_sample(eval_set.questions, args.per_kind, args.seed, args.exclude_seeds)
    store = open_eval_store(eval_set)
    searcher = CachedSearch(store, args.cache)
    started = time.perf_counter()
    rows = asyncio.run(arun(sample, searcher))
    searcher.save()
    print(f"{len(sample)} questions, {searcher.misses} new searches, "
          f"{time.perf_counter() - started:.1f}s", file=sys.stderr)
    if args.rows:
        with args.rows.open("w", encoding="utf-8") as fh:
            for r in rows:
                fh.write(json.dumps(r.to_json(), ensure_ascii=False) + "\n")
    for system in ("full_graph", "thresholds_only", "plain_rag"):
        m = system_metrics([r for r in rows if r.system == system])
        line = " ".join(
            f"{k}: ok {m['by_kind'][k]['correct_rate']:.3f} abst {m['by_kind'][k]['abstention_rate']:.3f}"
            for k in KINDS if k in m["by_kind"]
        )
        print(f"{system:<16} {line} credited {m.get('credited_score_answerable_out_of_kb')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
