"""The tables: creation, upgrade from older schemas, and the vector-search options of a read."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from langchain_core.embeddings import Embeddings
from sqlalchemy import text

from grounded_agent.store import access
from grounded_agent.store.records import METADATA_COLUMNS, fts_config, passage_text
from grounded_agent.store.writes import bump_terms

if TYPE_CHECKING:
    from langchain_postgres import PGEngine
    from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

log = logging.getLogger(__name__)

SCHEMA_VERSION = 2
"""2: title embedded with each chunk, a full-text column, Snowball term statistics."""

_SCHEMA_LOCK_KEY = 0x6B625F736368  # pg_advisory_lock key serialising CREATE EXTENSION/TABLE


class HnswQueryOptions:
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


async def prepare_tables(
    engine: AsyncEngine,
    pg_engine: PGEngine,
    table: str,
    terms_table: str,
    embeddings: Embeddings,
) -> str | None:
    """Creates the chunk table, its indexes and its term statistics if absent, or upgrades an
    older table; serialised across processes by an advisory lock. Returns the role reads run as
    (None: row-level security could not be set up, see store/access.py)."""
    async with engine.connect() as conn:
        await conn.execute(text("SELECT pg_advisory_lock(:k)"), {"k": _SCHEMA_LOCK_KEY})
        try:
            exists = (
                await conn.execute(
                    text("SELECT to_regclass(:t) IS NOT NULL"), {"t": f'public."{table}"'}
                )
            ).scalar()
            await conn.commit()
            if not exists:
                await _create_table(conn, pg_engine, table, terms_table, embeddings)
            else:
                await add_fulltext(conn, table, terms_table)
                await conn.commit()
            await conn.execute(text(f'ALTER TABLE "{table}" ADD COLUMN IF NOT EXISTS access text[]'))
            await conn.commit()
            role = await access.reader_role(conn, table)
            if role is None:
                role = await access.secure_table(conn, table, terms_table)
            await conn.commit()
            return role
        finally:
            await conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": _SCHEMA_LOCK_KEY})
            await conn.commit()


async def _create_table(
    conn: AsyncConnection,
    pg_engine: PGEngine,
    table: str,
    terms_table: str,
    embeddings: Embeddings,
) -> None:
    from langchain_postgres import Column

    known = getattr(embeddings, "dimensions", None)  # the bundled model's: no need to load it
    dim = (
        known
        if isinstance(known, int) and known > 0
        else len(await asyncio.to_thread(embeddings.embed_query, "dimension probe"))
    )
    await pg_engine.ainit_vectorstore_table(
        table_name=table,
        vector_size=dim,
        metadata_columns=[Column(n, t, nullable=nullable) for n, t, nullable in METADATA_COLUMNS],
    )
    t = table
    for ddl in (
        f'CREATE UNIQUE INDEX IF NOT EXISTS "{t}_chunk_key" '
        f"ON \"{t}\" (doc_id, coalesce(version, ''), chunk_index)",
        f'CREATE INDEX IF NOT EXISTS "{t}_active" '
        f'ON "{t}" (is_active, language, document_date)',
        f'CREATE INDEX IF NOT EXISTS "{t}_hnsw" ON "{t}" '
        "USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64)",
        f'CREATE TABLE IF NOT EXISTS "{terms_table}" '
        "(term TEXT PRIMARY KEY, df INTEGER NOT NULL)",
    ):
        await conn.execute(text(ddl))
    await add_fulltext(conn, table, terms_table)
    await conn.commit()
    log.info("created knowledge-base table %s (%d dimensions)", t, dim)


async def add_fulltext(conn: AsyncConnection, table: str, terms_table: str) -> bool:
    """Adds the full-text column and its GIN index; fills it for rows written before schema 2
    and recounts their term statistics with today's stemmer. True when it upgraded rows."""
    t = table
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
    await conn.execute(text(f'CREATE INDEX IF NOT EXISTS "{t}_fts" ON "{t}" USING gin (fts)'))
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
        await conn.execute(text(f'DELETE FROM "{terms_table}"'))
        await bump_terms(conn, terms_table, [passage_text(r[1], r[2], r[3]) for r in rows], 1)
        log.warning(
            "knowledge-base table %s upgraded to schema %d (full-text search, new term "
            "statistics); its embeddings predate titles: re-ingest into a new table for the "
            "full benefit", t, SCHEMA_VERSION,
        )
    return bool(rows)


async def drop_tables(engine: AsyncEngine, table: str, terms_table: str) -> None:
    async with engine.begin() as conn:
        await conn.execute(text(f'DROP TABLE IF EXISTS "{table}"'))
        await conn.execute(text(f'DROP TABLE IF EXISTS "{terms_table}"'))
