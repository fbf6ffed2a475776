"""Writes and what they keep up to date: document versions, the active flag, term statistics.

Plain SQL on the store's engine, because a document's chunks, its term statistics and its version
flags must change in one transaction (`PGVectorStore.aadd_embeddings` commits row by row).
"""

from __future__ import annotations

import json
import uuid
from collections import Counter
from collections.abc import Collection, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from sqlalchemy import text

from grounded_agent.grounding.text import terms
from grounded_agent.store.access import access_value
from grounded_agent.store.records import (
    DocumentRecord,
    WriteResult,
    fts_config,
    passage_text,
    vector_literal,
)

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

_ID_NAMESPACE = uuid.UUID("5f0b3c1e-2a7d-4c55-9f1e-6b1f4d1c9a01")

_INSERT_CHUNK = (
    'INSERT INTO "{t}" (langchain_id, content, embedding, doc_id, title, version, '
    "section, page, source_url, document_date, indexed_at, is_active, language, "
    "chunk_index, content_hash, langchain_metadata, access, fts) VALUES (:id, :content, "
    "CAST(:embedding AS vector), :doc_id, :title, :version, :section, :page, "
    ":source_url, :document_date, :indexed_at, false, :language, :chunk_index, "
    ":content_hash, CAST(:meta AS json), CAST(:access AS text[]), "
    "to_tsvector(CAST(:fts_config AS regconfig), :fts_text))"
)

ACTIVATE_LATEST = """WITH v AS (
    SELECT version, max(document_date) AS d, max(indexed_at) AS t,
      bool_and(coalesce(
        (langchain_metadata->>'declared_active')::boolean, true)
        AND NOT coalesce((langchain_metadata->>'removed')::boolean, false)) AS ok
    FROM "{t}" WHERE doc_id = :doc_id GROUP BY version
), w AS (
    SELECT version FROM v WHERE ok ORDER BY d DESC NULLS LAST, t DESC LIMIT 1)
UPDATE "{t}" AS c
SET is_active = EXISTS (
    SELECT 1 FROM w WHERE w.version IS NOT DISTINCT FROM c.version)
WHERE c.doc_id = :doc_id"""
"""The latest version of a doc_id (by document date, then indexing time) that was neither declared
inactive nor removed becomes the active one; every other version of it becomes inactive."""


async def write_document(
    engine: AsyncEngine, table: str, terms_table: str, doc: DocumentRecord
) -> WriteResult:
    """Writes one document version in one transaction: its chunks replace that version's old
    chunks, term statistics follow, and the latest version of the doc_id becomes the active one.
    `doc` holds one embedding per chunk (KnowledgeStore.awrite_document checks)."""
    t = table
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
            await bump_terms(conn, terms_table, [passage_text(r[5], r[3], r[4]) for r in same], -1)
        indexed_at = datetime.now().astimezone()
        meta = json.dumps({**doc.extra, "declared_active": doc.declared_active}, default=str)
        await conn.execute(
            text(_INSERT_CHUNK.format(t=t)),
            [
                {
                    "id": uuid.uuid5(
                        _ID_NAMESPACE, f"{t}|{doc.doc_id}|{doc.version}|{c.chunk_index}"
                    ),
                    "content": c.content,
                    "embedding": vector_literal(vec),
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
                    "access": access_value(doc.access),
                    "fts_config": fts_config(doc.language),
                    "fts_text": passage_text(doc.title, c.section, c.content),
                }
                for c, vec in zip(doc.chunks, doc.embeddings, strict=True)
            ],
        )
        await bump_terms(
            conn, terms_table, [passage_text(doc.title, c.section, c.content) for c in doc.chunks], 1
        )
        await conn.execute(text(ACTIVATE_LATEST.format(t=t)), {"doc_id": doc.doc_id})
        active_after = {
            r[0]
            for r in (
                await conn.execute(
                    text(f'SELECT DISTINCT version FROM "{t}" WHERE doc_id = :doc_id AND is_active'),
                    {"doc_id": doc.doc_id},
                )
            ).all()
        }
    return WriteResult("replaced" if same else "added", len(active_before - active_after))


async def set_access(
    engine: AsyncEngine,
    table: str,
    doc_id: str,
    groups: Collection[str] | None,
    versions: Collection[str | None] | None = None,
) -> int:
    """Changes who may read `doc_id` (the given versions, or all of them) in place: no text is
    read again, nothing embedded. Returns the chunks changed (0: no such document)."""
    where = "doc_id = :id"
    params: dict[str, object] = {
        "id": doc_id, "access": access_value(list(groups) if groups is not None else None)
    }
    if versions is not None:
        named = [v for v in versions if v is not None]
        where += " AND (version = ANY(:versions)" + (
            " OR version IS NULL)" if None in versions else ")"
        )
        params["versions"] = named
    async with engine.begin() as conn:
        await conn.execute(
            text("SELECT pg_advisory_xact_lock(hashtextextended(:key, 0))"),
            {"key": f"{table}|{doc_id}"},
        )
        res = await conn.execute(
            text(f'UPDATE "{table}" SET access = CAST(:access AS text[]) WHERE {where}'), params
        )
    return int(res.rowcount or 0)


async def bump_terms(
    conn: AsyncConnection, terms_table: str, passages: Sequence[str], sign: int
) -> None:
    """Adds (sign 1) or removes (sign -1) the passages' terms from the document frequencies."""
    counts: Counter[str] = Counter()
    for p in passages:
        counts.update(set(terms(p)))
    counts[""] = len(passages)  # the row '' holds the number of chunks
    keys = sorted(counts)
    await conn.execute(
        text(
            f'INSERT INTO "{terms_table}" AS s (term, df) '
            "SELECT term, df FROM unnest(CAST(:terms AS text[]), CAST(:dfs AS integer[])) "
            "AS u(term, df) ORDER BY term "
            "ON CONFLICT (term) DO UPDATE SET df = s.df + EXCLUDED.df"
        ),
        {"terms": keys, "dfs": [sign * counts[k] for k in keys]},
    )


async def document_frequencies(
    engine: AsyncEngine, terms_table: str, wanted: Collection[str]
) -> tuple[int, dict[str, int]]:
    """(number of chunks, document frequency of each wanted term)."""
    async with engine.connect() as conn:
        rows = (
            await conn.execute(
                text(f'SELECT term, df FROM "{terms_table}" WHERE term = ANY(:terms) AND df > 0'),
                {"terms": ["", *sorted(set(wanted))]},
            )
        ).all()
    dfs = {str(r[0]): int(r[1]) for r in rows}
    return dfs.pop("", 0), dfs


async def counts(engine: AsyncEngine, table: str) -> tuple[int, int, int]:
    """(chunks, active chunks, active documents)."""
    async with engine.connect() as conn:
        row = (
            await conn.execute(
                text(
                    "SELECT count(*), count(*) FILTER (WHERE is_active), "
                    f'count(DISTINCT doc_id) FILTER (WHERE is_active) FROM "{table}"'
                )
            )
        ).one()
    return int(row[0]), int(row[1]), int(row[2])
