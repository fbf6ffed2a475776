"""The knowledge store: chunks with citation metadata in PostgreSQL/pgvector, searched by meaning.

Reads go through langchain-postgres (`PGEngine`, `PGVectorStore`), with `is_active = true` and
the caller's filters in the SQL WHERE clause. Writes use plain SQL on the same engine because a
document's chunks, its term statistics and its version flags must change in one transaction
(`PGVectorStore.aadd_embeddings` commits row by row).

All database work runs on one background event loop per process, so the store can be used from
sync code, from any event loop, and from several threads.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import threading
import uuid
from collections import Counter
from collections.abc import Collection, Coroutine, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from langchain_core.embeddings import Embeddings
from pydantic import BaseModel, Field, model_validator
from sqlalchemy import text

from grounded_agent.schemas import Finding
from grounded_agent.store.embeddings import make_embeddings, model_id_of, table_name_for
from grounded_agent.store.errors import StoreError, StoreTimeout, StoreUnavailable
from grounded_agent.store.relevance import CalibratedRelevance
from grounded_agent.store.settings import StoreSettings, libpq_url, redact_url, sqlalchemy_url
from grounded_agent.text import STOPWORDS, terms

if TYPE_CHECKING:
    from langchain_postgres import PGEngine, PGVectorStore
    from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

log = logging.getLogger(__name__)

T = TypeVar("T")

_TABLE_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,49}$")
_SCHEMA_LOCK_KEY = 0x6B625F736368  # pg_advisory_lock key serialising CREATE EXTENSION/TABLE
_ID_NAMESPACE = uuid.UUID("5f0b3c1e-2a7d-4c55-9f1e-6b1f4d1c9a01")

METADATA_COLUMNS: tuple[tuple[str, str, bool], ...] = (
    ("doc_id", "TEXT", False),
    ("title", "TEXT", True),
    ("version", "TEXT", True),
    ("section", "TEXT", True),
    ("page", "INTEGER", True),
    ("source_url", "TEXT", True),
    ("document_date", "DATE", True),
    ("indexed_at", "TIMESTAMPTZ", False),
    ("is_active", "BOOLEAN", False),
    ("language", "TEXT", True),
    ("chunk_index", "INTEGER", False),
    ("content_hash", "TEXT", False),
)
METADATA_COLUMN_NAMES = [name for name, _, _ in METADATA_COLUMNS]

FETCH_K_MIN = 20
"""Candidates fetched by vector similarity before the calibrated re-ranking."""


class SearchFilters(BaseModel):
    """Metadata filters a caller may apply; inactive (superseded) versions are always excluded."""

    language: str | None = Field(default=None, description="ISO code, e.g. 'en'.")
    doc_ids: list[str] | None = Field(default=None, description="Only these documents.")
    date_from: date | None = Field(default=None, description="document_date on or after.")
    date_to: date | None = Field(default=None, description="document_date on or before.")

    @model_validator(mode="after")
    def _ordered(self) -> SearchFilters:
        if self.date_from and self.date_to and self.date_from > self.date_to:
            raise ValueError("date_from is after date_to")
        return self

    def to_filter(self) -> dict[str, Any]:
        """The langchain-postgres filter; it becomes the SQL WHERE clause."""
        return active_filter(self)


def active_filter(filters: SearchFilters | None) -> dict[str, Any]:
    clauses: list[dict[str, Any]] = [{"is_active": True}]
    if filters is not None:
        if filters.language:
            clauses.append({"language": filters.language})
        if filters.doc_ids:
            clauses.append({"doc_id": {"$in": list(filters.doc_ids)}})
        if filters.date_from:
            clauses.append({"document_date": {"$gte": filters.date_from}})
        if filters.date_to:
            clauses.append({"document_date": {"$lte": filters.date_to}})
    return clauses[0] if len(clauses) == 1 else {"$and": clauses}


def passage_text(title: str | None, section: str | None, content: str) -> str:
    """What is embedded, indexed and term-counted for a chunk: the document title and heading path
    (a question often names what the title says, "water", while the passage only says "charge"),
    then its text. A heading path that already starts with the title does not repeat it."""
    head = [h for h in (title, section) if h]
    if title and section and section.lower().startswith(title.lower()):
        head = [section]
    return "\n".join(head) + "\n\n" + content if head else content


SCHEMA_VERSION = 2
"""2: title embedded with each chunk, a full-text column, Snowball term statistics."""

FTS_CONFIGS: dict[str, str] = {
    "en": "english", "de": "german", "fr": "french", "es": "spanish", "it": "italian",
    "nl": "dutch", "pt": "portuguese", "sv": "swedish", "da": "danish", "no": "norwegian",
    "fi": "finnish", "ru": "russian",
}
"""PostgreSQL text search configuration per document language; other languages use 'simple'."""


def fts_config(language: str | None) -> str:
    return FTS_CONFIGS.get((language or "en").lower().split("-")[0], "simple")


_TSQUERY_TERM = re.compile(r"[^\W_]+")


def or_tsquery(query: str) -> str:
    """The question's content words joined by OR, for to_tsquery: a passage need not contain them
    all (plainto_tsquery would ask for every word of a natural question)."""
    words = [w for w in _TSQUERY_TERM.findall(query.lower()) if w not in STOPWORDS and len(w) > 1]
    return " | ".join(dict.fromkeys(words[:32]))


@dataclass(frozen=True)
class ChunkRecord:
    content: str
    chunk_index: int
    section: str | None = None
    page: int | None = None


@dataclass
class DocumentRecord:
    """One version of one document, ready to write (embeddings filled in by the ingester)."""

    doc_id: str
    title: str
    content_hash: str
    chunks: list[ChunkRecord]
    version: str | None = None
    source_url: str | None = None
    document_date: date | None = None
    language: str | None = None
    declared_active: bool | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    embeddings: list[list[float]] = field(default_factory=list)


@dataclass(frozen=True)
class WriteResult:
    status: Literal["added", "replaced", "skipped"]
    deactivated: int = 0


class StoreHealth(BaseModel):
    ok: bool
    backend: Literal["embedded", "external"]
    table: str
    database: str = Field(description="Database URL without password.")
    chunks: int | None = None
    active_chunks: int | None = None
    documents: int | None = None
    detail: str | None = None


class _HnswQueryOptions:
    """SET LOCAL options of a search: HNSW breadth, iterative scans so WHERE filters do not starve
    the index of candidates, and a statement timeout."""

    def __init__(self, ef_search: int, timeout_ms: int) -> None:
        self.ef_search = ef_search
        self.timeout_ms = timeout_ms

    def to_parameter(self) -> list[str]:
        return [
            f"hnsw.ef_search = {int(self.ef_search)}",
            "hnsw.iterative_scan = relaxed_order",
            f"statement_timeout = {int(self.timeout_ms)}",
        ]

    def to_string(self) -> str:
        return ", ".join(self.to_parameter())


class _BackgroundLoop:
    """One daemon event loop per process that owns every database connection."""

    _lock = threading.Lock()
    _loop: asyncio.AbstractEventLoop | None = None
    _thread: threading.Thread | None = None

    @classmethod
    def get(cls) -> asyncio.AbstractEventLoop:
        with cls._lock:
            if cls._loop is None or cls._thread is None or not cls._thread.is_alive():
                loop = asyncio.new_event_loop()
                thread = threading.Thread(
                    target=loop.run_forever, name="grounded-agent-store", daemon=True
                )
                thread.start()
                cls._loop, cls._thread = loop, thread
            return cls._loop

    @classmethod
    def in_loop_thread(cls) -> bool:
        return cls._thread is not None and threading.current_thread() is cls._thread


def _map_error(exc: BaseException, what: str) -> StoreError | None:
    """Database failures as StoreUnavailable/StoreTimeout; None for anything else (a bug)."""
    import psycopg
    from sqlalchemy.exc import DBAPIError, InterfaceError

    if isinstance(exc, StoreError):
        return exc
    orig = getattr(exc, "orig", None) or exc
    if isinstance(orig, psycopg.errors.QueryCanceled):
        return StoreTimeout(f"{what}: the database cancelled the statement (timeout)")
    if isinstance(orig, psycopg.OperationalError | psycopg.InterfaceError | OSError) or isinstance(
        exc, InterfaceError | ConnectionError
    ):
        first = str(orig).strip().splitlines()[0] if str(orig).strip() else type(orig).__name__
        return StoreUnavailable(f"{what}: database unreachable: {first}")
    if isinstance(exc, DBAPIError) and exc.connection_invalidated:
        return StoreUnavailable(f"{what}: database connection lost")
    return None


class KnowledgeStore:
    """Knowledge-base chunks of one embedding model in one table; nothing starts until first use.

    `relevance` is the calibrated scorer other tools use to put their passages on this scale.
    """

    def __init__(
        self,
        settings: StoreSettings | None = None,
        *,
        embeddings: Embeddings | None = None,
        table_name: str | None = None,
    ) -> None:
        self.settings = settings or StoreSettings.from_env()
        if embeddings is None:
            self._embeddings, self.model_id = make_embeddings(self.settings)
        else:
            self._embeddings, self.model_id = embeddings, model_id_of(embeddings)
        name = table_name or self.settings.table_name or table_name_for(self.model_id)
        if not _TABLE_NAME.match(name):
            raise ValueError(f"invalid table name {name!r}: use [a-z_][a-z0-9_]*, at most 50 chars")
        self.table_name = name
        self.terms_table = f"{name}_terms"
        self.relevance = CalibratedRelevance(self._embeddings, stats=self)
        self._engine: AsyncEngine | None = None
        self._pg_engine: PGEngine | None = None
        self._vectorstore: PGVectorStore | None = None
        self._url: str | None = None
        self._setup_lock: asyncio.Lock | None = None

    # --- connection ---------------------------------------------------------------------------

    @property
    def embeddings(self) -> Embeddings:
        return self._embeddings

    @property
    def backend(self) -> Literal["embedded", "external"]:
        return "embedded" if self.settings.embedded else "external"

    def database_url(self) -> str:
        """postgresql:// URL of the store's database (psycopg, langgraph-checkpoint-postgres).

        Starts the embedded server when no DATABASE_URL is set; raises StoreUnavailable.
        """
        if self._url is None:
            if self.settings.database_url is not None:
                self._url = libpq_url(self.settings.database_url)
            else:
                from grounded_agent.store.server import ensure_embedded_server

                self._url = ensure_embedded_server(self.settings.home)
        return self._url

    def sqlalchemy_url(self) -> str:
        """The same database as `database_url()`, as postgresql+psycopg:// for SQLAlchemy."""
        return sqlalchemy_url(self.database_url())

    async def _aengine(self) -> AsyncEngine:
        if self._engine is None:
            from sqlalchemy.ext.asyncio import create_async_engine

            url = await asyncio.to_thread(self.sqlalchemy_url)
            self._engine = create_async_engine(
                url,
                pool_size=5,
                max_overflow=5,
                pool_pre_ping=True,
                pool_recycle=1800,
                connect_args={"connect_timeout": max(1, round(self.settings.connect_timeout_s))},
            )
            log.debug("store engine for %s", redact_url(url))
        return self._engine

    async def _call(self, coro: Coroutine[Any, Any, T], what: str, limit: float | None) -> T:
        """Runs `coro` on the store's loop with a timeout, mapping database failures."""
        loop = _BackgroundLoop.get()
        try:
            if _BackgroundLoop.in_loop_thread():
                task: asyncio.Future[T] = asyncio.ensure_future(coro)
            else:
                task = asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, loop))
            return await asyncio.wait_for(task, limit) if limit else await task
        except TimeoutError as exc:
            if isinstance(exc, StoreError):
                raise
            raise StoreTimeout(f"{what}: no answer within {limit or 0:.1f}s") from None
        except Exception as exc:
            mapped = _map_error(exc, what)
            if mapped is None or mapped is exc:
                raise
            raise mapped from exc

    def _call_sync(self, coro: Coroutine[Any, Any, T], what: str, limit: float | None) -> T:
        if _BackgroundLoop.in_loop_thread():
            coro.close()
            raise RuntimeError("blocking store call from the store's own event loop")
        loop = _BackgroundLoop.get()
        return asyncio.run_coroutine_threadsafe(self._call(coro, what, limit), loop).result()

    # --- schema -------------------------------------------------------------------------------

    async def _aensure_schema(self) -> PGVectorStore:
        if self._vectorstore is not None:
            return self._vectorstore
        if self._setup_lock is None:
            self._setup_lock = asyncio.Lock()
        async with self._setup_lock:
            if self._vectorstore is not None:
                return self._vectorstore
            from langchain_postgres import PGEngine, PGVectorStore

            engine = await self._aengine()
            self._pg_engine = PGEngine.from_engine(engine, loop=_BackgroundLoop.get())
            async with engine.connect() as conn:
                await conn.execute(text("SELECT pg_advisory_lock(:k)"), {"k": _SCHEMA_LOCK_KEY})
                try:
                    exists = (
                        await conn.execute(
                            text("SELECT to_regclass(:t) IS NOT NULL"),
                            {"t": f'public."{self.table_name}"'},
                        )
                    ).scalar()
                    await conn.commit()
                    if not exists:
                        await self._acreate_table(conn)
                    elif await self._aadd_fulltext(conn):
                        await conn.commit()
                    else:
                        await conn.commit()
                finally:
                    await conn.execute(
                        text("SELECT pg_advisory_unlock(:k)"), {"k": _SCHEMA_LOCK_KEY}
                    )
                    await conn.commit()
            self._vectorstore = await PGVectorStore.create(
                engine=self._pg_engine,
                embedding_service=self._embeddings,
                table_name=self.table_name,
                metadata_columns=list(METADATA_COLUMN_NAMES),
                index_query_options=_HnswQueryOptions(  # type: ignore[arg-type]
                    ef_search=64, timeout_ms=int(self.settings.query_timeout_s * 1000)
                ),
            )
            return self._vectorstore

    async def _acreate_table(self, conn: AsyncConnection) -> None:
        from langchain_postgres import Column

        assert self._pg_engine is not None
        dim = len(await asyncio.to_thread(self._embeddings.embed_query, "dimension probe"))
        await self._pg_engine.ainit_vectorstore_table(
            table_name=self.table_name,
            vector_size=dim,
            metadata_columns=[
                Column(n, t, nullable=nullable) for n, t, nullable in METADATA_COLUMNS
            ],
        )
        t = self.table_name
        for ddl in (
            f'CREATE UNIQUE INDEX IF NOT EXISTS "{t}_chunk_key" '
            f"ON \"{t}\" (doc_id, coalesce(version, ''), chunk_index)",
            f'CREATE INDEX IF NOT EXISTS "{t}_active" '
            f'ON "{t}" (is_active, language, document_date)',
            f'CREATE INDEX IF NOT EXISTS "{t}_hnsw" ON "{t}" '
            "USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64)",
            f'CREATE TABLE IF NOT EXISTS "{self.terms_table}" '
            "(term TEXT PRIMARY KEY, df INTEGER NOT NULL)",
        ):
            await conn.execute(text(ddl))
        await self._aadd_fulltext(conn)
        await conn.commit()
        log.info("created knowledge-base table %s (%d dimensions)", t, dim)

    async def _aadd_fulltext(self, conn: AsyncConnection) -> bool:
        """Adds the full-text column and its GIN index; fills it for rows written before schema 2
        and recounts their term statistics with today's stemmer. True when it upgraded rows."""
        t = self.table_name
        has = (
            await conn.execute(
                text(
                    "SELECT 1 FROM information_schema.columns "
                    "WHERE table_schema = 'public' AND table_name = :t AND column_name = 'fts'"
                ),
                {"t": t},
            )
        ).first()
        if has:
            return False
        await conn.execute(text(f'ALTER TABLE "{t}" ADD COLUMN IF NOT EXISTS fts tsvector'))
        await conn.execute(
            text(f'CREATE INDEX IF NOT EXISTS "{t}_fts" ON "{t}" USING gin (fts)')
        )
        rows = (
            await conn.execute(text(f'SELECT langchain_id, title, section, content, language FROM "{t}"'))
        ).all()
        for r in rows:
            await conn.execute(
                text(
                    f'UPDATE "{t}" SET fts = to_tsvector(CAST(:cfg AS regconfig), :body) '
                    "WHERE langchain_id = :id"
                ),
                {"cfg": fts_config(r[4]), "body": passage_text(r[1], r[2], r[3]), "id": r[0]},
            )
        if rows:
            await conn.execute(text(f'DELETE FROM "{self.terms_table}"'))
            await self._abump_terms(conn, [passage_text(r[1], r[2], r[3]) for r in rows], 1)
            log.warning(
                "knowledge-base table %s upgraded to schema %d (full-text search, new term "
                "statistics); its embeddings predate titles: re-ingest into a new table for the "
                "full benefit", t, SCHEMA_VERSION,
            )
        return bool(rows)

    async def aensure_schema(self) -> None:
        """Creates the extension, table and indexes if absent (idempotent across processes)."""
        await self._call(self._aensure_schema(), "schema", self.settings.query_timeout_s * 6)

    def ensure_schema(self) -> None:
        self._call_sync(self._aensure_schema(), "schema", self.settings.query_timeout_s * 6)

    # --- search -------------------------------------------------------------------------------

    async def asearch(
        self, query: str, k: int = 5, filters: SearchFilters | None = None
    ) -> list[Finding]:
        """The k active chunks most relevant to `query`, best first, with calibrated scores.

        Raises StoreUnavailable when the database cannot be reached and StoreTimeout (a
        TimeoutError) when it does not answer in time: a failed search never returns [].
        """
        if not query.strip():
            raise ValueError("empty query")
        if k < 1:
            raise ValueError("k must be at least 1")
        vector = await asyncio.to_thread(self._embeddings.embed_query, query)
        return await self._call(
            self._asearch_by_vector(query, vector, k, filters),
            "search",
            self.settings.query_timeout_s,
        )

    def search(self, query: str, k: int = 5, filters: SearchFilters | None = None) -> list[Finding]:
        """Blocking `asearch`."""
        return self._call_sync(self.asearch(query, k, filters), "search", None)

    async def _asearch_by_vector(
        self, query: str, vector: list[float], k: int, filters: SearchFilters | None
    ) -> list[Finding]:
        """Hybrid candidates (nearest by meaning, and best by full-text match), then one re-rank
        over both decides the order: the two lists meet before the score, not after it."""
        vs = await self._aensure_schema()
        fetch_k = max(k * 4, FETCH_K_MIN)
        hits = await vs.asimilarity_search_with_score_by_vector(
            vector, k=fetch_k, filter=active_filter(filters)
        )
        candidates: dict[tuple[Any, ...], tuple[dict[str, Any], str, float]] = {}
        for doc, distance in hits:
            candidates[_chunk_key(doc.metadata)] = (
                doc.metadata, doc.page_content, 1.0 - float(distance)
            )
        for meta, content, cosine in await self._afulltext(query, vector, fetch_k, filters):
            candidates.setdefault(_chunk_key(meta), (meta, content, cosine))
        if not candidates:
            return []
        weights = await self.relevance.aterm_weights(query)
        rows = list(candidates.values())
        passages = [passage_text(m.get("title"), m.get("section"), c) for m, c, _ in rows]
        cosines = [cos for _, _, cos in rows]
        ranked = self.relevance.rank(weights, passages, cosines)
        return [_finding(rows[i][0], rows[i][1], sc, rows[i][2]) for i, sc in ranked[:k]]

    async def _afulltext(
        self, query: str, vector: list[float], limit: int, filters: SearchFilters | None
    ) -> list[tuple[dict[str, Any], str, float]]:
        """Active chunks that share words with the query, best ts_rank first, with their cosine."""
        tsq = or_tsquery(query)
        if not tsq:
            return []
        where, params = _filter_sql(filters)
        configs = sorted({*FTS_CONFIGS.values(), "simple"})
        q_expr = " || ".join(f"to_tsquery('{c}', :tsq)" for c in configs)
        cols = ", ".join(f'"{n}"' for n in METADATA_COLUMN_NAMES)
        sql = (
            f"WITH q AS (SELECT ({q_expr}) AS tq) "
            f"SELECT {cols}, content, langchain_metadata, "
            "1 - (embedding <=> CAST(:vec AS vector)) AS cosine "
            f'FROM "{self.table_name}", q WHERE fts @@ q.tq AND {where} '
            "ORDER BY ts_rank(fts, q.tq, 1) DESC, langchain_id LIMIT :limit"
        )
        params.update(
            tsq=tsq, limit=limit, vec="[" + ",".join(repr(float(x)) for x in vector) + "]"
        )
        engine = await self._aengine()
        async with engine.connect() as conn:
            rows = (await conn.execute(text(sql), params)).all()
        out = []
        for r in rows:
            meta = dict(zip(METADATA_COLUMN_NAMES, r[: len(METADATA_COLUMN_NAMES)], strict=True))
            extra = r[len(METADATA_COLUMN_NAMES) + 1]
            if isinstance(extra, dict):
                meta = {**extra, **meta}
            out.append((meta, str(r[len(METADATA_COLUMN_NAMES)]), float(r[-1])))
        return out

    # --- term statistics (TermStats) ----------------------------------------------------------

    async def _adfs(self, wanted: Collection[str]) -> tuple[int, dict[str, int]]:
        await self._aensure_schema()
        engine = await self._aengine()
        async with engine.connect() as conn:
            rows = (
                await conn.execute(
                    text(
                        f'SELECT term, df FROM "{self.terms_table}" WHERE term = ANY(:terms) AND df > 0'
                    ),
                    {"terms": ["", *sorted(set(wanted))]},
                )
            ).all()
        dfs = {str(r[0]): int(r[1]) for r in rows}
        return dfs.pop("", 0), dfs

    async def adocument_frequencies(self, wanted: Collection[str]) -> tuple[int, dict[str, int]]:
        """(number of chunks, document frequency of each term) from `<table>_terms`."""
        return await self._call(
            self._adfs(wanted), "term statistics", self.settings.query_timeout_s
        )

    def document_frequencies(self, wanted: Collection[str]) -> tuple[int, dict[str, int]]:
        return self._call_sync(self._adfs(wanted), "term statistics", self.settings.query_timeout_s)

    # --- writes (used by grounded_agent.store.ingest) ------------------------------------------

    async def _aknown_hashes(self, doc_ids: Sequence[str]) -> dict[tuple[str, str | None], str]:
        await self._aensure_schema()
        engine = await self._aengine()
        async with engine.connect() as conn:
            rows = (
                await conn.execute(
                    text(
                        f'SELECT DISTINCT doc_id, version, content_hash FROM "{self.table_name}" '
                        "WHERE doc_id = ANY(:ids)"
                    ),
                    {"ids": list(doc_ids)},
                )
            ).all()
        return {(str(r[0]), r[1]): str(r[2]) for r in rows}

    async def aknown_hashes(self, doc_ids: Sequence[str]) -> dict[tuple[str, str | None], str]:
        """Content hash stored for each (doc_id, version) among `doc_ids`."""
        return await self._call(
            self._aknown_hashes(doc_ids), "read hashes", self.settings.query_timeout_s
        )

    async def awrite_document(self, doc: DocumentRecord) -> WriteResult:
        """Writes one document version in one transaction: its chunks replace that version's old
        chunks, term statistics follow, and the latest version of the doc_id becomes the active one.
        """
        return await self._call(self._awrite(doc), f"write {doc.doc_id}", None)

    async def _awrite(self, doc: DocumentRecord) -> WriteResult:
        if len(doc.embeddings) != len(doc.chunks):
            raise ValueError("a document needs one embedding per chunk")
        await self._aensure_schema()
        engine = await self._aengine()
        t = self.table_name
        version_match = "version IS NOT DISTINCT FROM CAST(:version AS TEXT)"
        async with engine.begin() as conn:
            await conn.execute(
                text("SELECT pg_advisory_xact_lock(hashtextextended(:key, 0))"),
                {"key": f"{t}|{doc.doc_id}"},
            )
            rows = (
                await conn.execute(
                    text(
                        f'SELECT version, content_hash, is_active, section, content, title FROM "{t}" '
                        "WHERE doc_id = :doc_id"
                    ),
                    {"doc_id": doc.doc_id},
                )
            ).all()
            same = [r for r in rows if r[0] == doc.version]
            if same and all(r[1] == doc.content_hash for r in same):
                return WriteResult("skipped")
            active_before = {r[0] for r in rows if r[2]}
            params = {"doc_id": doc.doc_id, "version": doc.version}
            if same:
                await conn.execute(
                    text(f'DELETE FROM "{t}" WHERE doc_id = :doc_id AND {version_match}'), params
                )
                await self._abump_terms(
                    conn, [passage_text(r[5], r[3], r[4]) for r in same], -1
                )
            indexed_at = datetime.now().astimezone()
            meta = json.dumps({**doc.extra, "declared_active": doc.declared_active}, default=str)
            await conn.execute(
                text(
                    f'INSERT INTO "{t}" (langchain_id, content, embedding, doc_id, title, version, '
                    "section, page, source_url, document_date, indexed_at, is_active, language, "
                    "chunk_index, content_hash, langchain_metadata, fts) VALUES (:id, :content, "
                    "CAST(:embedding AS vector), :doc_id, :title, :version, :section, :page, "
                    ":source_url, :document_date, :indexed_at, false, :language, :chunk_index, "
                    ":content_hash, CAST(:meta AS json), "
                    "to_tsvector(CAST(:fts_config AS regconfig), :fts_text))"
                ),
                [
                    {
                        "id": uuid.uuid5(
                            _ID_NAMESPACE, f"{t}|{doc.doc_id}|{doc.version}|{c.chunk_index}"
                        ),
                        "content": c.content,
                        "embedding": "[" + ",".join(repr(float(x)) for x in vec) + "]",
                        "doc_id": doc.doc_id,
                        "title": doc.title,
                        "version": doc.version,
                        "section": c.section,
                        "page": c.page,
                        "source_url": doc.source_url,
                        "document_date": doc.document_date,
                        "indexed_at": indexed_at,
                        "language": doc.language,
                        "chunk_index": c.chunk_index,
                        "content_hash": doc.content_hash,
                        "meta": meta,
                        "fts_config": fts_config(doc.language),
                        "fts_text": passage_text(doc.title, c.section, c.content),
                    }
                    for c, vec in zip(doc.chunks, doc.embeddings, strict=True)
                ],
            )
            await self._abump_terms(
                conn, [passage_text(doc.title, c.section, c.content) for c in doc.chunks], 1
            )
            await conn.execute(
                text(
                    f"""WITH v AS (
                        SELECT version, max(document_date) AS d, max(indexed_at) AS t,
                          bool_and(coalesce(
                            (langchain_metadata->>'declared_active')::boolean, true)) AS ok
                        FROM "{t}" WHERE doc_id = :doc_id GROUP BY version
                    ), w AS (
                        SELECT version FROM v WHERE ok ORDER BY d DESC NULLS LAST, t DESC LIMIT 1)
                    UPDATE "{t}" AS c
                    SET is_active = EXISTS (
                        SELECT 1 FROM w WHERE w.version IS NOT DISTINCT FROM c.version)
                    WHERE c.doc_id = :doc_id"""
                ),
                {"doc_id": doc.doc_id},
            )
            active_after = {
                r[0]
                for r in (
                    await conn.execute(
                        text(
                            f'SELECT DISTINCT version FROM "{t}" '
                            "WHERE doc_id = :doc_id AND is_active"
                        ),
                        {"doc_id": doc.doc_id},
                    )
                ).all()
            }
        return WriteResult("replaced" if same else "added", len(active_before - active_after))

    async def _abump_terms(self, conn: AsyncConnection, passages: Sequence[str], sign: int) -> None:
        counts: Counter[str] = Counter()
        for p in passages:
            counts.update(set(terms(p)))
        counts[""] = len(passages)  # the row '' holds the number of chunks
        keys = sorted(counts)
        await conn.execute(
            text(
                f'INSERT INTO "{self.terms_table}" AS s (term, df) '
                "SELECT term, df FROM unnest(CAST(:terms AS text[]), CAST(:dfs AS integer[])) "
                "AS u(term, df) ORDER BY term "
                "ON CONFLICT (term) DO UPDATE SET df = s.df + EXCLUDED.df"
            ),
            {"terms": keys, "dfs": [sign * counts[k] for k in keys]},
        )

    # --- maintenance --------------------------------------------------------------------------

    async def _acounts(self) -> tuple[int, int, int]:
        await self._aensure_schema()
        engine = await self._aengine()
        async with engine.connect() as conn:
            row = (
                await conn.execute(
                    text(
                        "SELECT count(*), count(*) FILTER (WHERE is_active), "
                        f'count(DISTINCT doc_id) FILTER (WHERE is_active) FROM "{self.table_name}"'
                    )
                )
            ).one()
        return int(row[0]), int(row[1]), int(row[2])

    async def acounts(self) -> tuple[int, int, int]:
        """(chunks, active chunks, active documents)."""
        return await self._call(self._acounts(), "count", self.settings.query_timeout_s)

    def counts(self) -> tuple[int, int, int]:
        return self._call_sync(self._acounts(), "count", self.settings.query_timeout_s)

    async def ahealthcheck(self) -> StoreHealth:
        """Whether the database answers and what the table holds; never raises for a dead store."""
        database = "embedded PostgreSQL" if self.settings.embedded else "?"
        try:
            if not self.settings.embedded:
                database = redact_url(self.settings.database_url or "")
            chunks, active, docs = await self.acounts()
        except StoreError as exc:
            return StoreHealth(
                ok=False,
                backend=self.backend,
                table=self.table_name,
                database=database,
                detail=str(exc),
            )
        if self.settings.embedded and self._url:
            database = redact_url(self._url)
        return StoreHealth(
            ok=True,
            backend=self.backend,
            table=self.table_name,
            database=database,
            chunks=chunks,
            active_chunks=active,
            documents=docs,
        )

    def healthcheck(self) -> StoreHealth:
        loop = _BackgroundLoop.get()
        return asyncio.run_coroutine_threadsafe(self.ahealthcheck(), loop).result()

    async def _adrop(self) -> None:
        engine = await self._aengine()
        async with engine.begin() as conn:
            await conn.execute(text(f'DROP TABLE IF EXISTS "{self.table_name}"'))
            await conn.execute(text(f'DROP TABLE IF EXISTS "{self.terms_table}"'))
        self._vectorstore = None

    async def adrop(self) -> None:
        """Drops the table and its term statistics (tests, re-indexing with another model)."""
        await self._call(self._adrop(), "drop", self.settings.query_timeout_s * 3)

    async def _aclose(self) -> None:
        if self._engine is not None:
            await self._engine.dispose()
        self._engine = None
        self._pg_engine = None
        self._vectorstore = None

    async def aclose(self) -> None:
        """Closes the connection pool; the embedded server keeps running for other processes."""
        await self._call(self._aclose(), "close", None)

    def close(self) -> None:
        self._call_sync(self._aclose(), "close", None)

    def run_sync(self, coro: Coroutine[Any, Any, T]) -> T:
        """Runs a coroutine that uses this store to completion from blocking code."""
        if _BackgroundLoop.in_loop_thread():
            coro.close()
            raise RuntimeError("blocking store call from the store's own event loop")
        return asyncio.run_coroutine_threadsafe(coro, _BackgroundLoop.get()).result()


def _finding(meta: dict[str, Any], content: str, score: float, cosine: float) -> Finding:
    known = set(METADATA_COLUMN_NAMES) | {"declared_active"}
    extra = {k: v for k, v in meta.items() if k not in known and v is not None}
    return Finding(
        source="knowledge_base",
        source_id=str(meta["doc_id"]),
        title=str(meta.get("title") or meta["doc_id"]),
        text=content,
        section=meta.get("section"),
        version=meta.get("version"),
        page=meta.get("page"),
        url=meta.get("source_url"),
        document_date=meta.get("document_date"),
        indexed_at=meta.get("indexed_at"),
        language=meta.get("language"),
        chunk_index=meta.get("chunk_index"),
        score=min(1.0, max(0.0, score)),
        raw_score=cosine,
        extra=extra,
    )


def _chunk_key(meta: dict[str, Any]) -> tuple[Any, ...]:
    return (meta.get("doc_id"), meta.get("version"), meta.get("chunk_index"))


def _filter_sql(filters: SearchFilters | None) -> tuple[str, dict[str, Any]]:
    """The same conditions as `active_filter`, as SQL for the full-text query."""
    clauses: list[str] = ["is_active"]
    params: dict[str, Any] = {}
    if filters is not None:
        if filters.language:
            clauses.append("language = :f_language")
            params["f_language"] = filters.language
        if filters.doc_ids:
            clauses.append("doc_id = ANY(:f_doc_ids)")
            params["f_doc_ids"] = list(filters.doc_ids)
        if filters.date_from:
            clauses.append("document_date >= :f_date_from")
            params["f_date_from"] = filters.date_from
        if filters.date_to:
            clauses.append("document_date <= :f_date_to")
            params["f_date_to"] = filters.date_to
    return " AND ".join(clauses), params


def open_store(
    settings: StoreSettings | None = None,
    *,
    embeddings: Embeddings | None = None,
    table_name: str | None = None,
) -> KnowledgeStore:
    """The knowledge store configured by `settings` (default: the environment). Lazy: no model is
    loaded and no database contacted until the first search or ingestion."""
    return KnowledgeStore(settings, embeddings=embeddings, table_name=table_name)


__all__ = [
    "DocumentRecord",
    "KnowledgeStore",
    "SearchFilters",
    "StoreHealth",
    "WriteResult",
    "open_store",
]
