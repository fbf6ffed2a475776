"""Finding documents: the search parameters, one page of results, and the texts that describe them.

The same `DocumentQuery` is what a user passes (Python, CLI, endpoint), what the router's tool
arguments are validated into, and what a result hands back (`search`) for the next page: one set
of rules however the search is asked for.
"""

from __future__ import annotations

import math
import re
from datetime import date
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from grounded_agent.errors import InvalidQuestion
from grounded_agent.inputs import text_problem

DocumentSort = Literal["newest", "oldest", "relevance"]
SORTS: tuple[DocumentSort, ...] = ("newest", "oldest", "relevance")

DEFAULT_PAGE_SIZE = 20
MAX_PAGE_SIZE = 50
MAX_PAGE = 10_000
"""A page past this is refused: OFFSET scans every skipped row, and nobody pages that far."""

SNIPPET_CHARS = 240

_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_LANGUAGE = re.compile(r"^[a-z]{2,3}(-[a-z0-9]{2,8})?$")


def iso_date(value: Any, name: str) -> date | None:
    """A date written YYYY-MM-DD (or a date object); anything else is refused, numbers included
    (pydantic would read 2025 as seconds since 1970)."""
    if value is None or value == "":
        return None
    if isinstance(value, date):
        return value
    if isinstance(value, str) and _DATE.match(value.strip()):
        try:
            return date.fromisoformat(value.strip())
        except ValueError:
            pass
    raise ValueError(f"{name} must be a date written YYYY-MM-DD, not {str(value)[:40]!r}")


def language_code(value: Any, name: str) -> str | None:
    """An ISO language code, lower-cased ("de", "pt-br"); anything else is refused."""
    if value is None or value == "":
        return None
    if not isinstance(value, str) or not _LANGUAGE.match(value.strip().lower()):
        raise ValueError(f"{name} must be an ISO code such as en or de, not {str(value)[:20]!r}")
    return value.strip().lower()


class DocumentQuery(BaseModel):
    """Which documents to list and which page of them. Only active (current) versions are listed.

    `date_to` is inclusive: a document dated on that day is listed.
    """

    model_config = ConfigDict(extra="forbid")

    text: str | None = Field(
        default=None,
        max_length=500,
        description="Words to find in the title or text (full-text search; all words must "
        "occur; \"quoted phrase\", or, -word are understood). Empty: every document.",
    )
    language: str | None = Field(
        default=None, description="Only documents in this language (ISO code such as en, de)."
    )
    date_from: date | None = Field(
        default=None, description="Documents dated on or after this day (YYYY-MM-DD)."
    )
    date_to: date | None = Field(
        default=None, description="Documents dated on or before this day (YYYY-MM-DD)."
    )
    sort: DocumentSort | None = Field(
        default=None,
        description="newest, oldest or relevance (needs text). Default: relevance with text, "
        "newest without.",
    )
    page: int = Field(default=1, ge=1, le=MAX_PAGE, description="Page number, from 1.")
    page_size: int = Field(
        default=DEFAULT_PAGE_SIZE, ge=1, le=MAX_PAGE_SIZE, description="Documents per page."
    )

    @field_validator("text", mode="before")
    @classmethod
    def _text(cls, value: Any) -> Any:
        if isinstance(value, str):
            problem = text_problem(value)
            if problem is not None:  # the database would fail on it, not refuse it
                raise ValueError(f"text {problem}")
            return " ".join(value.split()) or None
        return value

    @field_validator("language", mode="before")
    @classmethod
    def _language(cls, value: Any) -> Any:
        return language_code(value, "language")

    @field_validator("date_from", "date_to", mode="before")
    @classmethod
    def _dates(cls, value: Any, info: Any) -> date | None:
        return iso_date(value, info.field_name)

    @field_validator("sort", mode="before")
    @classmethod
    def _sort(cls, value: Any) -> Any:
        if value is None or value == "":
            return None
        if not isinstance(value, str) or value.strip().lower() not in SORTS:
            raise ValueError(f"sort must be one of {', '.join(SORTS)}, not {str(value)[:20]!r}")
        return value.strip().lower()

    @field_validator("page", "page_size", mode="before")
    @classmethod
    def _whole(cls, value: Any, info: Any) -> Any:
        if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
            raise ValueError(f"{info.field_name} must be a whole number")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> DocumentQuery:
        if self.date_from and self.date_to and self.date_from > self.date_to:
            raise ValueError(f"date_from {self.date_from} is after date_to {self.date_to}")
        if self.sort == "relevance" and not self.text:
            raise ValueError("sort=relevance needs text to rank by")
        return self

    def normalised(self) -> DocumentQuery:
        """The same query with its default sort written out: what a result sends back."""
        if self.sort is not None:
            return self
        return self.model_copy(update={"sort": "relevance" if self.text else "newest"})

    @property
    def effective_sort(self) -> DocumentSort:
        return self.sort or ("relevance" if self.text else "newest")

    def describe(self) -> str:
        """The criteria in words, for messages ("text "contract", from 2025-01-01")."""
        parts = []
        if self.text:
            parts.append(f'text "{self.text}"')
        if self.language:
            parts.append(f"language {self.language}")
        if self.date_from and self.date_to:
            parts.append(f"dated {self.date_from} to {self.date_to}")
        elif self.date_from:
            parts.append(f"dated from {self.date_from}")
        elif self.date_to:
            parts.append(f"dated up to {self.date_to}")
        return ", ".join(parts) or "all documents"


class DocumentItem(BaseModel):
    """One listed document (its active version)."""

    doc_id: str
    title: str
    version: str | None = None
    document_date: date | None = None
    language: str | None = None
    source_url: str | None = None
    snippet: str = Field(default="", description="A short passage: where the text matched.")


class DocumentList(BaseModel):
    """One page of a document search."""

    items: list[DocumentItem] = Field(default_factory=list)
    total_items: int = 0
    page: int = 1
    page_size: int = DEFAULT_PAGE_SIZE
    total_pages: int = 0

    @classmethod
    def of(cls, items: list[DocumentItem], total: int, query: DocumentQuery) -> DocumentList:
        return cls(
            items=items,
            total_items=total,
            page=query.page,
            page_size=query.page_size,
            total_pages=math.ceil(total / query.page_size) if total else 0,
        )

    @property
    def has_more(self) -> bool:
        """More matching documents than this page shows."""
        return self.total_items > len(self.items)


def parse_query(raw: DocumentQuery | dict[str, Any] | None = None, **overrides: Any) -> DocumentQuery:
    """A validated query from a mapping (or a query) plus keyword overrides; raises
    InvalidQuestion with one sentence per problem, safe to show."""

    base = raw.model_dump(exclude_none=True) if isinstance(raw, DocumentQuery) else dict(raw or {})
    base.update({k: v for k, v in overrides.items() if v is not None})
    try:
        return DocumentQuery.model_validate(base)
    except ValidationError as exc:
        raise InvalidQuestion(errors_text(exc)) from None


def errors_text(exc: ValidationError) -> str:
    """Validation errors as one line: "page: must be at least 1; sort: ..." (no input echoed)."""
    parts = []
    for err in exc.errors(include_input=False):
        loc = ".".join(str(x) for x in err.get("loc", ()))
        msg = str(err.get("msg", "invalid")).removeprefix("Value error, ")
        if err.get("type") == "greater_than_equal":
            msg = f"must be at least {err.get('ctx', {}).get('ge')}"
        elif err.get("type") == "less_than_equal":
            msg = f"must be at most {err.get('ctx', {}).get('le')}"
        elif err.get("type") == "extra_forbidden":
            msg = "is not a search parameter"
        parts.append(f"{loc}: {msg}" if loc and not msg.startswith(loc) else msg)
    return "; ".join(parts) or "invalid search parameters"


def listing_text(query: DocumentQuery, documents: DocumentList) -> str:
    """The plain-text reply of a search: how many matched, which page, the titles on it."""
    if documents.total_items == 0:
        return f"No document matched the criteria ({query.describe()})."
    count = f"{documents.total_items} document{'s' if documents.total_items != 1 else ''}"
    head = (
        f"{count} matched ({query.describe()}); page {documents.page} of {documents.total_pages}, "
        f"sorted by {query.effective_sort}."
    )
    if not documents.items:
        return head + " This page is past the last one."
    lines = [head]
    first = (documents.page - 1) * documents.page_size
    for n, item in enumerate(documents.items, start=first + 1):
        meta = ", ".join(
            x for x in (
                f"version {item.version}" if item.version else "",
                str(item.document_date) if item.document_date else "",
                item.language or "",
            ) if x
        )
        lines.append(f"{n}. {item.title}" + (f" ({meta})" if meta else ""))
    return "\n".join(lines)


def no_selection_text(query: DocumentQuery) -> str:
    """The reply of a search-and-ask whose search found nothing: no answer from elsewhere."""
    return (
        f"No document matched the criteria ({query.describe()}), so there is nothing to answer "
        "from: the rest of the knowledge base was not searched in their place."
    )


def coverage_text(documents: DocumentList, used: int) -> str:
    """The note under an answer drawn from part of the matching documents."""
    shown = len(documents.items)
    scope = (
        f"the {shown} document(s) of page {documents.page} of {documents.total_pages} "
        f"({documents.total_items} matched)"
        if documents.has_more
        else f"the {shown} matching document(s)"
    )
    return (
        f"Note: this answer rests on {used} of {scope}; it is not an analysis of every "
        "matching document."
    )
