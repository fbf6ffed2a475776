"""What every loader yields: a `SourceDocument` of sections (heading path, text, first page),
with its metadata read from the file and, where present, a sidecar `NAME.EXT.meta.yaml`."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel

from grounded_agent.inputs import (
    clean_text,
    doc_id_problem,
    language_problem,
    safe_doc_id,
    url_problem,
    version_problem,
)

Format = Literal["markdown", "text", "pdf", "docx", "html"]

SIDECAR_SUFFIX = ".meta.yaml"
"""`report.pdf.meta.yaml` beside `report.pdf` overrides the metadata the file itself holds."""

METADATA_KEYS = (
    "id", "title", "version", "source_url", "document_date", "is_active", "language", "access"
)
"""The keys of Markdown front matter and of a sidecar (plus aliases and extra keys)."""

MAX_FRONT_MATTER_BYTES = 64 * 1024
"""The largest front matter or sidecar: metadata, not a document."""
MAX_ALIASES = 16
"""YAML aliases (`*name`) one front matter or sidecar may use: enough to share a value, too few
for a "billion laughs" bomb (319 bytes of nested aliases expand to hundreds of megabytes)."""
MAX_METADATA_CHARS = 64 * 1024
"""The size of a document's metadata once aliases are expanded, as stored and hashed."""
MAX_TOKEN_CHARS = 256
"""The longest word kept (a run of characters without a space): a longer one (a base64 blob, a
line of one letter repeated) is left out, with the file reported, since it would make one
oversized chunk and an index entry PostgreSQL cannot store."""
MAX_DOCUMENT_CHARS = 4_000_000
"""The largest document text (about 1,500 printed pages, some 3,600 chunks to embed); a larger one
is refused with its size, unless GROUNDED_AGENT_MAX_DOCUMENT_CHARS raises the limit. A 10 MB line
of words would otherwise hold an ingest for minutes."""
MAX_DOCUMENT_CHARS_ENV = "GROUNDED_AGENT_MAX_DOCUMENT_CHARS"
MAX_HEADING_CHARS = 300
"""A heading or title is cut at this length: it names a section, it is not its text."""

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
    "access",
}

Access = tuple[str, ...] | Literal["public"]
"""Who may read a document: "public" (everyone) or its groups (empty: only principals who see
everything, "private")."""


def parse_access(value: Any, key: str = "access") -> Access:
    """An access declaration: "public", "private", a group, groups separated by commas, or a
    list of groups; IngestError naming the rule (never the value) otherwise."""
    from grounded_agent.principals import parse_groups

    if isinstance(value, str) and value.strip().lower() in ("public", "private"):
        return "public" if value.strip().lower() == "public" else ()
    if isinstance(value, str) or (
        isinstance(value, list | tuple) and all(isinstance(v, str) for v in value)
    ):
        try:
            groups = parse_groups(value)
        except ValueError as exc:
            raise IngestError(f"invalid {key}: {exc}") from None
        if not groups:
            raise IngestError(f"invalid {key}: name groups, or say public or private")
        return groups
    raise IngestError(f"invalid {key}: use public, private, a group or a list of groups")


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
    access: Access | None = None
    """Who may read it, as the document declares (None: it declares nothing)."""
    extra: dict[str, Any] = field(default_factory=dict)
    sections: list[Section] | None = None
    source_path: str | None = None
    """The file it came from (absolute), for `docs show` and `ingest --sync`."""
    notes: list[str] = field(default_factory=list)
    """What the ingest left out of it and why (words longer than MAX_TOKEN_CHARS)."""


# --- metadata -----------------------------------------------------------------------------------


def parse_front_matter(raw: str) -> tuple[dict[str, Any], str]:
    """Splits YAML front matter (between --- lines) from the body; raises IngestError if invalid.

    Scalars stay strings (BaseLoader), so `version: 2026.10` is not read as the float 2026.1.
    """
    text = raw.removeprefix("\ufeff")
    first, nl, rest = text.partition("\n")
    if first.strip() != "---" or not nl:
        return {}, text
    end = re.search(r"^(?:---|\.\.\.)[ \t\r]*$", rest[: MAX_FRONT_MATTER_BYTES + 8], re.MULTILINE)
    if end is None:
        if len(rest.encode("utf-8", "surrogatepass")) > MAX_FRONT_MATTER_BYTES:
            raise IngestError(f"front matter is larger than {MAX_FRONT_MATTER_BYTES // 1024} KB "
                              "(or has no closing '---' line)")
        raise IngestError("front matter has no closing '---' line")
    block = rest[: end.start()]
    body = rest[end.end() :].removeprefix("\n")
    return _yaml_mapping(block, "front matter", line_offset=2), body


class _BoundedLoader(yaml.BaseLoader):
    """YAML as strings (BaseLoader) with at most MAX_ALIASES aliases."""

    aliases = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            self.aliases += 1
            if self.aliases > MAX_ALIASES:
                raise IngestError(f"uses more than {MAX_ALIASES} YAML aliases (*name)")
        return super().compose_node(parent, index)


def _expanded_size(value: Any, budget: int) -> int:
    """Characters of `value` with every alias expanded, counting stops past `budget`."""
    size, todo = 0, [value]
    while todo and size <= budget:
        item = todo.pop()
        if isinstance(item, dict):
            for key, sub in item.items():
                size += len(str(key)) + 2
                todo.append(sub)
        elif isinstance(item, (list, tuple)):
            size += 2
            todo.extend(item)
        else:
            size += len(str(item)) + 1
    return size


def _yaml_mapping(block: str, what: str, line_offset: int = 1) -> dict[str, Any]:
    if len(block.encode("utf-8", "surrogatepass")) > MAX_FRONT_MATTER_BYTES:
        raise IngestError(f"{what} is larger than {MAX_FRONT_MATTER_BYTES // 1024} KB")
    try:
        meta = yaml.load(block, Loader=_BoundedLoader) if block.strip() else {}
    except IngestError as exc:
        raise IngestError(f"{what} {exc}") from None
    except RecursionError:
        raise IngestError(f"{what} nests too deep") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + line_offset})" if mark is not None else ""
        raise IngestError(f"invalid YAML {what}{where}: {getattr(exc, 'problem', exc)}") from None
    if meta is None:
        meta = {}
    if not isinstance(meta, dict):
        raise IngestError(f"{what} must be a mapping of key: value")
    if _expanded_size(meta, MAX_METADATA_CHARS) > MAX_METADATA_CHARS:
        raise IngestError(f"{what} is larger than {MAX_METADATA_CHARS // 1024} KB once its "
                          "aliases are expanded")
    return meta


FOLLOW_LINKS_ENV = "GROUNDED_AGENT_FOLLOW_SYMLINKS"
"""Set to 1 to follow symbolic links (files, sidecars) in an ingested folder to places outside
it; by default they are reported and not read."""


def max_document_chars() -> int:
    """MAX_DOCUMENT_CHARS, or the whole number GROUNDED_AGENT_MAX_DOCUMENT_CHARS gives."""
    raw = os.environ.get(MAX_DOCUMENT_CHARS_ENV, "").strip().replace("_", "")
    return int(raw) if raw.isdigit() and int(raw) > 0 else MAX_DOCUMENT_CHARS


def follow_links_setting() -> bool:
    return os.environ.get(FOLLOW_LINKS_ENV, "").strip().lower() in ("1", "true", "yes")


def sidecar_path(path: Path) -> Path:
    return path.with_name(path.name + SIDECAR_SUFFIX)


def read_sidecar(path: Path) -> dict[str, Any]:
    """The metadata of `NAME.EXT.meta.yaml` beside `path`, or {} when there is none."""
    side = sidecar_path(path)
    if not side.is_file():
        return {}
    if side.is_symlink() and not follow_links_setting():
        target = side.resolve()
        if not target.is_relative_to(path.absolute().parent.resolve()):
            raise IngestError(f"sidecar {side.name} is a symbolic link out of its folder: not "
                              "followed (GROUNDED_AGENT_FOLLOW_SYMLINKS=1 follows it)")
    try:
        if side.stat().st_size > MAX_FRONT_MATTER_BYTES:
            raise IngestError(
                f"sidecar {side.name} is larger than {MAX_FRONT_MATTER_BYTES // 1024} KB")
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
    raise IngestError(f"invalid {key} {str(value)[:20]!r}: use YYYY-MM-DD")


def parse_bool(value: Any, key: str = "is_active") -> bool | None:
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "yes", "on", "1"):
        return True
    if isinstance(value, str) and value.strip().lower() in ("false", "no", "off", "0"):
        return False
    raise IngestError(f"invalid {key} {str(value)[:20]!r}: use true or false")


def opt_str(value: Any) -> str | None:
    if value is None:
        return None
    s = clean_text(str(value)).strip()
    return s or None


def first_heading(body: str) -> str | None:
    for line in body.splitlines():
        m = _HEADING.match(line)
        if m:
            return heading_text(m.group(2))
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
    meta = clean_metadata(meta)
    if _expanded_size(meta, MAX_METADATA_CHARS) > MAX_METADATA_CHARS:
        raise IngestError(f"metadata is larger than {MAX_METADATA_CHARS // 1024} KB")
    notes: list[str] = []
    if sections is not None:  # the body is their rendering: rendered again once cleaned
        sections = [
            Section(tuple(heading_text(h) for h in s.path), clean_body(s.text, notes), s.page)
            for s in sections
        ]
        sections = [s for s in sections if s.text.strip()]
        body = render_sections(sections)
    else:
        body = clean_body(body, notes)
    if not body.strip() or sections == []:
        raise IngestError("empty document: no text" + (f" ({notes[0]})" if notes else ""))
    limit = max_document_chars()
    if len(body) > limit:
        raise IngestError(f"text of {len(body):,} characters is larger than the limit of "
                          f"{limit:,} ({MAX_DOCUMENT_CHARS_ENV} raises it)")
    declared = opt_str(meta.get("doc_id")) or opt_str(meta.get("id"))
    doc_id = declared or safe_doc_id(default_id)
    _check("id", doc_id, doc_id_problem)
    page = meta.get("page")
    try:
        page_no = int(page) if page not in (None, "") else None
    except (TypeError, ValueError):
        raise IngestError(f"invalid page {str(page)[:20]!r}: use a whole number") from None
    title = opt_str(meta.get("title")) or (clean_text(default_title) if default_title else None)
    if title is None and sections is None:
        title = first_heading(body)
    version = opt_str(meta.get("version"))
    _check("version", version, version_problem)
    source_url = opt_str(meta.get("source_url")) or opt_str(meta.get("url"))
    _check("source_url", source_url, url_problem)
    language = (opt_str(meta.get("language")) or "").lower() or None
    _check("language", language, language_problem)
    access = parse_access(meta["access"]) if meta.get("access") is not None else None
    return SourceDocument(
        doc_id=doc_id,
        title=heading_text(title or doc_id),
        text=body.strip("\n"),
        origin=origin,
        fmt=fmt,
        version=version,
        source_url=source_url,
        document_date=parse_date(meta.get("document_date", meta.get("date"))),
        language=language,
        declared_active=parse_bool(meta.get("is_active")),
        page=page_no,
        access=access,
        extra={k: v for k, v in meta.items() if k not in _KNOWN_KEYS and v is not None},
        sections=sections,
        notes=notes,
    )


def _check(name: str, value: str | None, problem_of: Any) -> None:
    """IngestError naming the field and the rule, never quoting the value (it may be markup)."""
    problem = problem_of(value) if value is not None else None
    if problem is not None:
        raise IngestError(f"invalid {name}: it {problem}")


def heading_text(value: str) -> str:
    """A heading or title on one line, cut at MAX_HEADING_CHARS."""
    value = " ".join(value.split())
    return value if len(value) <= MAX_HEADING_CHARS else value[: MAX_HEADING_CHARS - 1] + "…"


def clean_metadata(value: Any) -> Any:
    """Metadata as stored: every key and string `clean_text`-ed (NFKC, no invisible or control
    characters), keys as strings."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, dict):
        return {clean_text(str(k)): clean_metadata(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean_metadata(v) for v in value]
    return value


_LONG_TOKEN = re.compile(rf"\S{{{MAX_TOKEN_CHARS + 1},}}")


def clean_body(text: str, notes: list[str]) -> str:
    """A document's text as stored: `clean_text`, and words longer than MAX_TOKEN_CHARS left
    out, each counted in `notes`."""
    text = clean_text(text)
    if len(text) > MAX_TOKEN_CHARS and _LONG_TOKEN.search(text):
        dropped = len(_LONG_TOKEN.findall(text))
        text = _LONG_TOKEN.sub(" ", text)
        notes.append(f"{dropped} word(s) longer than {MAX_TOKEN_CHARS} characters left out")
    return text


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
            merge_meta(_usable(file_meta), sidecar),
            render_sections(sections),
            default_id=path.stem,
            origin=str(path),
            fmt=fmt,
            sections=sections,
            default_title=default_title,
        )
    ]


_RULES = {"version": version_problem, "source_url": url_problem, "language": language_problem}


def _usable(file_meta: dict[str, Any]) -> dict[str, Any]:
    """A file's own properties (PDF information, DOCX core properties, HTML head) without the
    values that break a field's rule: nobody declared them for this knowledge base, so they are
    left out (and the file read) where a declared value would be refused."""
    out = dict(file_meta)
    for key, problem_of in _RULES.items():
        value = opt_str(out.get(key))
        if value is not None and problem_of(value if key != "language" else value.lower()):
            del out[key]
    return out


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
