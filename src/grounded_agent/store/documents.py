"""The document search: active documents filtered, full-text matched, sorted and paged in SQL.

Deterministic on purpose: no embeddings, no model. Matching is PostgreSQL full-text search over
the chunks' `fts` column (title, heading path and text, each in its document's language
configuration; GIN-indexed); a document matches when one of its chunks holds every word of the
text. Every order ends with doc_id, so pages neither overlap nor skip.
"""

from __future__ import annotations

from datetime import date, timedelta
from typing import TYPE_CHECKING, Any

from sqlalchemy import text

from grounded_agent.documents import SNIPPET_CHARS, DocumentItem, DocumentList, DocumentQuery
from grounded_agent.principals import EVERYONE, Viewer
from grounded_agent.store.access import access_sql
from grounded_agent.store.records import FTS_CONFIGS, fts_config

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncConnection

HEADLINE_OPTIONS = 'MaxWords=35, MinWords=12, ShortWord=3, MaxFragments=1, StartSel="", StopSel=""'

_ORDER = {
    "relevance": "score DESC, doc_id",
    "newest": "document_date DESC NULLS LAST, doc_id",
    "oldest": "document_date ASC NULLS LAST, doc_id",
}


def config_case(column: str) -> str:
    """SQL choosing a chunk's text search configuration from its language, as ingestion did."""
    whens = " ".join(
        f"WHEN '{code}' THEN '{cfg}'::regconfig" for code, cfg in sorted(FTS_CONFIGS.items())
    )
    return (
        f"(CASE lower(split_part(coalesce({column}, 'en'), '-', 1)) {whens} "
        "ELSE 'simple'::regconfig END)"
    )


def tsquery_sql(language: str | None) -> str:
    """The text as a web-search style query (all words; "phrase", or, -word) in the language's
    configuration, or in every configuration when no language is asked for."""
    configs = [fts_config(language)] if language else sorted({*FTS_CONFIGS.values(), "simple"})
    return " || ".join(f"websearch_to_tsquery('{c}', :text)" for c in configs)


def id_words_sql(column: str = "doc_id") -> str:
    """A document id's words ("contract-northwind-logistics": contract, northwind, logistics):
    people search by what a file or id is called as much as by what its text says."""
    return f"to_tsvector('simple', translate({column}, '-_./:', '     '))"


def match_sql(alias: str = "") -> str:
    """A chunk matches when its text (title, headings, content) or its document's id does."""
    p = f"{alias}." if alias else ""
    return f"({p}fts @@ q.tq OR {id_words_sql(p + 'doc_id')} @@ q.tq)"


def filter_sql(
    query: DocumentQuery, alias: str = "", *, viewer: Viewer = EVERYONE,
    exclude_flagged: bool = False,
) -> tuple[str, dict[str, Any]]:
    """Active rows the viewer may read within the language and the date range; date_to counts
    its whole day (the bound is the start of the next day). `exclude_flagged`: documents the
    ingest-time screening flagged are not listed either (the same rule as for answers)."""
    p = f"{alias}." if alias else ""
    seen, params = access_sql(viewer, alias)
    clauses = [f"{p}is_active", seen]
    if exclude_flagged:
        clauses.append(f"({p}langchain_metadata->>'flagged') IS NULL")
    if query.language:
        clauses.append(f"lower({p}language) = :language")
        params["language"] = query.language
    if query.date_from:
        clauses.append(f"{p}document_date >= :date_from")
        params["date_from"] = query.date_from
    if query.date_to and query.date_to < date.max:
        clauses.append(f"{p}document_date < :date_before")
        params["date_before"] = query.date_to + timedelta(days=1)
    return " AND ".join(clauses), params


def page_sql(
    table: str, query: DocumentQuery, *, viewer: Viewer = EVERYONE, exclude_flagged: bool = False
) -> tuple[str, dict[str, Any]]:
    """One statement: the matching documents (one row each, its active version), the requested
    page of them in a total order, a snippet per document, and the total count on every row."""
    where, params = filter_sql(query, viewer=viewer, exclude_flagged=exclude_flagged)
    t = f'"{table}"'
    cfg = config_case("c.language")
    if query.text:
        matched = (
            f"SELECT doc_id, max(ts_rank(fts, q.tq, 1)) AS rank FROM {t}, q "
            f"WHERE {where} AND {match_sql()} GROUP BY doc_id"
        )
        title_hit = (
            f"CASE WHEN to_tsvector({cfg}, coalesce(c.title, '')) @@ q.tq "
            f"OR {id_words_sql('c.doc_id')} @@ q.tq THEN 1 ELSE 0 END"
        )
        snippet = (  # the best matching chunk; the first one when only the id matched
            f"SELECT ts_headline({cfg}, c.content, q.tq, :headline) FROM {t} c, q "
            "WHERE c.is_active AND c.doc_id = d.doc_id "
            "ORDER BY (c.fts @@ q.tq) DESC, ts_rank(c.fts, q.tq, 1) DESC, c.chunk_index LIMIT 1"
        )
        head = f"WITH q AS (SELECT ({tsquery_sql(query.language)}) AS tq), "
        params.update(text=query.text, headline=HEADLINE_OPTIONS)
        from_q = ", q"
    else:
        matched = f"SELECT doc_id, 0.0 AS rank FROM {t} WHERE {where} GROUP BY doc_id"
        title_hit = "0"
        snippet = (
            f"SELECT left(c.content, {SNIPPET_CHARS}) FROM {t} c "
            "WHERE c.is_active AND c.doc_id = d.doc_id ORDER BY c.chunk_index LIMIT 1"
        )
        head, from_q = "WITH ", ""
    order = _ORDER[query.effective_sort]
    sql = (
        f"{head}hits AS ({matched}), "
        "docs AS ("
        "SELECT DISTINCT ON (c.doc_id) c.doc_id, c.title, c.version, c.document_date, "
        f"c.language, c.source_url, h.rank + {title_hit} AS score "
        f"FROM {t} c JOIN hits h ON h.doc_id = c.doc_id{from_q} "
        "WHERE c.is_active ORDER BY c.doc_id, c.chunk_index) "
        "SELECT d.doc_id, d.title, d.version, d.document_date, d.language, d.source_url, "
        f"({snippet}) AS snippet, (SELECT count(*) FROM docs) AS total "
        f"FROM (SELECT * FROM docs ORDER BY {order} LIMIT :limit OFFSET :offset) d "
        f"ORDER BY {order}"
    )
    params.update(limit=query.page_size, offset=(query.page - 1) * query.page_size)
    return sql, params


def count_sql(
    table: str, query: DocumentQuery, *, viewer: Viewer = EVERYONE, exclude_flagged: bool = False
) -> tuple[str, dict[str, Any]]:
    """How many documents match (asked only when the page came back empty)."""
    where, params = filter_sql(query, viewer=viewer, exclude_flagged=exclude_flagged)
    if query.text:
        params["text"] = query.text
        return (
            f"WITH q AS (SELECT ({tsquery_sql(query.language)}) AS tq) "
            f'SELECT count(DISTINCT doc_id) FROM "{table}", q WHERE {where} AND {match_sql()}',
            params,
        )
    return f'SELECT count(DISTINCT doc_id) FROM "{table}" WHERE {where}', params


def _snippet(raw: str | None) -> str:
    flat = " ".join((raw or "").split())
    if len(flat) <= SNIPPET_CHARS:
        return flat
    return flat[: SNIPPET_CHARS - 1].rsplit(" ", 1)[0] + "…"


async def search_documents(
    conn: AsyncConnection,
    table: str,
    query: DocumentQuery,
    *,
    viewer: Viewer = EVERYONE,
    exclude_flagged: bool = False,
) -> DocumentList:
    """One page of the active documents that match `query` and that the viewer may read; `conn`
    is a read transaction as the viewer (store/access.py)."""
    sql, params = page_sql(table, query, viewer=viewer, exclude_flagged=exclude_flagged)
    rows = (await conn.execute(text(sql), params)).all()
    if rows:
        total = int(rows[0][-1])
    elif query.page > 1:
        count, cparams = count_sql(
            table, query, viewer=viewer, exclude_flagged=exclude_flagged
        )
        total = int((await conn.execute(text(count), cparams)).scalar() or 0)
    else:
        total = 0
    items = [
        DocumentItem(
            doc_id=str(r[0]),
            title=str(r[1] or r[0]),
            version=r[2],
            document_date=r[3],
            language=r[4],
            source_url=r[5],
            snippet=_snippet(r[6]),
        )
        for r in rows
    ]
    return DocumentList.of(items, total, query)
