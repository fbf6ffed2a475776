"""Knowledge-store benchmark: embedding backends side by side, ingest, query latency, recall.

Runs against a throw-away embedded PostgreSQL (its own GROUNDED_AGENT_HOME, stopped at the end);
the ONNX export is taken from (or made in) the usual model cache.

    .venv/bin/python benchmarks/bench_store.py [--quick] [--backends torch,onnx,onnx-int8]
                                               [--skip-hnsw] [--cold 3]

1. Embedding backends, side by side in one run: the chunks the ingester makes of SQuAD's 1,204
   knowledge-base paragraphs (../shared; else the sample KB repeated), in the ingester's own
   batches (which the ONNX backends cut into sub-batches of at most 256 padded tokens), each
   batch embedded by every backend in turn (rotating who goes first), so that the
   load of a shared machine falls on all of them alike. Chunks per second of wall time and per
   CPU-second of the process (all its threads; the steadier number when other work shares the
   cores), the ratio to the torch backend, the cosine of each backend's vectors to torch's,
   and the time to load each model. Then each backend's table is filled with those vectors
   (database time of the real ingester).
2. Query latency p50/p95 on that ~1k-chunk table (database only, and end to end with the
   query embedding and calibrated scoring), default backend.
3. HNSW recall@10 against exact top 10 (numpy) and latency p50/p95 at ef_search 40/100/200, on
   100k 384-d vectors (20k with --quick) of two kinds: uniform random (the worst case: all
   distances nearly equal, so only the true #1 is well defined) and clustered Gaussian with low
   intrinsic dimension (closer to real embeddings). Also the exact SQL search and the store's
   own search path. --skip-hnsw leaves it out.
4. Recall@1 and @5 of the gold paragraph for 500 answerable SQuAD questions (200 with --quick),
   per backend: raw vector order vs. the store's calibrated re-ranking (skipped, saying so,
   without ../shared/eval/squad).
5. Cold `grounded-agent ask` per backend (process start to printed answer, and to exit; the
   database already running, the sample knowledge base ingested), runs interleaved.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from langchain_core.embeddings import DeterministicFakeEmbedding, Embeddings

from grounded_agent.store import KnowledgeStore, StoreSettings, aingest_paths, open_store
from grounded_agent.store.embeddings import local_embeddings, local_model_id
from grounded_agent.store.server import stop_embedded_server
from grounded_agent.store.settings import LOCAL_BACKENDS, LocalBackend
from grounded_agent.store.vectorstore import active_filter

ROOT = Path(__file__).resolve().parents[1]
SQUAD = ROOT.parent / "shared" / "eval" / "squad"
BASELINE: LocalBackend = "torch"


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def ms(values: list[float]) -> str:
    return f"p50 {pct(values, 0.5) * 1000:6.1f} ms   p95 {pct(values, 0.95) * 1000:6.1f} ms"


async def db_search(store: KnowledgeStore, vector: list[float], k: int) -> list[Any]:
    """The vector search alone (the SQL the store runs), on the process loop."""

    async def run() -> list[Any]:
        vs = await store._aensure_schema()
        return await vs.asimilarity_search_with_score_by_vector(
            vector, k=k, filter=active_filter(None)
        )

    return await store._call(run(), "bench", None)


def corpus_paths(workdir: Path, quick: bool) -> tuple[list[Path], list[dict[str, Any]], str]:
    """SQuAD's knowledge-base paragraphs as one JSON Lines file, else the sample KB repeated."""
    if (SQUAD / "kb_corpus.jsonl").exists():
        corpus = [json.loads(x) for x in (SQUAD / "kb_corpus.jsonl").open()]
        src = workdir / "kb.jsonl"
        with src.open("w") as fh:
            for row in corpus:
                fh.write(json.dumps(row) + "\n")
        return [src], corpus, f"SQuAD kb_corpus ({len(corpus)} paragraphs)"
    from grounded_agent.sample import SAMPLE_KB

    copies = 10 if quick else 40
    for i in range(copies):
        for md in SAMPLE_KB.glob("*.md"):
            body = md.read_text().replace("\nid: ", f"\nid: copy{i}-", 1)
            (workdir / f"{i}_{md.name}").write_text(body)
    return [workdir], [], f"sample KB x{copies} (../shared/eval/squad is absent)"


RECORDED: list[list[str]] = []


class Recorder(DeterministicFakeEmbedding):
    """Fake vectors; remembers (in RECORDED) every batch the ingester asks to embed."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        RECORDED.append(list(texts))
        return super().embed_documents(texts)


class Precomputed(Embeddings):
    """Vectors already made in part 1 (the real model for anything else, queries included)."""

    def __init__(self, vectors: dict[str, list[float]], model: Embeddings, model_id: str) -> None:
        self.vectors, self.model, self.model_id = vectors, model, model_id

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        missing = [t for t in texts if t not in self.vectors]
        if missing:
            self.vectors.update(zip(missing, self.model.embed_documents(missing), strict=True))
        return [self.vectors[t] for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self.model.embed_query(text)


async def chunk_batches(settings: StoreSettings, paths: list[Path]) -> list[list[str]]:
    """The texts the ingester embeds for `paths`, in its own batches (a scratch ingest)."""
    RECORDED.clear()
    scratch = open_store(settings, embeddings=Recorder(size=384), table_name="bench_scratch")
    await scratch.adrop()
    await aingest_paths(paths, scratch)
    await scratch.adrop()
    await scratch.aclose()
    return list(RECORDED)


def _fmt_ratio(x: float) -> str:
    return f"{x:5.2f}x"


async def backends_part(
    settings: StoreSettings,
    backends: list[LocalBackend],
    paths: list[Path],
    label: str,
    max_chunks: int | None,
) -> dict[LocalBackend, KnowledgeStore]:
    """Part 1; returns each backend's store, its table filled."""
    from dataclasses import replace

    batches = await chunk_batches(settings, paths)
    total = sum(len(b) for b in batches)
    if max_chunks is not None:  # --quick: time the first batches; the rest embeds untimed
        kept, n = [], 0
        for b in batches:
            if n >= max_chunks:
                break
            kept.append(b)
            n += len(b)
        batches = kept
    timed = sum(len(b) for b in batches)
    models: dict[LocalBackend, Embeddings] = {}
    load_s: dict[LocalBackend, float] = {}
    for b in backends:
        t0 = time.perf_counter()
        models[b] = await asyncio.to_thread(local_embeddings, replace(settings, local_backend=b))
        await asyncio.to_thread(models[b].embed_query, "load the model first")
        load_s[b] = time.perf_counter() - t0
    wall = dict.fromkeys(backends, 0.0)
    cpu = dict.fromkeys(backends, 0.0)
    vectors: dict[LocalBackend, dict[str, list[float]]] = {b: {} for b in backends}
    for i, batch in enumerate(batches):
        order = backends[i % len(backends) :] + backends[: i % len(backends)]
        for b in order:
            w0, c0 = time.perf_counter(), time.process_time()
            got = await asyncio.to_thread(models[b].embed_documents, batch)
            wall[b] += time.perf_counter() - w0
            cpu[b] += time.process_time() - c0
            vectors[b].update(zip(batch, got, strict=True))
    base = BASELINE if BASELINE in backends else backends[0]
    print(f"\n== 1. embedding backends: {label}")
    print(
        f"{timed} of {total} chunks timed, batches of {settings.embed_batch_size} as the ingester "
        f"sends them, every batch through each backend in turn; {os.cpu_count()} cores; "
        f"ONNX threads {settings.embed_threads} (sub-batches of <= {_onnx_batch_tokens(models)} "
        f"padded tokens), torch threads {_torch_threads(models)}"
    )
    print(
        f"{'backend':<10} {'model id (table)':<22} {'load s':>6} {'chunks/s':>9} "
        f"{'vs ' + base:>9} {'chunks/CPU-s':>12} {'vs ' + base:>9}   cosine to {base}: min / mean"
    )
    ref = np.asarray([vectors[base][t] for t in vectors[base]], dtype=np.float64)
    for b in backends:
        mine = np.asarray([vectors[b][t] for t in vectors[base]], dtype=np.float64)
        cos = (mine * ref).sum(1) / (np.linalg.norm(mine, axis=1) * np.linalg.norm(ref, axis=1))
        print(
            f"{b:<10} {local_model_id(b):<22} {load_s[b]:6.1f} {timed / wall[b]:9.1f} "
            f"{_fmt_ratio(wall[base] / wall[b]):>9} {timed / cpu[b]:12.1f} "
            f"{_fmt_ratio(cpu[base] / cpu[b]):>9}   {cos.min():.6f} / {cos.mean():.6f}"
        )
    stores: dict[LocalBackend, KnowledgeStore] = {}
    print(f"{'backend':<10} ingest with those vectors: database time")
    for b in backends:
        slug = b.replace("-", "_")
        store = open_store(
            replace(settings, local_backend=b),
            embeddings=Precomputed(vectors[b], models[b], local_model_id(b)),
            table_name=f"bench_kb_{slug}",
        )
        await store.adrop()
        report = await aingest_paths(paths, store)
        print(
            f"{b:<10} {report.documents} documents, {report.chunks} chunks, "
            f"{len(report.errors)} errors, database {report.database_seconds:.1f} s "
            f"({report.chunks / max(report.database_seconds, 1e-9):.0f} chunks/s)"
        )
        stores[b] = store
    return stores


def _onnx_batch_tokens(models: dict[LocalBackend, Embeddings]) -> str:
    got = {int(getattr(m, "batch_tokens", 0)) for b, m in models.items() if b != "torch"}
    return ",".join(str(x) for x in sorted(got - {0})) or "-"


def _torch_threads(models: dict[LocalBackend, Embeddings]) -> str:
    if "torch" not in models:
        return "-"
    import torch

    return str(torch.get_num_threads())


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


DIM = 384
EF_SEARCH = (40, 100, 200)


def uniform_data(n: int, q: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Uniform in [-0.5, 0.5]^384; queries are stored vectors plus N(0, 0.1) noise. The worst
    case for any ANN index: apart from the vector a query was made from, every stored vector is
    at nearly the same cosine distance (~1), so true neighbours 2..10 differ from #11 by noise."""
    x = rng.uniform(-0.5, 0.5, (n, DIM)).astype(np.float32)
    queries = x[rng.choice(n, q, replace=False)] + rng.normal(0, 0.1, (q, DIM))
    return x, queries.astype(np.float32)


def clustered_data(n: int, q: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Clustered Gaussian with low intrinsic dimension, like text embeddings: 1,000 centres
    N(0, I), each point = its centre + a 32-d latent N(0, 0.6^2) mapped into 384-d by one fixed
    random matrix + N(0, 0.05^2) noise. Queries are fresh draws from the same mixture (not stored
    vectors), so each has real near neighbours."""
    centres = rng.normal(0, 1, (1000, DIM))
    basis = rng.normal(0, 1, (32, DIM)) / np.sqrt(32)

    def draw(m: int) -> np.ndarray:
        pts = centres[rng.integers(0, len(centres), m)]
        pts += rng.normal(0, 0.6, (m, 32)) @ basis + rng.normal(0, 0.05, (m, DIM))
        return pts.astype(np.float32)

    return draw(n), draw(q)


def copy_binary(x: np.ndarray) -> bytes:
    """PostgreSQL binary COPY of (g int4, embedding vector) rows, g = 1..n (pgvector's binary
    format: int16 dim, int16 0, float4 values, all big-endian)."""
    n, dim = x.shape
    row = np.dtype(
        [
            ("nf", ">i2"),
            ("glen", ">i4"),
            ("g", ">i4"),
            ("vlen", ">i4"),
            ("dim", ">i2"),
            ("unused", ">i2"),
            ("v", ">f4", (dim,)),
        ]
    )
    rows = np.empty(n, dtype=row)
    rows["nf"], rows["glen"], rows["g"] = 2, 4, np.arange(1, n + 1)
    rows["vlen"], rows["dim"], rows["unused"], rows["v"] = 4 + 4 * dim, dim, 0, x
    header = b"PGCOPY\n\xff\r\n\x00" + (0).to_bytes(4, "big") * 2
    return header + rows.tobytes() + (-1).to_bytes(2, "big", signed=True)


def vector_literal(v: np.ndarray) -> str:
    return "[" + ",".join(f"{float(a):.7g}" for a in v) + "]"


async def build_table(conn: Any, t: str, x: np.ndarray) -> tuple[float, float]:
    """Loads `x` as doc1..docN into the store's table `t` and builds the store's HNSW index
    (m 16, ef_construction 64). Returns (load seconds, index build seconds)."""
    t0 = time.perf_counter()
    async with conn.transaction():
        await conn.execute(f'DROP INDEX IF EXISTS "{t}_hnsw"')
        await conn.execute(f"CREATE TEMP TABLE stage (g int4, embedding vector({DIM}))")
        data = copy_binary(x)
        copy = "COPY stage (g, embedding) FROM STDIN (FORMAT BINARY)"
        async with conn.cursor() as cur, cur.copy(copy) as cp:
            for i in range(0, len(data), 1 << 22):
                await cp.write(data[i : i + (1 << 22)])
        await conn.execute(
            f'INSERT INTO "{t}" (langchain_id, content, embedding, doc_id, indexed_at, '
            "is_active, chunk_index, content_hash) SELECT gen_random_uuid(), 'chunk ' || g, "
            "embedding, 'doc' || g, now(), true, 0, 'h' FROM stage"
        )
        await conn.execute("DROP TABLE stage")
    load = time.perf_counter() - t0
    t0 = time.perf_counter()
    async with conn.transaction():
        await conn.execute("SET LOCAL maintenance_work_mem = '1GB'")
        await conn.execute(
            f'CREATE INDEX "{t}_hnsw" ON "{t}" USING hnsw (embedding vector_cosine_ops) '
            "WITH (m = 16, ef_construction = 64)"
        )
    await conn.execute(f'ANALYZE "{t}"')
    return load, time.perf_counter() - t0


async def sql_top10(conn: Any, t: str, v: str, ef: int | None) -> tuple[list[int], float]:
    """Top 10 doc numbers (0-based rows of x) and seconds. ef: the store's HNSW query (ef_search
    and relaxed iterative scan SET LOCAL in the query's own transaction); None: exact search,
    index scans off in that transaction (a sequential scan; the plan is checked in plan_check)."""
    settings = (
        [f"SET LOCAL hnsw.ef_search = {ef}", "SET LOCAL hnsw.iterative_scan = relaxed_order"]
        if ef
        else ["SET LOCAL enable_indexscan = off"]
    )
    t0 = time.perf_counter()
    async with conn.transaction():
        for s in settings:
            await conn.execute(s)
        cur = await conn.execute(
            f'SELECT doc_id FROM "{t}" WHERE is_active = true '
            "ORDER BY embedding <=> %s::vector LIMIT 10",
            (v,),
        )
        rows = await cur.fetchall()
    return [int(r[0][3:]) - 1 for r in rows], time.perf_counter() - t0


async def plan_check(conn: Any, t: str, v: str) -> None:
    """Fails loudly if the HNSW query does not use the index with the ef_search it was given, or
    the exact query does."""
    async with conn.transaction():
        await conn.execute("SET LOCAL hnsw.ef_search = 100")
        ef = (await (await conn.execute("SHOW hnsw.ef_search")).fetchone())[0]
        plan = " ".join(
            r[0]
            for r in await (
                await conn.execute(
                    f'EXPLAIN SELECT doc_id FROM "{t}" WHERE is_active = true '
                    "ORDER BY embedding <=> %s::vector LIMIT 10",
                    (v,),
                )
            ).fetchall()
        )
        assert ef == "100" and f"Index Scan using {t}_hnsw" in plan, (ef, plan[:200])
    async with conn.transaction():
        await conn.execute("SET LOCAL enable_indexscan = off")
        plan = " ".join(
            r[0]
            for r in await (
                await conn.execute(
                    f'EXPLAIN SELECT doc_id FROM "{t}" WHERE is_active = true '
                    "ORDER BY embedding <=> %s::vector LIMIT 10",
                    (v,),
                )
            ).fetchall()
        )
        assert "hnsw" not in plan and "Seq Scan" in plan, plan[:200]


def recall_row(label: str, found: list[list[int]], truth: np.ndarray, lat: list[float]) -> str:
    r10 = statistics.mean(len(set(f) & set(tr)) / 10 for f, tr in zip(found, truth, strict=True))
    nn1 = statistics.mean(tr[0] in f for f, tr in zip(found, truth, strict=True))
    return f"  {label:<34} recall@10 {r10:5.3f}   true #1 found {nn1:5.3f}   {ms(lat)}"


async def latency_big(settings: StoreSettings, n: int, queries: int) -> None:
    """HNSW recall@10 and latency on two synthetic sets of n vectors. The truth is exact top 10
    by cosine distance computed in numpy (float64) from the very vectors loaded; the exact SQL
    search (sequential scan) is timed and checked against it."""
    import psycopg

    rng = np.random.default_rng(0)
    print(
        f"\n== 3. HNSW on {n:,} 384-d vectors, {queries} queries per set (m 16, ef_construction 64)"
    )
    sets = (
        ("uniform", "uniform random, queries = stored vectors + noise", uniform_data),
        ("clustered", "1,000 Gaussian clusters, 32-d intrinsic, fresh queries", clustered_data),
    )
    for name, label, make in sets:
        x, qs = make(n, queries, rng)
        store = open_store(
            settings, embeddings=DeterministicFakeEmbedding(size=DIM), table_name=f"bench_{name}"
        )
        await store.adrop()
        await store.aensure_schema()
        t = store.table_name
        xn = x.astype(np.float64) / np.linalg.norm(x, axis=1, keepdims=True)
        qn = qs.astype(np.float64) / np.linalg.norm(qs, axis=1, keepdims=True)
        dist = 1.0 - qn @ xn.T
        order = np.argsort(dist, axis=1)
        truth = order[:, :10]
        ranked = np.take_along_axis(dist, order[:, :11], axis=1)
        vs = [vector_literal(q) for q in qs]
        # prepare_threshold=None: never server-side prepared statements. The exact and HNSW
        # queries share their SQL text, and a cached generic plan made with index scans off would
        # silently turn the "HNSW" runs into exact sequential scans (recall 1.000).
        async with await psycopg.AsyncConnection.connect(
            await asyncio.to_thread(store.database_url), autocommit=True, prepare_threshold=None
        ) as conn:
            load, build = await build_table(conn, t, x)
            await plan_check(conn, t, vs[0])
            print(
                f"\n{name}: {label}\n"
                f"  load {load:.1f} s, HNSW build {build:.1f} s; true cosine distance, mean over "
                f"queries: #1 {ranked[:, 0].mean():.3f}  #2 {ranked[:, 1].mean():.3f}  "
                f"#10 {ranked[:, 9].mean():.3f}  #11 {ranked[:, 10].mean():.3f}  "
                f"median {np.median(dist):.3f}"
            )
            exact = [await sql_top10(conn, t, v, None) for v in vs]
            print(
                recall_row(
                    "exact SQL (seq scan)", [e[0] for e in exact], truth, [e[1] for e in exact]
                )
            )
            for ef in EF_SEARCH:
                await sql_top10(conn, t, vs[0], ef)  # warm
                res = [await sql_top10(conn, t, v, ef) for v in vs]
                print(
                    recall_row(
                        f"HNSW ef_search {ef}", [r[0] for r in res], truth, [r[1] for r in res]
                    )
                )
        lat, found = [], []
        for q in qs:
            t0 = time.perf_counter()
            hits = await db_search(store, [float(a) for a in q], 10)
            lat.append(time.perf_counter() - t0)
            found.append([int(d.metadata["doc_id"][3:]) - 1 for d, _ in hits])
        print(recall_row("store search path (ef_search 64)", found, truth, lat))
        await store.adrop()
        await store.aclose()


async def recall_one(store: KnowledgeStore, chosen: list[dict[str, Any]]) -> dict[str, float]:
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
    n = len(chosen)
    return {
        "raw@1": raw_top1 / n,
        "raw@5": raw_hits / n,
        "cal@1": cal_top1 / n,
        "cal@5": calibrated_hits / n,
    }


async def recall_part(
    stores: dict[LocalBackend, KnowledgeStore], corpus: list[dict[str, Any]], n: int
) -> None:
    if not corpus or not (SQUAD / "questions.jsonl").exists():
        print(f"\n== 4. recall@5: skipped ({SQUAD} is absent: SQuAD data lives outside the project)")
        return
    qs = [json.loads(x) for x in (SQUAD / "questions.jsonl").open()]
    answerable = [q for q in qs if q["kind"] == "answerable"]
    random.Random(0).shuffle(answerable)
    chosen = answerable[:n]
    print(f"\n== 4. gold paragraph of {len(chosen)} answerable SQuAD questions (seed 0)")
    print(f"{'backend':<10} {'vector order':>22}   {'calibrated re-ranking':>22}")
    results = {b: await recall_one(store, chosen) for b, store in stores.items()}
    for b, r in results.items():
        print(
            f"{b:<10} @1 {r['raw@1']:.3f}  @5 {r['raw@5']:.3f}     "
            f"@1 {r['cal@1']:.3f}  @5 {r['cal@5']:.3f}"
        )
    if BASELINE in results:
        for b, r in results.items():
            if b != BASELINE:
                base = results[BASELINE]
                print(
                    f"{b} - {BASELINE}: recall@5 {100 * (r['raw@5'] - base['raw@5']):+.1f} points "
                    f"(vector order), {100 * (r['cal@5'] - base['cal@5']):+.1f} points (calibrated)"
                )


async def cold_part(
    settings: StoreSettings, backends: list[LocalBackend], runs: int
) -> None:
    """Cold `ask` per backend against this run's database (left running), sample KB ingested."""
    from dataclasses import replace

    from bench_cli import QUESTION, cold

    from grounded_agent.sample import SAMPLE_KB

    for b in backends:  # each backend's default table holds the sample knowledge base
        store = open_store(replace(settings, local_backend=b))
        report = await aingest_paths([SAMPLE_KB], store)
        assert not report.errors, report.errors
        await store.aclose()
    env = {
        "GROUNDED_AGENT_HOME": str(settings.home),
        "GROUNDED_AGENT_MODEL_CACHE": str(settings.models_dir),
        "GROUNDED_AGENT_SOURCES": "knowledge_base",
        "DATABASE_URL": "",  # this run's embedded server, whatever the shell says
    }
    answered: dict[LocalBackend, list[float]] = {b: [] for b in backends}
    exited: dict[LocalBackend, list[float]] = {b: [] for b in backends}
    statuses: dict[LocalBackend, set[str]] = {b: set() for b in backends}
    for _ in range(runs):
        for b in backends:
            r = await asyncio.to_thread(
                cold, 1, {**env, "GROUNDED_AGENT_EMBEDDING_BACKEND": b}
            )
            answered[b].append(r["seconds_median"])
            exited[b].append(r["exit_seconds_median"])
            statuses[b].update(r["statuses"])
    print(f"\n== 5. cold `grounded-agent ask` (offline, database running), {runs} runs each")
    print(f"question: {QUESTION}")
    for b in backends:
        print(
            f"{b:<10} to the answer: median {statistics.median(answered[b]):5.2f} s "
            f"(min {min(answered[b]):5.2f}, max {max(answered[b]):5.2f}); to exit "
            f"{statistics.median(exited[b]):5.2f} s; {sorted(statuses[b])}"
        )


async def main() -> None:
    parser = argparse.ArgumentParser(description="knowledge-store benchmark")
    parser.add_argument("--quick", action="store_true", help="fewer chunks timed, 20k vectors, 200 questions")
    parser.add_argument(
        "--backends",
        default=",".join(LOCAL_BACKENDS),
        help=f"local embedding backends to compare (default: {','.join(LOCAL_BACKENDS)})",
    )
    parser.add_argument("--skip-hnsw", action="store_true", help="leave out part 3")
    parser.add_argument("--cold", type=int, default=3, help="cold asks per backend (0: none)")
    args = parser.parse_args()
    backends: list[LocalBackend] = []
    for name in args.backends.split(","):
        if name.strip() not in LOCAL_BACKENDS:
            parser.error(f"unknown backend {name!r}: choose from {', '.join(LOCAL_BACKENDS)}")
        backends.append(next(b for b in LOCAL_BACKENDS if b == name.strip()))
    home = Path(tempfile.mkdtemp(prefix="ga-bench-"))
    workdir = Path(tempfile.mkdtemp(prefix="ga-bench-data-"))
    models = StoreSettings.from_env().models_dir  # the usual export, not one per run
    settings = StoreSettings(
        home=home, database_url=None, embeddings="local", table_name=None, model_cache=models
    )
    stores: dict[LocalBackend, KnowledgeStore] = {}
    try:
        paths, corpus, label = corpus_paths(workdir, args.quick)
        stores = await backends_part(
            settings, backends, paths, label, 256 if args.quick else None
        )
        default = stores.get("onnx") or next(iter(stores.values()))
        sample = [q for q in (SQUAD / "questions.jsonl").open()] if corpus else []
        questions = (
            [json.loads(x)["question"] for x in sample[: 100 if args.quick else 200]]
            if sample
            else ["How much does the Pro plan cost per user per month?"] * 50
        )
        await latency_1k(default, questions)
        if not args.skip_hnsw:
            await latency_big(
                settings, 20_000 if args.quick else 100_000, 50 if args.quick else 100
            )
        await recall_part(stores, corpus, 200 if args.quick else 500)
        for store in stores.values():
            await store.aclose()
        if args.cold > 0:
            await cold_part(settings, backends, args.cold)
    finally:
        stop_embedded_server(home)
        shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main())
