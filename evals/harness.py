"""The evaluation run: knowledge base into its own table, the sample through each system, graded."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import sys
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evals.baselines import SYSTEMS, plain_rag, thresholds_only
from evals.data import EvalQuestion, EvalSet
from evals.grading import Graded, Response, grade
from grounded_agent.context import Context
from grounded_agent.schemas import Finding

if TYPE_CHECKING:
    from langchain_core.vectorstores import InMemoryVectorStore
    from langgraph.graph.state import CompiledStateGraph

    from grounded_agent.store import IngestReport, KnowledgeStore
    from grounded_agent.tools.base import SourceTool

log = logging.getLogger(__name__)

DEFAULT_CONCURRENCY = 4


def table_name_for_corpus(model_id: str, digest: str) -> str:
    """eval_<model>_<corpus digest>: one table per (embedding model, corpus), reused across runs."""
    slug = re.sub(r"[^a-z0-9]+", "_", model_id.lower()).strip("_") or "model"
    return f"eval_{slug[:28]}_{digest[:12]}"


def open_eval_store(eval_set: EvalSet, table_name: str | None = None) -> KnowledgeStore:
    """A store on the configured database and embeddings, with the corpus's own table."""
    from grounded_agent.store import open_store

    probe = open_store()
    name = table_name or table_name_for_corpus(probe.model_id, eval_set.corpus_digest())
    return open_store(probe.settings, table_name=name)


def kb_file(eval_set: EvalSet, store: KnowledgeStore) -> Path:
    """What to ingest: the given JSON Lines file or documents folder, or the converted corpus
    written to a JSON Lines file cached by table name."""
    if eval_set.kb_path is not None:
        return eval_set.kb_path
    path = store.settings.home / "eval" / f"{store.table_name}.jsonl"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        with tmp.open("w", encoding="utf-8") as fh:
            for doc in eval_set.kb_docs:
                fh.write(json.dumps(doc, ensure_ascii=False) + "\n")
        tmp.replace(path)
    return path


async def aingest(eval_set: EvalSet, store: KnowledgeStore, progress: bool) -> IngestReport:
    """Idempotent: documents already in the table with the same content are skipped."""
    from grounded_agent.store import aingest_paths

    return await aingest_paths([kb_file(eval_set, store)], store, progress=progress)


@asynccontextmanager
async def ingested(eval_set: EvalSet) -> AsyncIterator[KnowledgeStore]:
    """The set's evaluation store with its documents in, closed when the block ends."""
    store = open_eval_store(eval_set)
    try:
        await aingest(eval_set, store, progress=False)
        yield store
    finally:
        await store.aclose()


@dataclass
class RunResult:
    rows: list[Graded]
    gold_ranks: dict[str, int | None] = field(default_factory=dict)
    best_scores: dict[str, float | None] = field(default_factory=dict)
    """Best calibrated relevance of each question's shared top-k search (None: search failed)."""
    seconds: float = 0.0


def gold_rank(
    findings: Sequence[Finding], gold: str | None, version: str | None = None
) -> int | None:
    """1-based rank of the first passage of the gold document (at `version`, when given)."""
    if gold is None:
        return None
    for i, f in enumerate(findings, 1):
        if f.source_id == gold and (version is None or f.version == version):
            return i
    return None


def versions_of(cited: Sequence[str], findings: Sequence[Finding]) -> list[str | None]:
    """The version of each cited document among the passages it was drawn from."""
    by_id: dict[str, str | None] = {}
    for f in findings:
        by_id.setdefault(f.source_id, f.version)
    return [by_id.get(c) for c in cited]


async def _timed(coro_fn: Callable[[], Any]) -> tuple[Any, float]:
    started = time.perf_counter()
    value = await coro_fn()
    return value, (time.perf_counter() - started) * 1000


async def run_question(
    q: EvalQuestion,
    *,
    store: KnowledgeStore,
    graph: CompiledStateGraph[Any, Any, Any, Any],
    ctx: Context,
    systems: Sequence[str] = SYSTEMS,
) -> tuple[list[Graded], int | None, float | None]:
    """Every system on one question: (graded rows, gold rank, best relevance).

    One top-k search of the question is always made: the baselines answer from it, and it gives
    the gold rank and the best relevance the report measures retrieval and reliability on. The
    graph runs its own searches.
    """
    from grounded_agent.api import aask

    rows: list[Graded] = []
    search_error: str | None = None
    findings: list[Finding] = []
    started = time.perf_counter()
    try:
        findings = await store.asearch(q.question, k=ctx.top_k)
    except Exception as exc:  # a failed search is an unavailable answer, not a crash
        search_error = f"{type(exc).__name__}: {exc}"
    search_ms = (time.perf_counter() - started) * 1000
    rank = gold_rank(findings, q.gold_doc_id, q.gold_version)
    best = None if search_error else max((f.score for f in findings), default=0.0)
    if "plain_rag" in systems or "thresholds_only" in systems:
        for name in ("thresholds_only", "plain_rag"):
            if name not in systems:
                continue
            t0 = time.perf_counter()
            if search_error is not None:
                resp = Response(status="unavailable", error=search_error)
            elif name == "plain_rag":
                resp = plain_rag(q.question, findings)
            else:
                resp = thresholds_only(q.question, findings, ctx.found_threshold, ctx.low_threshold)
            resp.cited_versions = versions_of(resp.cited, findings)
            resp.latency_ms = search_ms + (time.perf_counter() - t0) * 1000
            rows.append(grade(q, resp, name, rank))
    if "full_graph" in systems:
        started = time.perf_counter()
        try:
            result = await aask(q.question, graph=graph, context=ctx)
            resp = Response(
                status=result.status,
                answer=result.answer if result.status not in ("not_found", "unavailable") else "",
                cited=[c.source_id for c in result.citations],
                cited_versions=[c.version for c in result.citations],
                llm_calls=result.usage.llm_calls,
                attempts=result.attempts,
                confidence=result.confidence.level,
                best_score=max((c.score for c in result.citations), default=None),
                closest=[p.source_id for p in result.closest],
            )
        except Exception as exc:  # recorded as unavailable; the run goes on
            log.warning("agent failed on %s: %s", q.id, exc, exc_info=True)
            resp = Response(status="unavailable", error=f"{type(exc).__name__}: {exc}")
        resp.latency_ms = (time.perf_counter() - started) * 1000
        rows.append(grade(q, resp, "full_graph", rank))
    return rows, rank, best


async def arun_sample(
    sample: Sequence[EvalQuestion],
    *,
    store: KnowledgeStore,
    graph: CompiledStateGraph[Any, Any, Any, Any],
    ctx: Context,
    systems: Sequence[str] = SYSTEMS,
    concurrency: int = DEFAULT_CONCURRENCY,
    progress: bool = True,
) -> RunResult:
    """Runs the sample, a few questions at a time, with a progress bar on stderr."""
    from tqdm import tqdm

    started = time.perf_counter()
    sem = asyncio.Semaphore(max(1, concurrency))
    bar = tqdm(total=len(sample), unit="q", desc="evaluating", file=sys.stderr,
               disable=not progress, dynamic_ncols=True)
    result = RunResult(rows=[])

    async def one(q: EvalQuestion) -> None:
        async with sem:
            rows, rank, best = await run_question(q, store=store, graph=graph, ctx=ctx,
                                                  systems=systems)
        result.rows.extend(rows)
        result.gold_ranks[q.id] = rank
        result.best_scores[q.id] = best
        bar.update(1)

    try:
        await asyncio.gather(*(one(q) for q in sample))
    finally:
        bar.close()
    order = {q.id: i for i, q in enumerate(sample)}
    result.rows.sort(key=lambda r: (order[r.id], SYSTEMS.index(r.system)))
    result.seconds = time.perf_counter() - started
    return result


async def awarm_up(store: KnowledgeStore) -> float:
    """Loads the embedding model and opens the pool before anything is timed; returns seconds."""
    started = time.perf_counter()
    await store.asearch("warm up", k=1)
    return time.perf_counter() - started


USER_SOURCE = "user_vectorstore"
"""The name the evaluation gives a knowledge base brought as a user would bring it."""


async def user_vectorstore(store: KnowledgeStore) -> InMemoryVectorStore:
    """The store's searched chunks (text and metadata) in a LangChain `InMemoryVectorStore` over
    the shipped embeddings: the same documents as a user would keep them in a store of their own
    (no full-text half, no term statistics table)."""
    from langchain_core.documents import Document
    from langchain_core.vectorstores import InMemoryVectorStore
    from sqlalchemy import text

    from grounded_agent.store.embeddings import local_embeddings

    engine = await store._ready()
    sql = (
        "SELECT content, doc_id, title, section, version, document_date, chunk_index, page, "
        f'source_url FROM "{store.table_name}" WHERE is_active ORDER BY doc_id, chunk_index'
    )
    async with engine.connect() as conn:
        rows = (await conn.execute(text(sql))).all()
    docs = [
        Document(
            page_content=r[0],
            metadata={k: v for k, v in zip(
                ("doc_id", "title", "section", "version", "document_date", "chunk_index", "page",
                 "url"), r[1:], strict=True) if v is not None},
        )
        for r in rows
    ]
    vs = InMemoryVectorStore(local_embeddings())
    await vs.aadd_documents(docs)
    return vs


async def vectorstore_source(store: KnowledgeStore, *, corpus_stats: bool = True) -> SourceTool:
    """`user_vectorstore` as a source through `grounded_agent.sources.from_vectorstore`, so the
    calibration across sources is measured: with the in-memory store's own documents as its
    term statistics, or (`corpus_stats=False`) general English, as for a retriever brought
    without its corpus."""
    from grounded_agent.sources import from_vectorstore
    from grounded_agent.store.embeddings import local_embeddings
    from grounded_agent.store.relevance import CalibratedRelevance

    vs = await user_vectorstore(store)
    if corpus_stats:
        return from_vectorstore(vs, name=USER_SOURCE)
    plain = CalibratedRelevance(local_embeddings(), stats=None)
    return from_vectorstore(vs, name=USER_SOURCE, relevance=plain)
