"""Filtered vector search by document access (issue 43): latency and recall@10 of the store's
own search for a principal in one or a few groups, against exact filtered search.

    .venv/bin/python benchmarks/bench_access.py [--quick] [--queries 200] [--ef-search 64]
        [--fetch 10] [--cases uncorrelated,own,other] [--modes off,relaxed,strict,...]
        [--variant 'ef_search=200,fetch=20,max_scan_tuples=2000' ...] [--access-index] [--json]
    .venv/bin/python benchmarks/bench_access.py --markdown RUN.json   (tables for results/)

The data: 20 groups x 5,000 chunks (100,000; --quick: 4 x 2,000), each chunk readable by exactly
one group (its `access` is one group name, g00..g19). No model runs: the vectors are synthetic
384-d unit vectors, clustered like text embeddings: 1,000 clusters of 100 chunks (a 32-d
latent spread plus noise, as bench_store.py's clustered set) in 50 topics of 20 clusters, so a
query's own cluster lies at cosine ~0.85, the rest of its topic at ~0.5 and other topics near
0: the nearest visible chunks stay graded beyond the few of its own cluster that a 5% principal
sees (make_data). They are loaded with binary COPY into a
table the store itself creates (KnowledgeStore.aensure_schema: its columns, its HNSW index with
its m and ef_construction, its reader role and row policy). The HNSW index is dropped for the
load and built again afterwards from the store's own definition (pg_indexes), as a bulk build.

Three cases, two tables:
- uncorrelated: each chunk's group is drawn at random (exactly 5,000 each); queries are fresh
  draws from the whole mixture. A principal's chunks are spread evenly through the index.
- correlated, own topics: each group owns 50 of the 1,000 clusters; the principal's queries come
  from its own groups' clusters (the everyday question of a member of the group).
- correlated, other topics: the same table; the queries come from clusters of groups the
  principal is not in (a question whose answer it may not read). Every neighbour the index
  finds first is invisible: the case where a filter starves the index. The true top 10 are then
  chunks of other clusters, many at nearly the same distance (see the cosines printed per
  case), so recall says less here than the cosine loss.

Principals: one group (g07: 5% of the chunks) and three groups (g03, g07, g15: 15%); in the
first case also a principal who sees everything (no access filter: the index's own recall at
this ef_search, the ceiling filtered reads are held against).

Each query runs the store's read path: store/access.py `reading(engine, viewer, role=...,
options=...)` (the transaction that sets the reader role and the groups the row policy reads,
and SET LOCAL of the options) around store/search.py `nearest()` (its SQL, its WHERE clause from
`filter_sql(None, viewer)`), on the store's own engine, limit 10. The options are the store's
(schema.HnswQueryOptions: ef_search 64, hnsw.iterative_scan = relaxed_order, statement timeout);
the rows without iterative scans add `hnsw.iterative_scan = off`, the strict rows `strict_order`.
"RLS" rows run as the reader role (the row policy applies, as in production); "WHERE only" rows
run as the connecting user, which bypasses the policy (only the query's WHERE clause filters).
The truth is the same `nearest()` with the same WHERE clause in the same kind of transaction
with index scans off (`enable_indexscan = off`: a sequential scan, its plan checked), on
connections of its own that never prepare statements (a cached generic plan made with index
scans off would otherwise turn later HNSW reads into exact scans); it is checked against numpy.
Beside recall, the cosine loss: the mean cosine of the true top 10 minus that of the rows found
(where many chunks lie at nearly the same distance, a miss may cost almost nothing). `--variant`
adds rows with other settings (ef_search, nearest()'s LIMIT, hnsw.max_scan_tuples, the order,
any SET LOCAL); `--access-index` adds a GIN index on `access` (an experiment, not the store's
schema). Latency is the whole read transaction (begin, role, settings, options, query,
commit) as the store pays it; `query` is the SELECT alone.

Runs against a throw-away embedded PostgreSQL (its own GROUNDED_AGENT_HOME, stopped at the end),
or DATABASE_URL if set (a table bench_access_* is created and dropped there).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from langchain_core.embeddings import DeterministicFakeEmbedding

from grounded_agent.blocking import run_blocking
from grounded_agent.principals import Viewer
from grounded_agent.store import KnowledgeStore, StoreSettings, open_store
from grounded_agent.store.access import READER_ROLE, reading
from grounded_agent.store.records import METADATA_COLUMN_NAMES, vector_literal
from grounded_agent.store.schema import HnswQueryOptions
from grounded_agent.store.search import filter_sql, nearest
from grounded_agent.store.server import stop_embedded_server

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine

DIM = 384
K = 10
STORE_EF_SEARCH = 64
"""What KnowledgeStore.asearch passes to HnswQueryOptions."""
PER_CLUSTER = 100
CLUSTERS_PER_TOPIC = 20
LATENT = 32
RECALL_TARGET = 0.95
P95_TARGET_MS = 50.0


def group_name(i: int) -> str:
    return f"g{i:02d}"


def principals(n_groups: int) -> list[tuple[str, tuple[int, ...]]]:
    """(label, group indices): one group and three groups (g07 and g03, g07, g15 at full size)."""
    if n_groups >= 16:
        return [("one group", (7,)), ("three groups", (3, 7, 15))]
    return [("one group", (1,)), ("three groups", (0, 1, 2))][: 1 if n_groups < 4 else 2]


@dataclass
class Data:
    """Unit vectors of clustered chunks, and the groups of each chunk in the two cases."""

    x: np.ndarray
    """(n, DIM) float32, unit length; row i is chunk c<i>."""
    cluster: np.ndarray
    """(n,) the cluster each chunk was drawn from."""
    cluster_group: np.ndarray
    """(clusters,) the group owning each cluster in the correlated case."""
    correlated: np.ndarray
    """(n,) each chunk's group when groups own clusters."""
    uncorrelated: np.ndarray
    """(n,) each chunk's group drawn at random (the same number per group)."""
    centres: np.ndarray = field(repr=False)
    basis: np.ndarray = field(repr=False)

    def draw(self, clusters: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Fresh unit vectors, one from each of `clusters`, drawn as the chunks were."""
        pts = self.centres[clusters] + rng.normal(0, 0.6, (len(clusters), LATENT)) @ self.basis
        pts += rng.normal(0, 0.05, (len(clusters), DIM))
        return unit(pts)


def unit(a: np.ndarray) -> np.ndarray:
    out: np.ndarray = (a / np.linalg.norm(a, axis=1, keepdims=True)).astype(np.float32)
    return out


def make_data(n_groups: int, per_group: int, rng: np.random.Generator) -> Data:
    """n_groups x per_group chunks in clusters of PER_CLUSTER, CLUSTERS_PER_TOPIC clusters to a
    topic (a topic centre N(0, 1), its clusters' centres N(0, 0.8^2) around it, each chunk a
    32-d latent spread N(0, 0.6^2) around its cluster centre plus N(0, 0.05^2) noise): a query's
    own cluster lies at cosine ~0.8, the rest of its topic at ~0.5, other topics near 0, so the
    nearest visible chunks stay graded beyond the few of its own cluster. In the correlated
    case group g owns an equal share of the clusters, chosen at random, and its chunks come
    from them; in the uncorrelated one each chunk's group is drawn at random."""
    n = n_groups * per_group
    n_clusters = max(n_groups, n // PER_CLUSTER)
    n_clusters -= n_clusters % n_groups
    n_topics = max(1, n_clusters // CLUSTERS_PER_TOPIC)
    topics = rng.normal(0, 1, (n_topics, DIM))
    centres = topics[np.arange(n_clusters) % n_topics] + rng.normal(0, 0.8, (n_clusters, DIM))
    basis = rng.normal(0, 1, (LATENT, DIM)) / np.sqrt(LATENT)
    cluster_group = rng.permutation(np.arange(n_clusters) % n_groups)
    correlated = np.repeat(np.arange(n_groups), per_group)
    cluster = np.empty(n, dtype=np.int64)
    for g in range(n_groups):
        own = np.flatnonzero(cluster_group == g)
        rows = correlated == g
        cluster[rows] = rng.permutation(np.resize(own, per_group))
    uncorrelated = rng.permutation(correlated)
    data = Data(
        x=np.empty((0, DIM), np.float32), cluster=cluster, cluster_group=cluster_group,
        correlated=correlated, uncorrelated=uncorrelated, centres=centres, basis=basis,
    )
    data.x = data.draw(cluster, rng)
    return data


def query_clusters(
    data: Data, groups: Sequence[int], topics: str, m: int, rng: np.random.Generator
) -> np.ndarray:
    """The clusters m queries are drawn from: 'any' the whole mixture, 'own' the clusters of the
    principal's groups, 'other' the clusters of the other groups (correlated case)."""
    if topics == "any":
        return data.cluster[rng.integers(0, len(data.cluster), m)]
    mine = np.isin(data.cluster_group, list(groups))
    pool = np.flatnonzero(mine if topics == "own" else ~mine)
    return rng.choice(pool, m)


def exact_top(
    x: np.ndarray, visible: np.ndarray, queries: np.ndarray, k: int
) -> tuple[np.ndarray, np.ndarray]:
    """The k visible rows nearest each query by cosine (float64), nearest first, and the
    cosines of the 50 nearest visible rows of each query (how graded the truth is)."""
    rows = np.flatnonzero(visible)
    sims = queries.astype(np.float64) @ x[rows].astype(np.float64).T
    order = np.argsort(-sims, axis=1, kind="stable")[:, : max(k, 50)]
    return np.asarray(rows[order[:, :k]]), np.take_along_axis(sims, order, axis=1)


def recall(found: Sequence[Sequence[int]], truth: Sequence[Sequence[int]], k: int = K) -> float:
    """Mean share of each query's true top k among the (at most k) rows returned."""
    return statistics.mean(
        len(set(f[:k]) & set(t[:k])) / min(k, len(t)) for f, t in zip(found, truth, strict=True)
    )


def cos_loss(
    x: np.ndarray, queries: np.ndarray, found: Sequence[Sequence[int]], true_cos: np.ndarray
) -> float:
    """Mean over queries of (mean cosine of the true top k) - (mean cosine of the k rows found):
    how much farther the rows returned are, where near-ties make recall say little. Queries
    that returned fewer than k rows are left out (the tables print '-' where there are any)."""
    k = true_cos.shape[1]
    losses = [
        float(true_cos[i].mean() - (x[list(f)] @ queries[i]).mean())
        for i, f in enumerate(found)
        if len(f) >= k
    ]
    return statistics.mean(losses) if losses else float("nan")


def pct(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


# --- the database --------------------------------------------------------------------------------


def copy_binary(x: np.ndarray, groups: np.ndarray) -> bytes:
    """PostgreSQL binary COPY of (i int4, grp int4, embedding vector) rows, i = 0..n-1."""
    n, dim = x.shape
    row = np.dtype([
        ("nf", ">i2"), ("ilen", ">i4"), ("i", ">i4"), ("glen", ">i4"), ("grp", ">i4"),
        ("vlen", ">i4"), ("dim", ">i2"), ("unused", ">i2"), ("v", ">f4", (dim,)),
    ])
    rows = np.empty(n, dtype=row)
    rows["nf"], rows["ilen"], rows["i"], rows["glen"], rows["grp"] = 3, 4, np.arange(n), 4, groups
    rows["vlen"], rows["dim"], rows["unused"], rows["v"] = 4 + 4 * dim, dim, 0, x
    header = b"PGCOPY\n\xff\r\n\x00" + (0).to_bytes(4, "big") * 2
    return header + rows.tobytes() + (-1).to_bytes(2, "big", signed=True)


async def load(url: str, table: str, x: np.ndarray, groups: np.ndarray) -> tuple[float, float, str]:
    """Fills the store's table: chunk c<i> with row i of `x`, active, access [g<groups[i]>]. The
    store's HNSW index is dropped for the load and built again from its own definition. Returns
    (load seconds, index build seconds, the index definition)."""
    import psycopg

    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        cur = await conn.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = %s "
            "AND indexdef ILIKE '%%USING hnsw%%'", (table,),
        )
        found = await cur.fetchall()
        assert len(found) == 1, f"expected the store's one HNSW index on {table}: {found}"
        name, indexdef = found[0]
        t0 = time.perf_counter()
        async with conn.transaction():
            await conn.execute(f'DROP INDEX "{name}"')
            await conn.execute(f"CREATE TEMP TABLE stage (i int4, grp int4, embedding vector({DIM}))")
            data = copy_binary(x, groups)
            async with conn.cursor() as c, c.copy(
                "COPY stage (i, grp, embedding) FROM STDIN (FORMAT BINARY)"
            ) as cp:
                for i in range(0, len(data), 1 << 22):
                    await cp.write(data[i : i + (1 << 22)])
            await conn.execute(
                f'INSERT INTO "{table}" (langchain_id, content, embedding, doc_id, title, '
                "indexed_at, is_active, language, chunk_index, content_hash, langchain_metadata, "
                "access) SELECT gen_random_uuid(), 'chunk ' || i, embedding, 'c' || i, "
                "'document ' || i, now(), true, 'en', 0, 'h', CAST('{}' AS json), "
                "ARRAY['g' || lpad(grp::text, 2, '0')] FROM stage"
            )
            await conn.execute("DROP TABLE stage")
        loaded = time.perf_counter() - t0
        t0 = time.perf_counter()
        async with conn.transaction():
            await conn.execute("SET LOCAL maintenance_work_mem = '1GB'")
            await conn.execute(indexdef)
        await conn.execute(f'VACUUM ANALYZE "{table}"')
        return loaded, time.perf_counter() - t0, str(indexdef)


@dataclass(frozen=True)
class Mode:
    key: str
    label: str
    iterative: str | None
    """hnsw.iterative_scan added after the store's options (None: the store's own)."""
    rls: bool
    exact: bool = False
    ef_search: int | None = None
    """None: --ef-search."""
    fetch: int | None = None
    """nearest()'s LIMIT (None: --fetch); recall@10 counts the 10 nearest rows it returns."""
    extra: tuple[str, ...] = ()


MODES = (
    Mode("exact", "exact (seq scan), truth", None, rls=False, exact=True),
    Mode("off", "HNSW, iterative off, RLS", "off", rls=True),
    Mode("relaxed", "HNSW, relaxed_order (store), RLS", None, rls=True),
    Mode("strict", "HNSW, strict_order, RLS", "strict_order", rls=True),
    Mode("off-where", "HNSW, iterative off, WHERE only", "off", rls=False),
    Mode("relaxed-where", "HNSW, relaxed_order, WHERE only", None, rls=False),
)


def variant(spec: str) -> Mode:
    """A further row from --variant, e.g. 'ef_search=200,fetch=40,max_scan_tuples=40000,
    order=strict_order' or 'plan_cache_mode=force_custom_plan': the store's read as the reader
    role with those changes (other names are SET LOCAL as they are)."""
    kv = dict(part.split("=", 1) for part in spec.split(",") if part.strip())
    ef = int(kv.pop("ef_search")) if "ef_search" in kv else None
    fetch = int(kv.pop("fetch")) if "fetch" in kv else None
    order = kv.pop("order", None)
    hnsw = {"max_scan_tuples", "scan_mem_multiplier"}
    extra = tuple(
        f"{'hnsw.' if k.strip() in hnsw else ''}{k.strip()} = {v.strip()}" for k, v in kv.items()
    )
    return Mode(spec, f"RLS, {order or 'relaxed_order'}, {spec}", order, rls=True,
                ef_search=ef, fetch=fetch, extra=extra)


def options_of(mode: Mode, ef_search: int, timeout_ms: int, extra: Sequence[str]) -> list[str]:
    """SET LOCAL options of a read: the store's, then the mode's and the command line's."""
    ef = mode.ef_search or ef_search
    opts = HnswQueryOptions(ef_search=ef, timeout_ms=timeout_ms).to_parameter()
    if mode.iterative is not None:
        opts.append(f"hnsw.iterative_scan = {mode.iterative}")
    if mode.exact:
        opts += ["enable_indexscan = off", "statement_timeout = 0"]
    return [*opts, *mode.extra, *extra]


@dataclass
class Pass:
    """One configuration's reads: rows found, read and query seconds."""

    found: list[list[int]] = field(default_factory=list)
    read_s: list[float] = field(default_factory=list)
    query_s: list[float] = field(default_factory=list)


async def run_pass(
    engine: AsyncEngine, table: str, viewer: Viewer, role: str | None, options: list[str],
    queries: np.ndarray, limit: int = K,
) -> Pass:
    out = Pass()
    for q in queries:
        vec = [float(a) for a in q]
        t0 = time.perf_counter()
        async with reading(engine, viewer, role=role, options=options) as conn:
            tq = time.perf_counter()
            rows = await nearest(conn, table, vec, limit, None, viewer)
            out.query_s.append(time.perf_counter() - tq)
        out.read_s.append(time.perf_counter() - t0)
        best = sorted(rows, key=lambda r: -r[2])[:K]  # by cosine: a relaxed scan's order is loose
        out.found.append([int(m["doc_id"][1:]) for m, _, _ in best])
    return out


async def plan_of(
    engine: AsyncEngine, table: str, viewer: Viewer, role: str | None, options: list[str],
    q: np.ndarray, limit: int = K,
) -> str:
    """EXPLAIN ANALYZE of nearest()'s SQL in the same transaction: the scan node's first line
    and how many rows the filter removed."""
    from sqlalchemy import text

    where, params = filter_sql(None, viewer)
    cols = ", ".join(f'"{n}"' for n in METADATA_COLUMN_NAMES)
    sql = (
        f"EXPLAIN (ANALYZE, COSTS OFF) SELECT {cols}, content, langchain_metadata, "
        "1 - (embedding <=> CAST(:vec AS vector)) AS cosine "
        f'FROM "{table}" WHERE {where} '
        "ORDER BY embedding <=> CAST(:vec AS vector) LIMIT :limit"
    )
    params.update(limit=limit, vec=vector_literal([float(a) for a in q]))
    async with reading(engine, viewer, role=role, options=options) as conn:
        lines = [str(r[0]) for r in (await conn.execute(text(sql), params)).all()]
    scan = next((ln.strip().lstrip("-> ") for ln in lines if "Scan" in ln), "?")
    removed = next((ln.strip() for ln in lines if "Rows Removed by Filter" in ln), "")
    return scan.split("  (")[0] + (f"; {removed}" if removed else "")


@dataclass
class Row:
    case: str
    principal: str
    share: float
    mode: str
    recall: float
    cos_loss: float
    """Mean cosine of the true top 10 minus that of the rows found (0: as near as the truth)."""
    short: int
    p50_ms: float
    p95_ms: float
    query_p50_ms: float
    query_p95_ms: float
    plan: str


CASES = (
    ("uncorrelated", "uncorrelated", "any"),
    ("correlated, own topics", "correlated", "own"),
    ("correlated, other topics", "correlated", "other"),
)
CASE_KEYS = ("uncorrelated", "own", "other")


async def bench(args: argparse.Namespace, settings: StoreSettings) -> list[Row]:
    from sqlalchemy.ext.asyncio import create_async_engine

    n_groups, per_group = (4, 2_000) if args.quick else (args.groups, args.per_group)
    rng = np.random.default_rng(args.seed)
    data = make_data(n_groups, per_group, rng)
    n = n_groups * per_group
    print(
        f"== filtered search: {n_groups} groups x {per_group:,} chunks ({n:,}; each chunk "
        f"readable by one group), {len(data.cluster_group):,} clusters, {DIM}-d unit vectors, "
        f"{args.queries} queries per principal and case, k {K} (LIMIT {args.fetch}), "
        f"ef_search {args.ef_search}"
        + (f", {'; '.join(args.set)}" if args.set else ""),
        file=sys.stderr,
    )
    rows: list[Row] = []
    timeout_ms = int(settings.query_timeout_s * 1000)
    who = principals(n_groups)
    cases = [(i, CASES[i]) for i, key in enumerate(CASE_KEYS) if key in args.cases]
    modes = [m for m in MODES if m.exact or m.key in args.modes]
    modes += [variant(v) for v in args.variant]
    for layout in ("uncorrelated", "correlated"):
        if not any(c[1] == layout for _, c in cases):
            continue
        groups = data.uncorrelated if layout == "uncorrelated" else data.correlated
        table = f"bench_access_{layout}"
        store: KnowledgeStore = open_store(
            settings, embeddings=DeterministicFakeEmbedding(size=DIM), table_name=table
        )
        await store.adrop()
        await store.aensure_schema()
        if not store.row_security:
            raise SystemExit("row-level security could not be set up: no RLS rows to measure")
        url = await asyncio.to_thread(store.database_url)
        loaded, built, indexdef = await load(url, table, data.x, groups)
        print(
            f"\n{layout}: loaded in {loaded:.1f} s, HNSW built in {built:.1f} s "
            f"({indexdef.split(' USING ')[1]})",
            file=sys.stderr,
        )
        if args.access_index:  # an experiment: not the store's schema
            import psycopg

            async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
                await conn.execute(
                    f'CREATE INDEX "{table}_access" ON "{table}" USING gin (access)'
                )
                await conn.execute(f'ANALYZE "{table}"')
            print("  with a GIN index on access (not the store's schema)", file=sys.stderr)
        engine = await store._ready()  # the store's engine, as every read uses it
        exact_engine = create_async_engine(
            store.sqlalchemy_url(), connect_args={"prepare_threshold": None}, pool_size=1
        )
        try:
            for c, (case, case_layout, topics) in cases:
                if case_layout != layout:
                    continue
                # the first case also reads as a principal who sees everything: no access
                # filter, the index's own recall at this ef_search (what filtering adds to it)
                everyone = [("everyone, no filter", None)] if c == cases[0][0] else []
                for label, gs in [*who, *everyone]:
                    if gs is None:
                        viewer, visible = Viewer(), np.ones(len(groups), dtype=bool)
                    else:
                        viewer = Viewer(groups=tuple(group_name(g) for g in gs))
                        visible = np.isin(groups, gs)
                    qrng = np.random.default_rng([args.seed, c, *(gs or (99,))])
                    qs = data.draw(
                        query_clusters(data, gs or (), "any" if gs is None else topics,
                                       args.queries, qrng),
                        qrng,
                    )
                    truth_np, cos = exact_top(data.x, visible, qs, K)
                    name = f"{label} ({', '.join(viewer.groups or ('all',))}: {visible.mean():.0%})"
                    print(
                        f"\n{case}; {name}\n  cosine of the nearest visible chunks, mean over "
                        "queries: " + "  ".join(
                            f"#{i + 1} {cos[:, i].mean():.3f}" for i in (0, 4, 9, 10, 19, 49)
                        ),
                        file=sys.stderr,
                    )
                    truth: list[list[int]] = []
                    for mode in modes:
                        opts = options_of(mode, args.ef_search, timeout_ms, args.set)
                        eng = exact_engine if mode.exact else engine
                        role = READER_ROLE if mode.rls else None
                        limit = K if mode.exact else (mode.fetch or args.fetch)
                        await run_pass(eng, table, viewer, role, opts, qs[:5], limit)  # warm
                        res = await run_pass(eng, table, viewer, role, opts, qs, limit)
                        if mode.exact:
                            truth = res.found
                            agree = recall(truth, truth_np.tolist())
                            print(f"  exact SQL against numpy: recall@10 {agree:.4f}",
                                  file=sys.stderr)
                        plan = await plan_of(eng, table, viewer, role, opts, qs[0], limit)
                        row = Row(
                            case=case, principal=name, share=float(visible.mean()),
                            mode=mode.label, recall=recall(res.found, truth),
                            cos_loss=cos_loss(data.x, qs, res.found, cos[:, :K]),
                            short=sum(len(f) < K for f in res.found),
                            p50_ms=pct(res.read_s, 0.5) * 1000, p95_ms=pct(res.read_s, 0.95) * 1000,
                            query_p50_ms=pct(res.query_s, 0.5) * 1000,
                            query_p95_ms=pct(res.query_s, 0.95) * 1000, plan=plan,
                        )
                        rows.append(row)
                        print(fmt_row(row), file=sys.stderr)
                        if mode.exact:  # the truth must not come through the HNSW index
                            assert "Scan" in plan and "hnsw" not in plan, plan
        finally:
            await exact_engine.dispose()
            await store.adrop()
            await store.aclose()
    return rows


HEAD = (
    f"  {'search':<34} {'recall@10':>9} {'cos loss':>8} {'<10 rows':>8} {'p50 ms':>7} {'p95 ms':>7} "
    f"{'query p50/p95':>14}  plan"
)


def loss_text(r: Row) -> str:
    return "-" if r.short else f"{round(r.cos_loss, 4) + 0.0:.4f}"  # no -0.0000


def fmt_row(r: Row) -> str:
    return (
        f"  {r.mode:<34} {r.recall:9.3f} {loss_text(r):>8} {r.short:8d} {r.p50_ms:7.1f} "
        f"{r.p95_ms:7.1f} "
        f"{r.query_p50_ms:6.1f}/{r.query_p95_ms:<7.1f}  {r.plan}"
    )


def summary(rows: Sequence[Row]) -> str:
    """The table of every row, and the targets met by the store's configuration."""
    out = ["", HEAD]
    last = ("", "")
    for r in rows:
        if (r.case, r.principal) != last:
            out.append(f"{r.case}; {r.principal}")
            last = (r.case, r.principal)
        out.append(fmt_row(r))
    store_rows = [r for r in rows if r.mode.startswith("HNSW, relaxed_order (store)")]
    met = [r for r in store_rows if r.recall >= RECALL_TARGET and r.p95_ms <= P95_TARGET_MS]
    out.append(
        f"\ntargets (recall@10 >= {RECALL_TARGET}, p95 <= {P95_TARGET_MS:.0f} ms, the store's "
        f"relaxed iterative scan with RLS): met in {len(met)} of {len(store_rows)}"
    )
    for r in store_rows:
        if r not in met:
            out.append(f"  missed: {r.case}; {r.principal}: recall@10 {r.recall:.3f}, "
                       f"p95 {r.p95_ms:.1f} ms")
    return "\n".join(out)


def markdown(rows: Sequence[Row]) -> str:
    """The rows as a Markdown table per case (for results/access.md)."""
    out: list[str] = []
    for case in dict.fromkeys(r.case for r in rows):
        out += [
            f"\n**{case}**\n",
            "| principal | search | recall@10 | cosine loss | < 10 rows | p50 ms | p95 ms | "
            "query p50 / p95 ms |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for r in rows:
            if r.case == case:
                out.append(
                    f"| {r.principal} | {r.mode} | {r.recall:.3f} | {loss_text(r)} | {r.short} "
                    f"| {r.p50_ms:.1f} | {r.p95_ms:.1f} | {r.query_p50_ms:.1f} / "
                    f"{r.query_p95_ms:.1f} |"
                )
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="4 groups x 2,000 chunks, 50 queries")
    parser.add_argument("--groups", type=int, default=20)
    parser.add_argument("--per-group", type=int, default=5_000)
    parser.add_argument("--queries", type=int, default=None, help="per principal and case (200)")
    parser.add_argument("--ef-search", type=int, default=STORE_EF_SEARCH)
    parser.add_argument(
        "--fetch", type=int, default=K,
        help="rows nearest() fetches (LIMIT); recall@10 counts the 10 nearest of them (default 10)",
    )
    parser.add_argument(
        "--set", action="append", default=[], metavar="OPTION",
        help="another SET LOCAL for every read, e.g. 'hnsw.max_scan_tuples = 40000'",
    )
    parser.add_argument(
        "--cases", type=lambda v: v.split(","), default=list(CASE_KEYS),
        help=f"comma-separated, of {','.join(CASE_KEYS)} (default: all)",
    )
    parser.add_argument(
        "--modes", type=lambda v: v.split(","), default=[m.key for m in MODES],
        help=f"comma-separated, of {','.join(m.key for m in MODES[1:])} (exact always runs)",
    )
    parser.add_argument(
        "--variant", action="append", default=[], metavar="SPEC",
        help="a further row as the reader role, e.g. 'ef_search=200,fetch=40' or "
        "'max_scan_tuples=40000,order=strict_order' (repeatable)",
    )
    parser.add_argument(
        "--access-index", action="store_true",
        help="an experiment: a GIN index on access as well (not the store's schema), so the "
        "planner may read a selective principal's chunks exactly through it",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true", help="the rows as JSON on stdout")
    parser.add_argument(
        "--markdown", metavar="JSON",
        help="print the rows of an earlier --json run as Markdown tables, and nothing else",
    )
    args = parser.parse_args()
    if args.markdown:
        rows = [Row(**r) for r in json.loads(Path(args.markdown).read_text())]
        print(markdown(rows) + "\n" + summary(rows))
        return
    if args.queries is None:
        args.queries = 50 if args.quick else 200
    base = StoreSettings.from_env()
    home: Path | None = None
    if base.database_url is None:
        home = Path(tempfile.mkdtemp(prefix="ga-bench-access-"))
        base = dataclasses.replace(base, home=home)
    try:
        rows = run_blocking(bench(args, base))
    finally:
        if home is not None:
            stop_embedded_server(home)
            shutil.rmtree(home, ignore_errors=True)
    if args.json:
        print(json.dumps([dataclasses.asdict(r) for r in rows], indent=1))
    else:
        print(summary(rows))


if __name__ == "__main__":
    main()
