"""The read path: hybrid candidates (nearest by meaning, best by full-text match), then one
calibrated re-rank over both decides the order."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from sqlalchemy import text

from grounded_agent.grounding.text import STOPWORDS
from grounded_agent.principals import Viewer
from grounded_agent.schemas import Finding
from grounded_agent.store.access import access_sql
from grounded_agent.store.records import (
    FTS_CONFIGS,
    METADATA_COLUMN_NAMES,
    SearchFilters,
    passage_text,
    vector_literal,
)
from grounded_agent.store.relevance import CalibratedRelevance

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncConnection

FETCH_K_MIN = 20
"""Candidates fetched by vector similarity before the calibrated re-ranking."""

Candidate = tuple[dict[str, Any], str, float]
"""(chunk metadata, chunk text, cosine with the query)."""

_TSQUERY_TERM = re.compile(r"[^\W_]+")


def or_tsquery(query: str) -> str:
    """The question's content words joined by OR, for to_tsquery: a passage need not contain them
    all (plainto_tsquery would ask for every word of a natural question)."""
    words = [w for w in _TSQUERY_TERM.findall(query.lower()) if w not in STOPWORDS and len(w) > 1]
    return " | ".join(dict.fromkeys(words[:32]))


async def search_by_vector(
    conn: AsyncConnection,
    table: str,
    relevance: CalibratedRelevance,
    query: str,
    vector: list[float],
    k: int,
    filters: SearchFilters | None,
    viewer: Viewer,
) -> list[Finding]:
    """Hybrid candidates (nearest by meaning, and best by full-text match), then one re-rank
    over both decides the order: the two lists meet before the score, not after it.

    `conn` is a read transaction as the viewer (store/access.py); both halves filter by what the
    viewer may read in SQL, so every candidate the ranking sees is a visible one."""
    fetch_k = max(k * 4, FETCH_K_MIN)
    candidates: dict[tuple[Any, ...], Candidate] = {}
    for meta, content, cosine in await nearest(conn, table, vector, fetch_k, filters, viewer):
        candidates[_chunk_key(meta)] = (meta, content, cosine)
    for meta, content, cosine in await fulltext(
        conn, table, query, vector, fetch_k, filters, viewer
    ):
        candidates.setdefault(_chunk_key(meta), (meta, content, cosine))
    if not candidates:
        return []
    weights = await relevance.aterm_weights(query)
    rows = list(candidates.values())
    passages = [passage_text(m.get("title"), m.get("section"), c) for m, c, _ in rows]
    cosines = [cos for _, _, cos in rows]
    ranked = relevance.rank(weights, passages, cosines)
    return [_finding(rows[i][0], rows[i][1], sc, rows[i][2]) for i, sc in ranked[:k]]


_COLS = ", ".join(f'"{n}"' for n in METADATA_COLUMN_NAMES)


async def nearest(
    conn: AsyncConnection,
    table: str,
    vector: list[float],
    limit: int,
    filters: SearchFilters | None,
    viewer: Viewer,
) -> list[Candidate]:
    """The visible active chunks nearest to `vector` by cosine distance (the HNSW index, whose
    iterative scan keeps reading while the WHERE clause rejects rows)."""
    where, params = filter_sql(filters, viewer)
    sql = (
        f"SELECT {_COLS}, content, langchain_metadata, "
        "1 - (embedding <=> CAST(:vec AS vector)) AS cosine "
        f'FROM "{table}" WHERE {where} '
        "ORDER BY embedding <=> CAST(:vec AS vector) LIMIT :limit"
    )
    params.update(limit=limit, vec=vector_literal(vector))
    return _candidates((await conn.execute(text(sql), params)).all())


async def fulltext(
    conn: AsyncConnection,
    table: str,
    query: str,
    vector: list[float],
    limit: int,
    filters: SearchFilters | None,
    viewer: Viewer,
) -> list[Candidate]:
    """Visible active chunks that share words with the query, best ts_rank first, with their
    cosine."""
    tsq = or_tsquery(query)
    if not tsq:
        return []
    where, params = filter_sql(filters, viewer)
    configs = sorted({*FTS_CONFIGS.values(), "simple"})
    q_expr = " || ".join(f"to_tsquery('{c}', :tsq)" for c in configs)
    sql = (
        f"WITH q AS (SELECT ({q_expr}) AS tq) "
        f"SELECT {_COLS}, content, langchain_metadata, "
        "1 - (embedding <=> CAST(:vec AS vector)) AS cosine "
        f'FROM "{table}", q WHERE fts @@ q.tq AND {where} '
        "ORDER BY ts_rank(fts, q.tq, 1) DESC, langchain_id LIMIT :limit"
    )
    params.update(tsq=tsq, limit=limit, vec=vector_literal(vector))
    return _candidates((await conn.execute(text(sql), params)).all())


def _candidates(rows: Sequence[Any]) -> list[Candidate]:
    out = []
    n = len(METADATA_COLUMN_NAMES)
    for r in rows:
        meta = dict(zip(METADATA_COLUMN_NAMES, r[:n], strict=True))
        extra = r[n + 1]
        if isinstance(extra, dict):
            meta = {**extra, **meta}
        out.append((meta, str(r[n]), float(r[-1])))
    return out


FLAGGED_SQL = "(langchain_metadata->>'flagged') IS NOT NULL"
"""A chunk of a document the ingest-time screening flagged (its reasons in the JSON metadata)."""


def filter_sql(filters: SearchFilters | None, viewer: Viewer) -> tuple[str, dict[str, Any]]:
    """The WHERE clause of a passage search: active, visible to the viewer, and the filters."""
    seen, params = access_sql(viewer)
    clauses: list[str] = ["is_active", seen]
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
        if filters.exclude_flagged:
            clauses.append(f"NOT {FLAGGED_SQL}")
    return " AND ".join(clauses), params


def _chunk_key(meta: dict[str, Any]) -> tuple[Any, ...]:
    return (meta.get("doc_id"), meta.get("version"), meta.get("chunk_index"))


def _finding(meta: dict[str, Any], content: str, score: float, cosine: float) -> Finding:
    known = set(METADATA_COLUMN_NAMES) | {"declared_active", "flagged"}
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
