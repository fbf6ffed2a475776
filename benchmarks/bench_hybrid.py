"""The knowledge base's own hybrid search against langchain-postgres's (issue 25): does the
library's hybrid search rank the right document as well as `store/search.py` does?

    python benchmarks/bench_hybrid.py [--sample 300] [--kb-dir benchmarks/kbs/NAME ...] [--json]

On the same table, the same embeddings and the same answerable questions (SQuAD from
../shared/eval/squad, or project knowledge bases), for each question:
- own: `KnowledgeStore.asearch` (the 20 nearest chunks and the 20 best by an OR full-text query
  over every language configuration, then the calibrated re-rank);
- library rrf / library weighted: `PGVectorStore` with langchain-postgres's `HybridSearchConfig`
  on the same `fts` column (20 dense and 20 sparse candidates, `plainto_tsquery('english')`,
  reciprocal rank fusion or its default weighted sum), in the order the library returns.
Reported: the share of questions whose gold document is first, in the top 5 (what the agent
reads), the mean reciprocal rank in the top 5, the share where the library's full-text query
matches no chunk at all, and the median latency. The library's scores are fused ranks, not
calibrated relevance, so its order is all it could give the graph's thresholds.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # evals lives beside the package

from sqlalchemy import text  # noqa: E402

from evals.data import load_jsonl_set, load_kb_dir  # noqa: E402
from evals.harness import aingest, open_eval_store  # noqa: E402
from grounded_agent.store.records import active_filter  # noqa: E402
from grounded_agent.store.search import FETCH_K_MIN, or_tsquery  # noqa: E402

K = 5
SYSTEMS = ("own", "library rrf", "library weighted")


def default_data() -> Path:
    raw = os.environ.get("GROUNDED_AGENT_EVAL_DATA", "").strip()
    return Path(raw).expanduser() if raw else ROOT.parent / "shared" / "eval" / "squad"


async def library_search(vs: Any, vector: list[float], query: str, fusion: str) -> list[str]:
    """Document ids of the library's hybrid top K, in its order."""
    from langchain_postgres.v2.hybrid_search_config import (
        HybridSearchConfig,
        reciprocal_rank_fusion,
        weighted_sum_ranking,
    )

    config = HybridSearchConfig(  # a fresh one per call: the library writes into it
        tsv_column="fts", tsv_lang="pg_catalog.english",
        fusion_function=reciprocal_rank_fusion if fusion == "rrf" else weighted_sum_ranking,
        primary_top_k=max(K * 4, FETCH_K_MIN), secondary_top_k=max(K * 4, FETCH_K_MIN),
    )
    hits = await vs.asimilarity_search_with_score_by_vector(
        vector, k=K, filter=active_filter(None), hybrid_search_config=config, fts_query=query,
    )
    return [str(doc.metadata.get("doc_id")) for doc, _ in hits]


async def sparse_matches(engine: Any, table: str, query: str) -> tuple[int, int]:
    """Chunks the library's full-text query matches, and chunks the own OR query matches."""
    sql = (f'SELECT count(*) FILTER (WHERE fts @@ plainto_tsquery(\'english\', :q)), '
           f'count(*) FILTER (WHERE fts @@ to_tsquery(\'simple\', :orq) '
           f'OR fts @@ to_tsquery(\'english\', :orq)) FROM "{table}" WHERE is_active')
    orq = or_tsquery(query) or "zzzz"
    async with engine.connect() as conn:
        row = (await conn.execute(text(sql), {"q": query, "orq": orq})).one()
    return int(row[0]), int(row[1])


def rank_of(ids: list[str], gold: str) -> int | None:
    return ids.index(gold) + 1 if gold in ids else None


async def run_set(name: str, eval_set: Any, sample: int | None, seed: int) -> dict[str, Any]:
    store = open_eval_store(eval_set)
    await aingest(eval_set, store, progress=False)
    questions = [q for q in eval_set.questions if q.kind == "answerable" and q.gold_doc_id]
    if sample is not None and sample < len(questions):
        questions = random.Random(seed).sample(questions, sample)
    vs = await store._aensure_schema()  # the library's vector store over the same table
    engine = await store._aengine()
    ranks: dict[str, list[int | None]] = {s: [] for s in SYSTEMS}
    seconds: dict[str, list[float]] = {s: [] for s in SYSTEMS}
    no_sparse = own_no_sparse = 0
    for q in questions:
        started = time.perf_counter()
        findings = await store.asearch(q.question, k=K)
        seconds["own"].append(time.perf_counter() - started)
        ranks["own"].append(rank_of([f.source_id for f in findings], q.gold_doc_id))
        for fusion, system in (("rrf", "library rrf"), ("weighted", "library weighted")):
            started = time.perf_counter()  # the query's embedding counts, as it does in asearch
            vector = await asyncio.to_thread(store._embeddings.embed_query, q.question)
            ids = await library_search(vs, vector, q.question, fusion)
            seconds[system].append(time.perf_counter() - started)
            ranks[system].append(rank_of(ids, q.gold_doc_id))
        lib, own = await sparse_matches(engine, store.table_name, q.question)
        no_sparse += lib == 0
        own_no_sparse += own == 0
    n = len(questions)
    out: dict[str, Any] = {"set": name, "n": n, "systems": {}}
    for system in SYSTEMS:
        rs = ranks[system]
        out["systems"][system] = {
            "top1": sum(r == 1 for r in rs) / n,
            "top5": sum(r is not None for r in rs) / n,
            "mrr5": sum(1 / r for r in rs if r) / n,
            "p50_ms": 1000 * statistics.median(seconds[system]),
        }
    out["library_fulltext_matches_nothing"] = no_sparse / n
    out["own_fulltext_matches_nothing"] = own_no_sparse / n
    await store.aclose()
    return out


def render(results: list[dict[str, Any]]) -> str:
    head = f"{'set':<20}{'search':<18}{'n':>5}{'gold 1st':>10}{'gold top 5':>12}{'MRR@5':>8}{'p50 ms':>8}"
    lines = [head, "-" * len(head)]
    for r in results:
        for system, m in r["systems"].items():
            lines.append(f"{r['set'][:19]:<20}{system:<18}{r['n']:>5}{100 * m['top1']:>9.1f}%"
                         f"{100 * m['top5']:>11.1f}%{m['mrr5']:>8.3f}{m['p50_ms']:>8.0f}")
        lines.append(f"{'':<20}full text matches no chunk: library "
                     f"{100 * r['library_fulltext_matches_nothing']:.1f}%, own "
                     f"{100 * r['own_fulltext_matches_nothing']:.1f}% of the questions")
    return "\n".join(lines)


async def amain(args: argparse.Namespace) -> list[dict[str, Any]]:
    results = []
    if args.kb_dir:
        for kb_dir in args.kb_dir:
            results.append(await run_set(kb_dir.name, load_kb_dir(kb_dir), None, args.seed))
    else:
        eval_set = load_jsonl_set(args.data / "questions.jsonl", args.data / "kb_corpus.jsonl")
        results.append(await run_set("squad", eval_set, args.sample, args.seed))
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sample", type=int, default=300, help="answerable SQuAD questions")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data", type=Path, default=default_data())
    parser.add_argument("--kb-dir", type=Path, nargs="+", default=None,
                        help="project knowledge bases (benchmarks/kbs/NAME) instead of SQuAD")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if not args.kb_dir and not (args.data / "questions.jsonl").exists():
        print(f"bench_hybrid: {args.data} lacks questions.jsonl (use --kb-dir)", file=sys.stderr)
        return 2
    results = asyncio.run(amain(args))
    print(json.dumps(results, indent=2) if args.json else render(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
