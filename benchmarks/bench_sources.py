"""The offline agent on every project KB twice: through the built-in store, and through the same
chunks brought as a user would bring them (a LangChain InMemoryVectorStore over the shipped
embeddings, `grounded_agent.sources.from_vectorstore`). Whether the calibrated relevance means
the same through a user's source is measured here, not assumed.

    .venv/bin/python benchmarks/bench_sources.py [--kbs-root benchmarks/kbs] [--json FILE]

Per KB and half (`evals.splits.kb_half`: tuning, held-out): answerable questions answered
correctly, and wrong answers among all questions, for both ways in, and for the vector store
without its corpus statistics (general-English term rarity, as a retriever brought without
`corpus=`); then what a user's source costs per search (the store's search, embedding the query
and the fetched candidates not embedded before, the calibrated re-rank: p50/p95 ms).
About 5 minutes on two quiet cores.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from evals.data import load_kb_dir  # noqa: E402
from evals.grading import Graded  # noqa: E402
from evals.harness import (  # noqa: E402
    USER_SOURCE,
    arun_sample,
    ingested,
    user_vectorstore,
    vectorstore_source,
)
from evals.splits import kb_half  # noqa: E402
from grounded_agent.context import Context  # noqa: E402
from grounded_agent.graph.builder import build_graph  # noqa: E402
from grounded_agent.sources import SourceArgs, from_vectorstore  # noqa: E402


def rates(rows: list[Graded]) -> dict[str, Any]:
    """Answerable questions answered correctly, and wrong answers among all questions."""
    answerable = [r for r in rows if r.kind == "answerable"]
    correct = sum(r.outcome == "correct" for r in answerable)
    wrong = sum(r.outcome in ("wrong", "hallucinated") for r in rows)
    return {
        "questions": len(rows),
        "answerable": len(answerable),
        "correct": correct,
        "wrong": wrong,
        "correct_pct": 100.0 * correct / max(1, len(answerable)),
        "wrong_pct": 100.0 * wrong / max(1, len(rows)),
    }


async def one_kb(kb_dir: Path) -> dict[str, Any]:
    eval_set = load_kb_dir(kb_dir)
    out: dict[str, Any] = {}
    async with ingested(eval_set) as store:
        source = await vectorstore_source(store)
        plain = await vectorstore_source(store, corpus_stats=False)
        user = Context(sources=[USER_SOURCE])
        ways = {
            "store": (build_graph(chat_model=None, store=store),
                      Context(sources=["knowledge_base"])),
            "vectorstore": (build_graph(chat_model=None, store=store, tools={USER_SOURCE: source}),
                            user),
            "no_corpus": (build_graph(chat_model=None, store=store, tools={USER_SOURCE: plain}),
                          user),
        }
        for way, (graph, ctx) in ways.items():
            run = await arun_sample(eval_set.questions, store=store, graph=graph, ctx=ctx,
                                    systems=("full_graph",), concurrency=2, progress=False)
            out[way] = {half: rates([r for r in run.rows if kb_half(r.id) == half])
                        for half in ("tune", "test")}
        timed = from_vectorstore(await user_vectorstore(store), name=USER_SOURCE)
        for when in ("cold", "warm"):  # passages not embedded before, then the same again
            timings = []
            for q in eval_set.questions[:20]:
                started = time.perf_counter()
                await timed.run(SourceArgs(query=q.question))
                timings.append((time.perf_counter() - started) * 1000)
            out[f"search_ms_{when}"] = {"p50": statistics.median(timings),
                                        "p95": sorted(timings)[int(0.95 * (len(timings) - 1))]}
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kbs-root", type=Path, default=ROOT / "benchmarks" / "kbs")
    parser.add_argument("--json", type=Path, default=None, help="also write the numbers here")
    args = parser.parse_args()
    results: dict[str, Any] = {}
    print("| KB | half | store: correct / wrong | vectorstore: correct / wrong | delta (points) "
          "| without corpus statistics: correct / wrong |")
    print("|---|---|---|---|---|---|")
    for kb_dir in sorted(p for p in args.kbs_root.iterdir() if (p / "questions.jsonl").is_file()):
        res = asyncio.run(one_kb(kb_dir))
        results[kb_dir.name] = res
        for half, name in (("test", "held-out"), ("tune", "tuning")):
            a, b, c = res["store"][half], res["vectorstore"][half], res["no_corpus"][half]
            print(f"| {kb_dir.name} | {name} | {a['correct']}/{a['answerable']} "
                  f"({a['correct_pct']:.1f}%) / {a['wrong']} ({a['wrong_pct']:.1f}%) | "
                  f"{b['correct']}/{b['answerable']} ({b['correct_pct']:.1f}%) / {b['wrong']} "
                  f"({b['wrong_pct']:.1f}%) | {b['correct_pct'] - a['correct_pct']:+.1f} / "
                  f"{b['wrong_pct'] - a['wrong_pct']:+.1f} | {c['correct']}/{c['answerable']} "
                  f"/ {c['wrong']} |", flush=True)
    for when in ("cold", "warm"):
        ms = [r[f"search_ms_{when}"] for r in results.values()]
        print(f"a user source's search with its rescoring ({when}): p50 "
              f"{statistics.median(m['p50'] for m in ms):.0f} ms, worst KB p95 "
              f"{max(m['p95'] for m in ms):.0f} ms")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
