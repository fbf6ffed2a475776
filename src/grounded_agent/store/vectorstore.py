"""The knowledge store: chunks with citation metadata in PostgreSQL/pgvector, searched by meaning.

A thin facade over one module per concern: `errors` (timeouts and database errors, on the
process loop of `grounded_agent.blocking`), `schema` (tables and upgrades), `writes` (document versions, term statistics)
and `search` (the hybrid read path), `access` (who may read which chunk). The tables are
langchain-postgres's (`PGEngine`, `PGVectorStore`); reads and writes are plain SQL on the same
engine, reads in a transaction as the caller (store/access.py).

Every operation has one async form; the blocking forms are generated from it (`blocking.blocking`).
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import AsyncIterator, Collection, Coroutine, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from langchain_core.embeddings import Embeddings
from sqlalchemy import text

from grounded_agent.blocking import blocking, process_loop, run_blocking
from grounded_agent.documents import DocumentList, DocumentQuery
from grounded_agent.principals import Viewer, current_viewer
from grounded_agent.schemas import Finding
from grounded_agent.store import access, catalog, documents, schema, search, writes
from grounded_agent.store.catalog import DocumentDetail, DocumentVersion, KnownVersion, Removal
from grounded_agent.store.embeddings import make_embeddings, model_id_of, table_name_for
from grounded_agent.store.errors import StoreError, guarded
from grounded_agent.store.records import (
    METADATA_COLUMN_NAMES,
    METADATA_COLUMNS,
    ChunkRecord,
    DocumentRecord,
    SearchFilters,
    StoreHealth,
    WriteResult,
    active_filter,
    fts_config,
    passage_text,
)
from grounded_agent.store.relevance import CalibratedRelevance
from grounded_agent.store.schema import SCHEMA_VERSION
from grounded_agent.store.search import FETCH_K_MIN, or_tsquery
from grounded_agent.store.settings import StoreSettings, libpq_url, redact_url, sqlalchemy_url

if TYPE_CHECKING:
    from langchain_postgres import PGEngine, PGVectorStore
    from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

log = logging.getLogger(__name__)

CONNECT_RETRY_S = 30.0
"""How long a connection refused for the database's connection limit is retried: other runs
(CLI commands in a loop, a server) end and free theirs."""

T = TypeVar("T")

_TABLE_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,49}$")


class KnowledgeStore:
    """Knowledge-base chunks of one embedding model in one table; nothing starts until first use.

    `relevance` is the calibrated scorer that reads this knowledge base's term statistics.
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
        self._reader_role: str | None = None

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
                async_creator=self._connect,
            )
            log.debug("store engine for %s", redact_url(url))
        return self._engine

    async def _connect(self) -> Any:
        """A new connection; one refused by a busy database (its connection limit reached, or
        starting up) is retried for up to CONNECT_RETRY_S before the refusal is raised."""
        import psycopg

        from grounded_agent.store.errors import busy_reason

        deadline = asyncio.get_running_loop().time() + CONNECT_RETRY_S
        pause = 0.1
        while True:
            try:
                return await psycopg.AsyncConnection.connect(
                    self.database_url(),
                    connect_timeout=max(1, round(self.settings.connect_timeout_s)),
                )
            except psycopg.OperationalError as exc:
                reason = busy_reason(exc)
                if reason is None or asyncio.get_running_loop().time() + pause > deadline:
                    raise
                log.info("%s: waiting %.1fs for a connection", reason, pause)
                await asyncio.sleep(pause)
                pause = min(pause * 2, 2.0)

    async def _call(self, coro: Coroutine[Any, Any, T], what: str, limit: float | None) -> T:
        """Runs `coro` on the process loop with a timeout, mapping database failures."""
        return await guarded(coro, what, limit)

    async def _aensure_schema(self) -> PGVectorStore:
        """The tables (created or upgraded once per store) and the vector store reading them."""
        if self._vectorstore is not None:
            return self._vectorstore
        if self._setup_lock is None:
            self._setup_lock = asyncio.Lock()
        async with self._setup_lock:
            if self._vectorstore is not None:
                return self._vectorstore
            from langchain_postgres import PGEngine, PGVectorStore

            engine = await self._aengine()
            self._pg_engine = PGEngine.from_engine(engine, loop=process_loop())
            self._reader_role = await schema.prepare_tables(
                engine, self._pg_engine, self.table_name, self.terms_table, self._embeddings
            )
            self._vectorstore = await PGVectorStore.create(
                engine=self._pg_engine,
                embedding_service=self._embeddings,
                table_name=self.table_name,
                metadata_columns=list(METADATA_COLUMN_NAMES),
                index_query_options=schema.HnswQueryOptions(  # type: ignore[arg-type]
                    ef_search=64, timeout_ms=int(self.settings.query_timeout_s * 1000)
                ),
            )
            return self._vectorstore

    async def _ready(self) -> AsyncEngine:
        """The engine, once the tables exist."""
        await self._aensure_schema()
        return await self._aengine()

    @asynccontextmanager
    async def _reading(
        self, who: Viewer, options: Sequence[str] = ()
    ) -> AsyncIterator[AsyncConnection]:
        """A read transaction as `who`, under the row policy where the database has it
        (store/access.py)."""
        engine = await self._ready()
        async with access.reading(engine, who, role=self._reader_role, options=options) as conn:
            yield conn

    @property
    def row_security(self) -> bool:
        """Whether reads run under the row policy (known once the schema is ready)."""
        return self._reader_role is not None

    # --- the async API ------------------------------------------------------------------------

    async def aensure_schema(self) -> None:
        """Creates the extension, table and indexes if absent (idempotent across processes)."""
        await self._call(self._aensure_schema(), "schema", self.settings.query_timeout_s * 6)

    async def asearch(
        self,
        query: str,
        k: int = 5,
        filters: SearchFilters | None = None,
        *,
        viewer: Viewer | None = None,
    ) -> list[Finding]:
        """The k active chunks most relevant to `query` among those the viewer may read (None:
        the run's viewer, everyone outside a run), best first, with calibrated scores.

        Raises StoreUnavailable when the database cannot be reached and StoreTimeout (a
        TimeoutError) when it does not answer in time: a failed search never returns [].
        """
        if not query.strip():
            raise ValueError("empty query")
        if k < 1:
            raise ValueError("k must be at least 1")
        vector = await asyncio.to_thread(self._embeddings.embed_query, query)

        options = schema.HnswQueryOptions(
            ef_search=64, timeout_ms=int(self.settings.query_timeout_s * 1000)
        ).to_parameter()

        who = current_viewer() if viewer is None else viewer  # the caller's, here

        async def read() -> list[Finding]:
            async with self._reading(who, options) as conn:
                return await search.search_by_vector(
                    conn, self.table_name, self.relevance, query, vector, k, filters, who
                )

        return await self._call(read(), "search", self.settings.query_timeout_s)

    async def asearch_documents(
        self,
        query: DocumentQuery,
        *,
        viewer: Viewer | None = None,
        exclude_flagged: bool = False,
    ) -> DocumentList:
        """One page of the active documents matching `query` that the viewer may read
        (full-text match, filters, sort, paging in SQL; no embedding, no model).
        `exclude_flagged`: documents flagged at ingest are not listed. Raises StoreUnavailable /
        StoreTimeout like `asearch`: a failed search never returns an empty page."""

        who = current_viewer() if viewer is None else viewer  # the caller's, here

        async def read() -> DocumentList:
            async with self._reading(who) as conn:
                return await documents.search_documents(
                    conn, self.table_name, query, viewer=who, exclude_flagged=exclude_flagged
                )

        return await self._call(read(), "document search", self.settings.query_timeout_s)

    async def adocument_frequencies(self, wanted: Collection[str]) -> tuple[int, dict[str, int]]:
        """(number of chunks, document frequency of each term) from `<table>_terms`."""

        async def read() -> tuple[int, dict[str, int]]:
            return await writes.document_frequencies(await self._ready(), self.terms_table, wanted)

        return await self._call(read(), "term statistics", self.settings.query_timeout_s)

    async def awrite_document(self, doc: DocumentRecord) -> WriteResult:
        """Writes one document version in one transaction: its chunks replace that version's old
        chunks, term statistics follow, and the latest version of the doc_id becomes the active one.
        """

        async def write() -> WriteResult:
            if len(doc.embeddings) != len(doc.chunks):
                raise ValueError("a document needs one embedding per chunk")
            engine = await self._ready()
            return await writes.write_document(engine, self.table_name, self.terms_table, doc)

        return await self._call(write(), f"write {doc.doc_id}", None)

    async def aknown_versions(
        self, doc_ids: Sequence[str]
    ) -> dict[tuple[str, str | None], KnownVersion]:
        """Content hash, source file and removed mark of each stored (doc_id, version)."""

        async def read() -> dict[tuple[str, str | None], KnownVersion]:
            return await catalog.known_versions(await self._ready(), self.table_name, doc_ids)

        return await self._call(read(), "read versions", self.settings.query_timeout_s)

    async def atouch_version(
        self, doc_id: str, version: str | None, source_path: str | None
    ) -> bool:
        """Records the file an unchanged version now comes from; brings it back if it had been
        removed (True then)."""

        async def write() -> bool:
            engine = await self._ready()
            return await catalog.touch_version(
                engine, self.table_name, doc_id, version, source_path
            )

        return await self._call(write(), f"update {doc_id}", None)

    async def alist_documents(
        self, *, all_versions: bool = False, viewer: Viewer | None = None
    ) -> list[DocumentVersion]:
        """The searched version of each document the viewer may read (`all_versions`: every
        version, with its status: active, superseded, inactive or removed), by doc_id."""

        who = current_viewer() if viewer is None else viewer  # the caller's, here

        async def read() -> list[DocumentVersion]:
            async with self._reading(who) as conn:
                return await catalog.list_documents(
                    conn, self.table_name, all_versions=all_versions, viewer=who
                )

        return await self._call(read(), "list documents", self.settings.query_timeout_s)

    async def aget_document(
        self, doc_id: str, *, viewer: Viewer | None = None
    ) -> DocumentDetail | None:
        """Every version of one document and its chunks (section, page); None if unknown or
        not visible to the viewer (the two are one answer)."""

        who = current_viewer() if viewer is None else viewer  # the caller's, here

        async def read() -> DocumentDetail | None:
            async with self._reading(who) as conn:
                return await catalog.get_document(conn, self.table_name, doc_id, viewer=who)

        return await self._call(read(), "show document", self.settings.query_timeout_s)

    async def aremove_document(
        self, doc_id: str, *, viewer: Viewer | None = None
    ) -> Removal | None:
        """Stops searching every version of `doc_id` at once (its rows stay, marked removed;
        ingesting its file again brings it back). None if there is no such document, or none
        the viewer may read."""
        return await self.aremove_versions(doc_id, None, viewer=viewer)

    async def aremove_versions(
        self,
        doc_id: str,
        versions: Collection[str | None] | None,
        *,
        viewer: Viewer | None = None,
    ) -> Removal | None:
        """Marks the given versions of `doc_id` (None: all) that the viewer may read removed;
        the latest one left, if any, becomes the searched one."""
        who = current_viewer() if viewer is None else viewer

        async def write() -> Removal | None:
            engine = await self._ready()
            return await catalog.remove_versions(
                engine, self.table_name, doc_id, versions, viewer=who
            )

        return await self._call(write(), f"remove {doc_id}", None)

    async def aset_access(
        self,
        doc_id: str,
        groups: Collection[str] | None,
        versions: Collection[str | None] | None = None,
    ) -> int:
        """Who may read `doc_id` from now on (None: everyone; empty: only principals who see
        everything), for the given versions or all; nothing is embedded again. Returns the
        chunks changed: 0 when there is no such document."""

        async def write() -> int:
            engine = await self._ready()
            return await writes.set_access(engine, self.table_name, doc_id, groups, versions)

        return await self._call(write(), f"access {doc_id}", None)

    async def aversions_under(self, directory: str) -> list[tuple[str, str | None, str]]:
        """(doc_id, version, file) of each version not removed ingested from under `directory`."""

        async def read() -> list[tuple[str, str | None, str]]:
            return await catalog.versions_under(await self._ready(), self.table_name, directory)

        return await self._call(read(), "read sources", self.settings.query_timeout_s)

    @asynccontextmanager
    async def aingest_lock(self) -> AsyncIterator[None]:
        """Held while one ingestion writes to this table (a PostgreSQL session lock, released
        with its connection if the process dies): a concurrent ingestion waits for it."""
        key = f"ingest|{self.table_name}"

        async def acquire() -> AsyncConnection:
            conn = await (await self._aengine()).connect()
            try:
                got = await conn.scalar(
                    text("SELECT pg_try_advisory_lock(hashtextextended(:k, 0))"), {"k": key}
                )
                if not got:
                    log.info("another ingestion of %s is running; waiting for it", self.table_name)
                    await conn.execute(
                        text("SELECT pg_advisory_lock(hashtextextended(:k, 0))"), {"k": key}
                    )
                await conn.commit()
            except BaseException:
                await conn.invalidate()
                raise
            return conn

        async def release(conn: AsyncConnection) -> None:
            try:
                await conn.execute(
                    text("SELECT pg_advisory_unlock(hashtextextended(:k, 0))"), {"k": key}
                )
                await conn.commit()
                await conn.close()
            except Exception:  # the connection goes, and the session lock with it
                await conn.invalidate()

        conn = await self._call(acquire(), "ingest lock", None)
        try:
            yield
        finally:
            await self._call(release(conn), "ingest unlock", None)

    async def acounts(self) -> tuple[int, int, int]:
        """(chunks, active chunks, active documents)."""

        async def read() -> tuple[int, int, int]:
            return await writes.counts(await self._ready(), self.table_name)

        return await self._call(read(), "count", self.settings.query_timeout_s)

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

    async def adrop(self) -> None:
        """Drops the table and its term statistics (tests, re-indexing with another model)."""

        async def drop() -> None:
            await schema.drop_tables(await self._aengine(), self.table_name, self.terms_table)
            self._vectorstore = None

        await self._call(drop(), "drop", self.settings.query_timeout_s * 3)

    async def aclose(self) -> None:
        """Closes the connection pool; the embedded server keeps running for other processes."""

        async def close() -> None:
            if self._engine is not None:
                await self._engine.dispose()
            self._engine = None
            self._pg_engine = None
            self._vectorstore = None

        await self._call(close(), "close", None)

    # --- the blocking API: the async one, run on the process loop -----------------------------

    ensure_schema = blocking(aensure_schema)
    search = blocking(asearch)
    search_documents = blocking(asearch_documents)
    document_frequencies = blocking(adocument_frequencies)
    counts = blocking(acounts)
    list_documents = blocking(alist_documents)
    get_document = blocking(aget_document)
    remove_document = blocking(aremove_document)
    set_access = blocking(aset_access)
    healthcheck = blocking(ahealthcheck)
    close = blocking(aclose)

    def run_sync(self, coro: Coroutine[Any, Any, T]) -> T:
        """Runs a coroutine that uses this store to completion from blocking code."""
        return run_blocking(coro, refuse_in_running_loop=False)


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
    "FETCH_K_MIN",
    "METADATA_COLUMNS",
    "METADATA_COLUMN_NAMES",
    "SCHEMA_VERSION",
    "ChunkRecord",
    "DocumentDetail",
    "DocumentRecord",
    "DocumentVersion",
    "KnowledgeStore",
    "Removal",
    "SearchFilters",
    "StoreHealth",
    "WriteResult",
    "active_filter",
    "fts_config",
    "open_store",
    "or_tsquery",
    "passage_text",
]
