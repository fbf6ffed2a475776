"""What the store reads and writes: filters, document records, results, and the chunk columns."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator

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
    ("access", "TEXT[]", True),
)
METADATA_COLUMN_NAMES = [name for name, _, _ in METADATA_COLUMNS]

FTS_CONFIGS: dict[str, str] = {
    "en": "english", "de": "german", "fr": "french", "es": "spanish", "it": "italian",
    "nl": "dutch", "pt": "portuguese", "sv": "swedish", "da": "danish", "no": "norwegian",
    "fi": "finnish", "ru": "russian",
}
"""PostgreSQL text search configuration per document language; other languages use 'simple'."""


def fts_config(language: str | None) -> str:
    return FTS_CONFIGS.get((language or "en").lower().split("-")[0], "simple")


def passage_text(title: str | None, section: str | None, content: str) -> str:
    """What is embedded, indexed and term-counted for a chunk: the document title and heading path
    (a question often names what the title says, "water", while the passage only says "charge"),
    then its text. A heading path that already starts with the title does not repeat it."""
    head = [h for h in (title, section) if h]
    if title and section and section.lower().startswith(title.lower()):
        head = [section]
    return "\n".join(head) + "\n\n" + content if head else content


def vector_literal(vector: list[float]) -> str:
    """A vector as pgvector's text input, for CAST(:v AS vector)."""
    return "[" + ",".join(repr(float(x)) for x in vector) + "]"


class SearchFilters(BaseModel):
    """Metadata filters a caller may apply; inactive (superseded) versions are always excluded."""

    language: str | None = Field(default=None, description="ISO code, e.g. 'en'.")
    doc_ids: list[str] | None = Field(default=None, description="Only these documents.")
    date_from: date | None = Field(default=None, description="document_date on or after.")
    date_to: date | None = Field(default=None, description="document_date on or before.")
    exclude_flagged: bool = Field(
        default=False,
        description="Leave out documents the ingest-time screening flagged (screening.py).",
    )

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
    access: tuple[str, ...] | None = None
    """The groups that may read it (None: everyone; empty: only those who see everything)."""
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
