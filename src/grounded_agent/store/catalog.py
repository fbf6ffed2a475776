"""Managing the knowledge base by document: list, show, remove, and the bookkeeping behind
`ingest --sync` (which file each version came from, which versions were removed).

A removed version keeps its rows, marked `removed` in the chunk metadata and inactive, so it is
never searched; ingesting its file again brings it back. Every change takes the document's
advisory lock and re-runs the same "latest version wins" rule as a write.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field
from sqlalchemy import text

from grounded_agent.principals import EVERYONE, Viewer
from grounded_agent.store.access import access_sql
from grounded_agent.store.writes import ACTIVATE_LATEST

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

VersionStatus = Literal["active", "superseded", "inactive", "removed"]

_REMOVED = "coalesce((langchain_metadata->>'removed')::boolean, false)"
_DECLARED = "coalesce((langchain_metadata->>'declared_active')::boolean, true)"
_PATCH = (
    "langchain_metadata = CAST(coalesce(CAST(langchain_metadata AS jsonb), CAST('{}' AS jsonb)) "
    "|| CAST(:patch AS jsonb) AS json)"
)


class DocumentVersion(BaseModel):
    """One version of one document as the store holds it."""

    doc_id: str
    version: str | None = None
    title: str
    status: VersionStatus = Field(
        description="active (searched); superseded (a later version is active); inactive "
        "(declared is_active: false); removed (docs remove, or its file gone at ingest --sync)."
    )
    document_date: date | None = None
    indexed_at: datetime | None = None
    language: str | None = None
    source_url: str | None = None
    source_path: str | None = Field(default=None, description="The file it was ingested from.")
    format: str | None = None
    chunks: int = 0
    pages: int | None = Field(default=None, description="The highest page a chunk starts on.")
    flagged: list[str] = Field(
        default_factory=list,
        description="Why the ingest-time screening flagged it (screening.py); empty: not flagged. "
        "A flagged document stays out of answers unless GROUNDED_AGENT_FLAGGED_DOCUMENTS=include.",
    )
    access: list[str] | None = Field(
        default=None,
        description="The groups that may read it; None: everyone; empty: only principals who "
        "see everything.",
    )


class ChunkInfo(BaseModel):
    version: str | None = None
    chunk_index: int
    section: str | None = None
    page: int | None = None
    chars: int
    preview: str


class DocumentDetail(BaseModel):
    """`docs show`: every version of a document and its chunks (section and page of each)."""

    doc_id: str
    versions: list[DocumentVersion]
    chunks: list[ChunkInfo]


class Removal(BaseModel):
    """What `docs remove` did."""

    doc_id: str
    versions: int = Field(description="Versions marked removed.")
    chunks: int = Field(description="Chunks that were searched and no longer are.")


@dataclass(frozen=True)
class KnownVersion:
    content_hash: str
    source_path: str | None
    removed: bool
    access: tuple[str, ...] | None = None


_LIST = f"""SELECT doc_id, version, max(title), bool_or(is_active), count(*), max(page),
  max(document_date), max(indexed_at), max(language), max(source_url),
  bool_or({_REMOVED}), bool_and({_DECLARED}),
  max(langchain_metadata->>'source_path'), max(langchain_metadata->>'format'),
  max(langchain_metadata->>'flagged'), max(access)
FROM "{{t}}" {{where}} GROUP BY doc_id, version {{having}}
ORDER BY doc_id, max(document_date) DESC NULLS LAST, max(indexed_at) DESC"""


def _version(row: Any) -> DocumentVersion:
    removed, declared, active = bool(row[10]), bool(row[11]), bool(row[3])
    status: VersionStatus = (
        "removed" if removed else "active" if active else "superseded" if declared else "inactive"
    )
    return DocumentVersion(
        doc_id=str(row[0]),
        version=row[1],
        title=str(row[2] or row[0]),
        status=status,
        chunks=int(row[4]),
        pages=row[5],
        document_date=row[6],
        indexed_at=row[7],
        language=row[8],
        source_url=row[9],
        source_path=row[12],
        format=row[13],
        flagged=_reasons(row[14]),
        access=None if row[15] is None else [str(g) for g in row[15]],
    )


def _reasons(raw: Any) -> list[str]:
    """The stored reasons (a JSON list as text); anything unreadable still counts as flagged."""
    if not raw:
        return []
    try:
        value = json.loads(raw)
    except ValueError:
        return ["flagged (reasons unreadable)"]
    return [str(r) for r in value] if isinstance(value, list) else [str(value)]


async def list_documents(
    conn: AsyncConnection, table: str, *, all_versions: bool = False, viewer: Viewer = EVERYONE
) -> list[DocumentVersion]:
    """The searched version of each document the viewer may read, or every version of every
    such document; `conn` is a read transaction as the viewer (store/access.py)."""
    seen, params = access_sql(viewer)
    sql = _LIST.format(t=table, where=f"WHERE {seen}",
                       having="" if all_versions else "HAVING bool_or(is_active)")
    rows = (await conn.execute(text(sql), params)).all()
    return [_version(r) for r in rows]


async def get_document(
    conn: AsyncConnection, table: str, doc_id: str, *, viewer: Viewer = EVERYONE
) -> DocumentDetail | None:
    """Every version of `doc_id` the viewer may read and their chunks; None when there is none
    (a document the viewer may not read does not exist for it)."""
    seen, params = access_sql(viewer)
    params["id"] = doc_id
    rows = (
        await conn.execute(
            text(_LIST.format(t=table, where=f"WHERE doc_id = :id AND {seen}", having="")),
            params,
        )
    ).all()
    if not rows:
        return None
    chunks = (
        await conn.execute(
            text(
                f'SELECT version, chunk_index, section, page, length(content), '
                f'left(content, 120) FROM "{table}" WHERE doc_id = :id AND {seen} '
                "ORDER BY max(indexed_at) OVER (PARTITION BY version) DESC, chunk_index"
            ),
            params,
        )
    ).all()
    return DocumentDetail(
        doc_id=doc_id,
        versions=[_version(r) for r in rows],
        chunks=[
            ChunkInfo(
                version=c[0],
                chunk_index=int(c[1]),
                section=c[2],
                page=c[3],
                chars=int(c[4]),
                preview=" ".join(str(c[5]).split()),
            )
            for c in chunks
        ],
    )


async def _lock(conn: AsyncConnection, table: str, doc_id: str) -> None:
    await conn.execute(
        text("SELECT pg_advisory_xact_lock(hashtextextended(:key, 0))"),
        {"key": f"{table}|{doc_id}"},
    )


async def _active_chunks(conn: AsyncConnection, table: str, doc_id: str) -> int:
    return int(
        (
            await conn.execute(
                text(f'SELECT count(*) FROM "{table}" WHERE doc_id = :id AND is_active'),
                {"id": doc_id},
            )
        ).scalar_one()
    )


async def remove_versions(
    engine: AsyncEngine,
    table: str,
    doc_id: str,
    versions: Collection[str | None] | None = None,
    *,
    viewer: Viewer = EVERYONE,
) -> Removal | None:
    """Marks the given versions of `doc_id` (all of them by default) that the viewer may read
    removed, in one transaction; the latest version left, if any, becomes the active one. None
    when no such document (or none the viewer may read)."""
    seen, seen_params = access_sql(viewer)
    async with engine.begin() as conn:
        await _lock(conn, table, doc_id)
        before = await _active_chunks(conn, table, doc_id)
        where = f"doc_id = :id AND {seen}"
        params: dict[str, object] = {
            "id": doc_id, "patch": json.dumps({"removed": True}), **seen_params
        }
        if versions is not None:
            named = [v for v in versions if v is not None]
            where += " AND (version = ANY(:versions)" + (
                " OR version IS NULL)" if None in versions else ")"
            )
            params["versions"] = named
        res = await conn.execute(
            text(
                f'UPDATE "{table}" SET {_PATCH}, is_active = false WHERE {where} '
                f"AND NOT {_REMOVED} RETURNING version"
            ),
            params,
        )
        marked = {r[0] for r in res.all()}
        exists = marked or (
            await conn.execute(
                text(f'SELECT 1 FROM "{table}" WHERE doc_id = :id AND {seen} LIMIT 1'),
                {"id": doc_id, **seen_params},
            )
        ).first()
        if not exists:
            return None
        await conn.execute(text(ACTIVATE_LATEST.format(t=table)), {"doc_id": doc_id})
        after = await _active_chunks(conn, table, doc_id)
    return Removal(doc_id=doc_id, versions=len(marked), chunks=max(0, before - after))


async def known_versions(
    engine: AsyncEngine, table: str, doc_ids: Sequence[str]
) -> dict[tuple[str, str | None], KnownVersion]:
    """Content hash, source file and removed mark of each stored version among `doc_ids`."""
    async with engine.connect() as conn:
        rows = (
            await conn.execute(
                text(
                    "SELECT doc_id, version, max(content_hash), "
                    f"max(langchain_metadata->>'source_path'), bool_or({_REMOVED}), max(access), "
                    "bool_or(access IS NULL) "
                    f'FROM "{table}" WHERE doc_id = ANY(:ids) GROUP BY doc_id, version'
                ),
                {"ids": list(doc_ids)},
            )
        ).all()
    return {
        (str(r[0]), r[1]): KnownVersion(
            str(r[2]), r[3], bool(r[4]), None if r[6] else tuple(r[5] or ())
        )
        for r in rows
    }


async def touch_version(
    engine: AsyncEngine, table: str, doc_id: str, version: str | None, source_path: str | None
) -> bool:
    """An unchanged version read again: records the file it now comes from and, if it had been
    removed, brings it back. True when it was brought back."""
    match = "doc_id = :id AND version IS NOT DISTINCT FROM CAST(:version AS TEXT)"
    params = {"id": doc_id, "version": version}
    async with engine.begin() as conn:
        await _lock(conn, table, doc_id)
        restored = bool(
            (
                await conn.execute(
                    text(f'SELECT coalesce(bool_or({_REMOVED}), false) FROM "{table}" WHERE {match}'),
                    params,
                )
            ).scalar_one()
        )
        await conn.execute(
            text(f'UPDATE "{table}" SET {_PATCH} WHERE {match}'),
            {**params, "patch": json.dumps({"source_path": source_path, "removed": False})},
        )
        await conn.execute(text(ACTIVATE_LATEST.format(t=table)), {"doc_id": doc_id})
    return restored


async def versions_under(
    engine: AsyncEngine, table: str, directory: str
) -> list[tuple[str, str | None, str]]:
    """(doc_id, version, source file) of every version not removed whose file is under
    `directory` (an absolute path ending in the path separator)."""
    async with engine.connect() as conn:
        rows = (
            await conn.execute(
                text(
                    "SELECT DISTINCT doc_id, version, langchain_metadata->>'source_path' "
                    f'FROM "{table}" WHERE starts_with(langchain_metadata->>\'source_path\', :d) '
                    f"AND NOT {_REMOVED}"
                ),
                {"d": directory},
            )
        ).all()
    return [(str(r[0]), r[1], str(r[2])) for r in rows]
