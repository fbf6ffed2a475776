"""What every loader yields: a `SourceDocument` of sections (heading path, text, first page),
with its metadata read from the file and, where present, a sidecar `NAME.EXT.meta.yaml`."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel

Format = Literal["markdown", "text", "pdf", "docx", "html"]

SIDECAR_SUFFIX = ".meta.yaml"
"""`report.pdf.meta.yaml` beside `report.pdf` overrides the metadata the file itself holds."""

METADATA_KEYS = ("id", "title", "version", "source_url", "document_date", "is_active", "language")
"""The keys of Markdown front matter and of a sidecar (plus aliases and extra keys)."""

_HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t]*#*[ \t]*$")
_KNOWN_KEYS = {
    "id",
    "doc_id",
    "title",
    "text",
    "version",
    "source_url",
    "url",
    "document_date",
    "date",
    "is_active",
    "language",
    "page",
}


class IngestError(Exception):
    """A file or record that cannot be ingested; the reason is shown to the user."""


class FileError(BaseModel):
    file: str
    reason: str


@dataclass(frozen=True)
class Section:
    """Text under one heading path. `text` holds paragraphs separated by blank lines and a form
    feed where a page ends; `page` is the page its text starts on (None: the file has none)."""

    path: tuple[str, ...]
    text: str
    page: int | None = None


@dataclass
class SourceDocument:
    """A document as read from a file, before chunking.

    Markdown and text documents keep their sections in `text` (headings as `#` lines, pages as
    form feeds); loaders of PDF, Word and HTML files set `sections` and a plain rendering as
    `text`.
    """

    doc_id: str
    title: str
    text: str
    origin: str
    fmt: Format = "markdown"
    version: str | None = None
    source_url: str | None = None
    document_date: date | None = None
    language: str | None = None
    declared_active: bool | None = None
    page: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    sections: list[Section] | None = None
    source_path: str | None = None
    """The file it came from (absolute), for `docs show` and `ingest --sync`."""


# --- metadata -----------------------------------------------------------------------------------


def parse_front_matter(raw: str) -> tuple[dict[str, Any], str]:
    """Splits YAML front matter (between --- lines) from the body; raises IngestError if invalid.

    Scalars stay strings (BaseLoader), so `version: 2026.10` is not read as the float 2026.1.
    """
    text = raw.removeprefix("\ufeff")
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        return {}, text
    for i in range(1, len(lines)):
        if lines[i].strip() in ("---", "..."):
            block = "".join(lines[1:i])
            body = "".join(lines[i + 1 :])
            break
    else:
        raise IngestError("front matter has no closing '---' line")
    return _yaml_mapping(block, "front matter", line_offset=2), body


def _yaml_mapping(block: str, what: str, line_offset: int = 1) -> dict[str, Any]:
    try:
        meta = yaml.load(block, Loader=yaml.BaseLoader) if block.strip() else {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + line_offset})" if mark is not None else ""
        raise IngestError(f"invalid YAML {what}{where}: {getattr(exc, 'problem', exc)}") from None
    if meta is None:
        meta = {}
    if not isinstance(meta, dict):
        raise IngestError(f"{what} must be a mapping of key: value")
    return meta


def sidecar_path(path: Path) -> Path:
    return path.with_name(path.name + SIDECAR_SUFFIX)


def read_sidecar(path: Path) -> dict[str, Any]:
    """The metadata of `NAME.EXT.meta.yaml` beside `path`, or {} when there is none."""
    side = sidecar_path(path)
    if not side.is_file():
        return {}
    try:
        raw = side.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise IngestError(f"unreadable sidecar {side.name}: {exc}") from None
    return _yaml_mapping(raw, f"in sidecar {side.name}")


def parse_date(value: Any, key: str = "document_date") -> date | None:
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        return value.date()
    if isinstance(value, date):
        return value
    if isinstance(value, str):
        raw = value.strip()
        try:
            return date.fromisoformat(raw)
        except ValueError:
            pass
        try:
            return datetime.fromisoformat(raw).date()
        except ValueError:
            pass
    raise IngestError(f"invalid {key} {value!r}: use YYYY-MM-DD")


def parse_bool(value: Any, key: str = "is_active") -> bool | None:
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "yes", "on", "1"):
        return True
    if isinstance(value, str) and value.strip().lower() in ("false", "no", "off", "0"):
        return False
    raise IngestError(f"invalid {key} {value!r}: use true or false")


def opt_str(value: Any) -> str | None:
    if value is None:
        return None
    s = str(value).strip()
    return s or None


def first_heading(body: str) -> str | None:
    for line in body.splitlines():
        m = _HEADING.match(line)
        if m:
            return m.group(2).strip()
    return None


def document_from_meta(
    meta: dict[str, Any],
    body: str,
    *,
    default_id: str,
    origin: str,
    fmt: Format,
    sections: list[Section] | None = None,
    default_title: str | None = None,
) -> SourceDocument:
    """Builds a document from metadata (front matter, a JSON object, a file's own properties
    overridden by its sidecar) and its text."""
    if not body.strip():
        raise IngestError("empty document: no text")
    doc_id = opt_str(meta.get("doc_id")) or opt_str(meta.get("id")) or default_id
    page = meta.get("page")
    try:
        page_no = int(page) if page not in (None, "") else None
    except (TypeError, ValueError):
        raise IngestError(f"invalid page {page!r}: use a whole number") from None
    title = opt_str(meta.get("title")) or default_title
    if title is None and sections is None:
        title = first_heading(body)
    return SourceDocument(
        doc_id=doc_id,
        title=title or doc_id,
        text=body.strip("\n"),
        origin=origin,
        fmt=fmt,
        version=opt_str(meta.get("version")),
        source_url=opt_str(meta.get("source_url")) or opt_str(meta.get("url")),
        document_date=parse_date(meta.get("document_date", meta.get("date"))),
        language=(opt_str(meta.get("language")) or "").lower() or None,
        declared_active=parse_bool(meta.get("is_active")),
        page=page_no,
        extra={k: v for k, v in meta.items() if k not in _KNOWN_KEYS and v is not None},
        sections=sections,
    )


def merge_meta(from_file: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """The file's own metadata with a sidecar's (or front matter's) keys winning; an alias in
    the override (`doc_id`/`id`, `date`/`document_date`, `url`/`source_url`) replaces its twin."""
    twins = {
        "id": "doc_id", "doc_id": "id", "date": "document_date", "document_date": "date",
        "url": "source_url", "source_url": "url",
    }
    merged = dict(from_file)
    for key, value in override.items():
        merged.pop(twins.get(key, key), None)
        merged[key] = value
    return merged


def render_sections(sections: list[Section]) -> str:
    """A plain rendering of sections (heading lines, paragraphs, form feeds between pages):
    what a structured document's content hash and `docs show` read."""
    out: list[str] = []
    shown: tuple[str, ...] = ()
    page: int | None = None
    for s in sections:
        if page is not None and s.page is not None and s.page > page:
            out.append("\f" * (s.page - page))
        if s.path != shown:
            common = 0
            while common < min(len(s.path), len(shown)) and s.path[common] == shown[common]:
                common += 1
            out.extend(f"{'#' * (i + 1)} {h}\n\n" for i, h in enumerate(s.path) if i >= common)
            shown = s.path
        out.append(s.text.strip() + "\n\n")
        if s.page is not None:
            page = s.page + s.text.count("\f")
    return "".join(out).strip("\n")


def sectioned_document(
    path: Path,
    sections: list[Section],
    file_meta: dict[str, Any],
    sidecar: dict[str, Any],
    fmt: Format,
) -> list[SourceDocument]:
    """The one document of a file read into sections (PDF, Word, HTML): the file's metadata
    under its sidecar's, the first heading as the title when neither names one."""
    if not sections:
        raise IngestError("empty document: no text")
    default_title = next((s.path[0] for s in sections if s.path), None)
    return [
        document_from_meta(
            merge_meta(file_meta, sidecar),
            render_sections(sections),
            default_id=path.stem,
            origin=str(path),
            fmt=fmt,
            sections=sections,
            default_title=default_title,
        )
    ]


def table_text(rows: list[list[str]]) -> str:
    """A table as text a reader and a retriever can use row by row: with a header row of distinct
    names, each further row reads "Name: value; Name: value."; without one, cells joined by " | "."""
    rows = [[" ".join(c.split()) for c in row] for row in rows]
    rows = [row for row in rows if any(row)]
    if not rows:
        return ""
    head = rows[0]
    keyed = (
        len(rows) >= 2
        and len(head) >= 2
        and all(head)
        and len(set(head)) == len(head)
        and all(len(row) == len(head) for row in rows[1:])
    )
    if not keyed:
        return "\n".join(" | ".join(c for c in row if c) for row in rows)
    lines = []
    for row in rows[1:]:
        pairs = [f"{h}: {c}" for h, c in zip(head, row, strict=True) if c]
        if pairs:
            lines.append("; ".join(pairs).rstrip(".") + ".")
    return "\n".join(lines)
