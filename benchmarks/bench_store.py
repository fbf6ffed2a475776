"""Knowledge-store benchmark: ingest throughput, query latency at 1k and 100k chunks, recall.

Runs against a throw-away embedded PostgreSQL (its own GROUNDED_AGENT_HOME, stopped at the end).

    .venv/bin/python benchmarks/bench_store.py [--quick]

1. Ingest: SQuAD's 1,204 knowledge-base paragraphs (../shared; else data/sample_kb repeated),
   real all-MiniLM-L6-v2, time split into embedding and database.
2. Query latency p50/p95 on that ~1k-chunk table (database only, and end to end with the
   query embedding and calibrated scoring).
3. 100k random 384-dimension vectors (20k with --quick) with the HNSW index: latency p50/p95
   and recall@10 of the index against exact search, for queries near stored vectors.
4. Recall@5 of the gold paragraph for 500 answerable SQuAD questions (200 with --quick):
   raw vector order vs. the store's calibrated re-ranking.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from langchain_core.embeddings import DeterministicFakeEmbedding
from sqlalchemy import text

from grounded_agent.store import KnowledgeStore, StoreSettings, aingest_paths, open_store
from grounded_agent.store.server import stop_embedded_server
from grounded_agent.store.vectorstore import active_filter

ROOT = Path(__file__).resolve().parents[1]
SQUAD = ROOT.parent / "shared" / "eval" / "squad"


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def ms(values: list[float]) -> str:
    return f"p50 {pct(values, 0.5) * 1000:6.1f} ms   p95 {pct(values, 0.95) * 1000:6.1f} ms"


async def db_search(store: KnowledgeStore, vector: list[float], k: int) -> list[Any]:
    """The vector search alone (the SQL the store runs), on the store's loop."""

    async def run() -> list[Any]:
        vs = await store._aensure_schema()
        return await vs.asimilarity_search_with_score_by_vector(
            vector, k=k, filter=active_filter(None)
        )

    return await store._call(run(), "bench", None)


async def ingest_part(store: KnowledgeStore, workdir: Path, quick: bool) -> list[dict[str, Any]]:
    corpus: list[dict[str, Any]] = []
    if (SQUAD / "kb_corpus.jsonl").exists():
        corpus = [json.loads(x) for x in (SQUAD / "kb_corpus.jsonl").open()]
        src = workdir / "kb.jsonl"
        with src.open("w") as fh:
            for row in corpus:
                fh.write(json.dumps(row) + "\n")
        paths = [src]
        label = f"SQuAD kb_corpus ({len(corpus)} paragraphs)"
    else:
        copies = 10 if quick else 40
        for i in range(copies):
            for md in (ROOT / "data" / "sample_kb").glob("*.md"):
                body = md.read_text().replace("\nid: ", f"\nid: copy{i}-", 1)
                (workdir / f"{i}_{md.name}").write_text(body)
        paths = [workdir]
        label = f"data/sample_kb x{copies}"
    await asyncio.to_thread(store.embeddings.embed_query, "load the model first")
    await store.aensure_schema()
    report = await aingest_paths(paths, store)
    print(f"\n== 1. ingest: {label}")
    print(
        f"documents {report.documents}, chunks {report.chunks}, errors {len(report.errors)}\n"
        f"embedding {report.embedding_seconds:6.1f} s  ({report.chunks / report.embedding_seconds:7.1f} chunks/s)\n"
        f"database  {report.database_seconds:6.1f} s  ({report.chunks / report.database_seconds:7.1f} chunks/s)\n"
        f"total     {report.elapsed_seconds:6.1f} s  ({report.chunks / report.elapsed_seconds:7.1f} chunks/s)"
    )
    return corpus


async def latency_1k(store: KnowledgeStore, questions: list[str]) -> None:
    chunks, _, _ = await store.acounts()
    vectors = await asyncio.to_thread(store.embeddings.embed_documents, questions)
    db, e2e = [], []
    for q, v in zip(questions, vectors, strict=True):
        t0 = time.perf_counter()
        await db_search(store, v, 20)
        db.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        await store.asearch(q, k=5)
        e2e.append(time.perf_counter() - t0)
    print(f"\n== 2. query latency, {chunks} chunks, {len(questions)} queries")
    print(f"database (top 20, HNSW)           {ms(db)}")
    print(f"asearch (embed + search + score) {ms(e2e)}")


async def latency_big(settings: StoreSettings, n: int, queries: int) -> None:
    store = open_store(
        settings, embeddings=DeterministicFakeEmbedding(size=384), table_name="bench_big"
    )
    await store.adrop()
    await store.aensure_schema()
    t = store.table_name

    async def load() -> float:
        engine = await store._aengine()
        async with engine.begin() as conn:
            await conn.execute(text(f'DROP INDEX IF EXISTS "{t}_hnsw"'))
            await conn.execute(
                text(
                    f'INSERT INTO "{t}" (langchain_id, content, embedding, doc_id, indexed_at, '
                    "is_active, chunk_index, content_hash) "
                    "SELECT gen_random_uuid(), 'chunk ' || g, "
                    "(SELECT array_agg(random() - 0.5) FROM generate_series(1, 384) d WHERE g > 0)::vector, "
                    "'doc' || g, now(), true, 0, 'h' FROM generate_series(1, :n) g"
                ),
                {"n": n},
            )
        t0 = time.perf_counter()
        async with engine.begin() as conn:
            await conn.execute(text("SET LOCAL maintenance_work_mem = '1GB'"))
            await conn.execute(
                text(
                    f'CREATE INDEX "{t}_hnsw" ON "{t}" USING hnsw (embedding vector_cosine_ops) '
                    "WITH (m = 16, ef_construction = 64)"
                )
            )
            await conn.execute(text(f'ANALYZE "{t}"'))
        return time.perf_counter() - t0

    t0 = time.perf_counter()
    build = await store._call(load(), "load", None)
    total = time.perf_counter() - t0
    rng = random.Random(0)

    async def sample_queries() -> list[list[float]]:
        """Stored vectors plus noise: like real queries, each has near neighbours. (Fresh
        uniform random queries have none: all 100k points tie at distance ~1, and recall
        against exact search measures only noise.)"""
        engine = await store._aengine()
        async with engine.connect() as conn:
            rows = await conn.execute(
                text(f'SELECT embedding::text FROM "{t}" ORDER BY random() LIMIT :q'),
                {"q": queries},
            )
            stored = [json.loads(r[0]) for r in rows]
        return [[x + rng.gauss(0, 0.1) for x in vec] for vec in stored]

    qs = await store._call(sample_queries(), "sample", None)

    async def exact(v: list[float]) -> list[str]:
        engine = await store._aengine()
        async with engine.begin() as conn:
            await conn.execute(text("SET LOCAL enable_indexscan = off"))
            rows = await conn.execute(
                text(
                    f'SELECT doc_id FROM "{t}" WHERE is_active '
                    "ORDER BY embedding <=> CAST(:v AS vector) LIMIT 10"
                ),
                {"v": str(v)},
            )
            return [r[0] for r in rows]

    lat, recall, exact_lat = [], [], []
    for v in qs:
        t0 = time.perf_counter()
        hits = await db_search(store, v, 10)
        lat.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        truth = await store._call(exact(v), "exact", None)
        exact_lat.append(time.perf_counter() - t0)
        recall.append(len({d.metadata["doc_id"] for d, _ in hits} & set(truth)) / 10)
    print(
        f"\n== 3. {n:,} random 384-d vectors (load {total:.1f} s, of which HNSW build {build:.1f} s)"
    )
    print(f"HNSW top 10 (ef_search 64, iterative scan) {ms(lat)}")
    print(f"exact top 10 (sequential scan)             {ms(exact_lat)}")
    print(f"HNSW recall@10 vs exact: {statistics.mean(recall):.3f} over {queries} queries")
    await store.adrop()
    await store.aclose()


async def recall_part(store: KnowledgeStore, corpus: list[dict[str, Any]], n: int) -> None:
    if not corpus or not (SQUAD / "questions.jsonl").exists():
        print("\n== 4. recall@5: skipped (../shared/eval/squad is absent)")
        return
    qs = [json.loads(x) for x in (SQUAD / "questions.jsonl").open()]
    answerable = [q for q in qs if q["kind"] == "answerable"]
    random.Random(0).shuffle(answerable)
    chosen = answerable[:n]
    vectors = await asyncio.to_thread(
        store.embeddings.embed_documents, [q["question"] for q in chosen]
    )
    raw_hits = calibrated_hits = raw_top1 = cal_top1 = 0
    for q, v in zip(chosen, vectors, strict=True):
        raw = [d.metadata["doc_id"] for d, _ in await db_search(store, v, 5)]
        cal = [f.source_id for f in await store.asearch(q["question"], k=5)]
        raw_hits += q["gold_doc_id"] in raw
        calibrated_hits += q["gold_doc_id"] in cal
        raw_top1 += raw[:1] == [q["gold_doc_id"]]
        cal_top1 += cal[:1] == [q["gold_doc_id"]]
    print(f"\n== 4. gold paragraph of {n} answerable SQuAD questions")
    print(f"vector order:          recall@1 {raw_top1 / n:.3f}   recall@5 {raw_hits / n:.3f}")
    print(
        f"calibrated re-ranking: recall@1 {cal_top1 / n:.3f}   recall@5 {calibrated_hits / n:.3f}"
    )


async def main() -> None:
    parser = argparse.ArgumentParser(description="knowledge-store benchmark")
    parser.add_argument("--quick", action="store_true", help="20k vectors, 200 questions")
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="ga-bench-"))
    workdir = Path(tempfile.mkdtemp(prefix="ga-bench-data-"))
    settings = StoreSettings(home=home, database_url=None, embeddings="local", table_name=None)
    store = open_store(settings, table_name="bench_kb")
    try:
        corpus = await ingest_part(store, workdir, args.quick)
        sample = [q for q in (SQUAD / "questions.jsonl").open()] if corpus else []
        questions = (
            [json.loads(x)["question"] for x in sample[: 100 if args.quick else 200]]
            if sample
            else ["How much does the Pro plan cost?"] * 50
        )
        await latency_1k(store, questions)
        await latency_big(settings, 20_000 if args.quick else 100_000, 50 if args.quick else 100)
        await recall_part(store, corpus, 200 if args.quick else 500)
        await store.aclose()
    finally:
        stop_embedded_server(home)
        shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main())
