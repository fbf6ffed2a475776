"""Ingestion: Markdown, text and JSON Lines files into heading-aware chunks in the knowledge store.

Idempotent by content hash: an unchanged document is skipped, a changed one replaces its chunks
in one transaction, and among versions of one doc_id the latest (by document_date, else the last
ingested) is the only one searched. A bad file is reported and the others still go in.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import re
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import yaml
from pydantic import BaseModel, Field

from grounded_agent.store.errors import StoreError
from grounded_agent.store.records import ChunkRecord, DocumentRecord, passage_text

if TYPE_CHECKING:
    from grounded_agent.store.vectorstore import KnowledgeStore

log = logging.getLogger(__name__)

SUFFIXES = frozenset({".md", ".markdown", ".txt", ".jsonl"})
MAX_CHARS = 1100
"""Upper bound of a chunk; chunks aim at 800-1,100 characters, cut at paragraphs or sentences."""
MIN_CHARS = 250
"""A trailing piece shorter than this joins the previous chunk when it fits."""
CHUNKER_VERSION = 1
"""Part of the content hash: changing the chunker re-ingests everything once."""
WINDOW_DOCS = 256
"""Documents embedded and written per round, bounding memory on large corpora."""

_HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t]*#*[ \t]*$")
_FENCE = re.compile(r"^\s*(```|~~~)")
_SENTENCE_END = re.compile(r"(?<=[.!?…])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9À-Ý])")
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


class IngestReport(BaseModel):
    """What one ingestion did; `model_dump(mode="json")` is the CLI's --json object."""

    documents: int = Field(0, description="Documents read without error (written or skipped).")
    added: int = Field(0, description="Document versions written for the first time.")
    chunks: int = Field(0, description="Chunks written.")
    skipped: int = Field(0, description="Documents unchanged since the last ingestion.")
    replaced: int = Field(0, description="Document versions whose earlier chunks were replaced.")
    deactivated: int = Field(0, description="Older versions no longer searched.")
    errors: list[FileError] = Field(default_factory=list)
    files: int = 0
    embedding_seconds: float = 0.0
    database_seconds: float = 0.0
    elapsed_seconds: float = 0.0


@dataclass
class SourceDocument:
    """A document as read from a file, before chunking."""

    doc_id: str
    title: str
    text: str
    origin: str
    fmt: Literal["markdown", "text"] = "markdown"
    version: str | None = None
    source_url: str | None = None
    document_date: date | None = None
    language: str | None = None
    declared_active: bool | None = None
    page: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)


# --- parsing ------------------------------------------------------------------------------------


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
    try:
        meta = yaml.load(block, Loader=yaml.BaseLoader) if block.strip() else {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 2})" if mark is not None else ""
        raise IngestError(
            f"invalid YAML front matter{where}: {getattr(exc, 'problem', exc)}"
        ) from None
    if meta is None:
        meta = {}
    if not isinstance(meta, dict):
        raise IngestError("front matter must be a mapping of key: value")
    return meta, body


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


def _opt_str(value: Any) -> str | None:
    if value is None:
        return None
    s = str(value).strip()
    return s or None


def _first_heading(body: str) -> str | None:
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
    fmt: Literal["markdown", "text"],
) -> SourceDocument:
    """Builds a document from metadata (front matter or a JSON object) and its text."""
    if not body.strip():
        raise IngestError("empty document: no text")
    doc_id = _opt_str(meta.get("doc_id")) or _opt_str(meta.get("id")) or default_id
    page = meta.get("page")
    try:
        page_no = int(page) if page not in (None, "") else None
    except (TypeError, ValueError):
        raise IngestError(f"invalid page {page!r}: use a whole number") from None
    return SourceDocument(
        doc_id=doc_id,
        title=_opt_str(meta.get("title")) or _first_heading(body) or doc_id,
        text=body.strip("\n"),
        origin=origin,
        fmt=fmt,
        version=_opt_str(meta.get("version")),
        source_url=_opt_str(meta.get("source_url")) or _opt_str(meta.get("url")),
        document_date=parse_date(meta.get("document_date", meta.get("date"))),
        language=(_opt_str(meta.get("language")) or "").lower() or None,
        declared_active=parse_bool(meta.get("is_active")),
        page=page_no,
        extra={k: v for k, v in meta.items() if k not in _KNOWN_KEYS and v is not None},
    )


def load_file(path: Path) -> tuple[list[SourceDocument], list[FileError]]:
    """Documents of one file; raises IngestError when the whole file is unusable."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise IngestError(f"unreadable: {exc.strerror or type(exc).__name__}") from None
    try:
        content = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise IngestError("not UTF-8 text") from None
    if not content.strip():
        raise IngestError("empty file")
    if path.suffix.lower() == ".jsonl":
        return _load_jsonl(path, content)
    meta, body = parse_front_matter(content)
    fmt: Literal["markdown", "text"] = "text" if path.suffix.lower() == ".txt" else "markdown"
    return [document_from_meta(meta, body, default_id=path.stem, origin=str(path), fmt=fmt)], []


def _load_jsonl(path: Path, content: str) -> tuple[list[SourceDocument], list[FileError]]:
    docs: list[SourceDocument] = []
    errors: list[FileError] = []
    for lineno, line in enumerate(content.splitlines(), start=1):
        if not line.strip():
            continue
        origin = f"{path}:{lineno}"
        try:
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise IngestError(f"invalid JSON: {exc.msg}") from None
            if not isinstance(obj, dict):
                raise IngestError("a JSON Lines record must be an object")
            body = obj.get("text")
            if not isinstance(body, str):
                raise IngestError("record has no 'text' string")
            docs.append(
                document_from_meta(
                    obj, body, default_id=f"{path.stem}#{lineno}", origin=origin, fmt="text"
                )
            )
        except IngestError as exc:
            errors.append(FileError(file=origin, reason=str(exc)))
    if not docs and not errors:
        raise IngestError("empty file")
    return docs, errors


def iter_files(paths: Sequence[Path]) -> Iterator[tuple[Path, str | None]]:
    """Files to ingest (directories recurse into known suffixes), or (path, reason) to report."""
    for p in paths:
        if p.is_dir():
            for child in sorted(p.rglob("*")):
                if child.suffix.lower() in SUFFIXES and (child.is_file() or child.is_symlink()):
                    yield child, None
        elif p.suffix.lower() not in SUFFIXES:
            yield (
                p,
                f"unsupported file type {p.suffix or '(none)'}: use .md, .markdown, .txt or .jsonl",
            )
        elif not p.exists() and not p.is_symlink():
            yield p, "no such file"
        else:
            yield p, None


# --- chunking -----------------------------------------------------------------------------------


def split_sections(body: str, *, headings: bool = True) -> list[tuple[list[str], str]]:
    """(heading path, text) of each section; headings inside code fences are not headings."""
    sections: list[tuple[list[str], str]] = []
    stack: list[tuple[int, str]] = []
    buf: list[str] = []
    in_fence = False

    def flush() -> None:
        text = "".join(buf).strip("\n")
        if text.strip():
            sections.append(([t for _, t in stack], text))
        buf.clear()

    for line in body.splitlines(keepends=True):
        if _FENCE.match(line):
            in_fence = not in_fence
        m = None if in_fence or not headings else _HEADING.match(line.rstrip("\n"))
        if m:
            flush()
            level = len(m.group(1))
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, m.group(2).strip()))
        else:
            buf.append(line)
    flush()
    return sections


def _split_long(piece: str, max_chars: int) -> list[str]:
    """A paragraph longer than max_chars, cut at sentence ends, else at spaces (never mid-word)."""
    if len(piece) <= max_chars:
        return [piece]
    sentences = [s for s in _SENTENCE_END.split(piece) if s.strip()]
    out: list[str] = []
    for sentence in sentences:
        if len(sentence) <= max_chars:
            out.append(sentence)
            continue
        words = sentence.split()
        cur = ""
        for w in words:
            if cur and len(cur) + 1 + len(w) > max_chars:
                out.append(cur)
                cur = w
            else:
                cur = f"{cur} {w}" if cur else w
        if cur:
            out.append(cur)
    return out


def split_text(text: str, max_chars: int = MAX_CHARS, min_chars: int = MIN_CHARS) -> list[str]:
    """Packs paragraphs (then sentences) into chunks of at most max_chars."""
    paragraphs = [p.strip() for p in re.split(r"\n[ \t]*\n", text) if p.strip()]
    pieces: list[tuple[str, str]] = []  # (text, separator before it)
    for p in paragraphs:
        parts = _split_long(p, max_chars)
        pieces.append((parts[0], "\n\n"))
        pieces.extend((s, " ") for s in parts[1:])
    chunks: list[str] = []
    cur = ""
    for piece, sep in pieces:
        if not cur:
            cur = piece
        elif len(cur) + len(sep) + len(piece) <= max_chars:
            cur = cur + sep + piece
        else:
            chunks.append(cur)
            cur = piece
    if cur:
        if (
            chunks
            and len(cur) < min_chars
            and len(chunks[-1]) + 2 + len(cur) <= max_chars + min_chars
        ):
            chunks[-1] = chunks[-1] + "\n\n" + cur
        else:
            chunks.append(cur)
    return chunks


def chunk_document(doc: SourceDocument, max_chars: int = MAX_CHARS) -> list[ChunkRecord]:
    """Heading-aware chunks: section = heading path ("Pricing > Pro plan"); form feeds are pages."""
    pages = doc.text.split("\f")
    chunks: list[ChunkRecord] = []
    for page_no, page_text in enumerate(pages, start=1):
        page = doc.page if len(pages) == 1 else page_no
        for path, text in split_sections(page_text, headings=doc.fmt == "markdown"):
            section = " > ".join(path) or None
            for piece in split_text(text, max_chars):
                chunks.append(ChunkRecord(piece, len(chunks), section, page))
    return chunks


def content_hash(doc: SourceDocument) -> str:
    """What decides "unchanged": text, every metadata field and the chunker version."""
    payload = {
        "chunker": CHUNKER_VERSION,
        "text": doc.text,
        "title": doc.title,
        "version": doc.version,
        "source_url": doc.source_url,
        "document_date": doc.document_date,
        "language": doc.language,
        "declared_active": doc.declared_active,
        "page": doc.page,
        "extra": doc.extra,
    }
    data = json.dumps(payload, sort_keys=True, default=str, ensure_ascii=False)
    return hashlib.sha256(data.encode("utf-8")).hexdigest()


def refuse_unstorable(doc: SourceDocument) -> None:
    """IngestError, before anything is embedded, for text PostgreSQL cannot store: a NUL
    character, or a lone surrogate (an unpaired escape in JSON Lines)."""
    from grounded_agent.schemas import text_problem

    def strings(value: Any, where: str) -> Iterator[tuple[str, str]]:
        if isinstance(value, str):
            yield where, value
        elif isinstance(value, dict):
            for key, item in value.items():
                yield from strings(str(key), f"{where} key")
                yield from strings(item, f"{where}.{key}")
        elif isinstance(value, (list, tuple)):
            for item in value:
                yield from strings(item, where)

    fields = {"doc_id": doc.doc_id, "title": doc.title, "text": doc.text,
              "version": doc.version, "source_url": doc.source_url,
              "language": doc.language, "metadata": doc.extra}
    for name, value in fields.items():
        for where, text in strings(value, name):
            problem = text_problem(text)
            if problem is not None:
                raise IngestError(f"{where} {problem}; PostgreSQL cannot store it")


def to_record(doc: SourceDocument) -> DocumentRecord:
    refuse_unstorable(doc)
    chunks = chunk_document(doc)
    if not chunks:
        raise IngestError("empty document: no text")
    return DocumentRecord(
        doc_id=doc.doc_id,
        title=doc.title,
        content_hash=content_hash(doc),
        chunks=chunks,
        version=doc.version,
        source_url=doc.source_url,
        document_date=doc.document_date,
        language=doc.language,
        declared_active=doc.declared_active,
        extra={**doc.extra, "source_file": doc.origin},
    )


# --- the pipeline -------------------------------------------------------------------------------


def _progress_bar(total: int, enabled: bool) -> Any:
    from tqdm import tqdm

    show = enabled and sys.stderr.isatty()
    return tqdm(total=total, unit="chunk", desc="embedding", file=sys.stderr, disable=not show)


async def aingest_paths(
    paths: Sequence[Path], store: KnowledgeStore, *, progress: bool = False
) -> IngestReport:
    """Ingests files and directories into `store`; see `ingest_paths`. One ingestion per
    knowledge base at a time: a second one waits, then skips what the first wrote instead of
    embedding it again."""
    async with store.aingest_lock():
        return await _aingest(paths, store, progress=progress)


async def _aingest(
    paths: Sequence[Path], store: KnowledgeStore, *, progress: bool = False
) -> IngestReport:
    started = time.perf_counter()
    report = IngestReport()
    records: list[tuple[str, DocumentRecord]] = []
    for path, problem in iter_files([Path(p) for p in paths]):
        if problem is not None:
            report.errors.append(FileError(file=str(path), reason=problem))
            continue
        report.files += 1
        try:
            docs, line_errors = load_file(path)
        except IngestError as exc:
            report.errors.append(FileError(file=str(path), reason=str(exc)))
            continue
        report.errors.extend(line_errors)
        for doc in docs:
            try:
                records.append((doc.origin, to_record(doc)))
            except IngestError as exc:
                report.errors.append(FileError(file=doc.origin, reason=str(exc)))
    report.documents = len(records)

    if records:  # table creation (first run) may load the model: timed in neither bucket
        await store.aensure_schema()
    t0 = time.perf_counter()
    known: dict[tuple[str, str | None], str] = {}
    ids = sorted({r.doc_id for _, r in records})
    for i in range(0, len(ids), 1000):
        known.update(await store.aknown_hashes(ids[i : i + 1000]))
    report.database_seconds += time.perf_counter() - t0
    pending: list[tuple[str, DocumentRecord]] = []
    for origin, rec in records:
        if known.get((rec.doc_id, rec.version)) == rec.content_hash:
            report.skipped += 1
        else:
            pending.append((origin, rec))

    batch = max(1, store.settings.embed_batch_size)
    if pending:  # load the model here, so its start-up counts as embedding time
        t0 = time.perf_counter()
        await asyncio.to_thread(store.embeddings.embed_query, "warm-up")
        report.embedding_seconds += time.perf_counter() - t0
    bar = _progress_bar(sum(len(r.chunks) for _, r in pending), progress)
    try:
        for w in range(0, len(pending), WINDOW_DOCS):
            window = pending[w : w + WINDOW_DOCS]
            texts = [
                passage_text(r.title, c.section, c.content) for _, r in window for c in r.chunks
            ]
            vectors: list[list[float]] = []
            t0 = time.perf_counter()
            for i in range(0, len(texts), batch):
                part = texts[i : i + batch]
                vectors.extend(await asyncio.to_thread(store.embeddings.embed_documents, part))
                bar.update(len(part))
            report.embedding_seconds += time.perf_counter() - t0
            pos = 0
            t0 = time.perf_counter()
            for origin, rec in window:
                rec.embeddings = vectors[pos : pos + len(rec.chunks)]
                pos += len(rec.chunks)
                try:
                    result = await store.awrite_document(rec)
                except StoreError:
                    raise
                except Exception as exc:  # one bad document must not stop the others
                    log.warning("could not write %s from %s", rec.doc_id, origin, exc_info=True)
                    first = (str(getattr(exc, "orig", None) or exc).strip().splitlines() or [""])[0]
                    reason = f"write failed: {type(exc).__name__}: {first}"
                    report.errors.append(FileError(file=origin, reason=reason))
                    continue
                if result.status == "skipped":
                    report.skipped += 1
                    continue
                report.chunks += len(rec.chunks)
                report.deactivated += result.deactivated
                if result.status == "replaced":
                    report.replaced += 1
                else:
                    report.added += 1
            report.database_seconds += time.perf_counter() - t0
    finally:
        bar.close()
    report.elapsed_seconds = time.perf_counter() - started
    log.info(
        "ingested %d documents (%d added, %d replaced, %d skipped, %d chunks, %d errors) in %.1fs",
        report.documents,
        report.added,
        report.replaced,
        report.skipped,
        report.chunks,
        len(report.errors),
        report.elapsed_seconds,
    )
    return report


def ingest_paths(
    paths: Sequence[Path], store: KnowledgeStore, *, progress: bool = False
) -> IngestReport:
    """Ingests files and directories (*.md, *.markdown, *.txt, *.jsonl) into the store.

    A bad file lands in `errors` and the others are still ingested; a database that cannot be
    reached raises StoreUnavailable (nothing was reported as done that was not).
    """
    return store.run_sync(aingest_paths(paths, store, progress=progress))
