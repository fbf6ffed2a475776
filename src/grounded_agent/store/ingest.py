"""Ingestion: Markdown, text, JSON Lines, PDF, Word and HTML files into heading-aware chunks in
the knowledge store; each chunk keeps the page its text is printed on (chunks end at page
boundaries).

Reading a file is the job of `grounded_agent.loaders` (one module per format); this module chunks
what they yield and writes it. Idempotent by content hash: an unchanged document is skipped, a
changed one replaces its chunks in one transaction, and among versions of one doc_id the latest
(by document_date, else the last ingested) is the only one searched. A bad file is reported and
the others still go in. With `sync`, versions ingested earlier from files under a directory
that this run did not read are removed (no longer searched).
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import logging
import os
import re
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from grounded_agent.inputs import text_problem
from grounded_agent.loaders import SUFFIXES, iter_files, load_file
from grounded_agent.loaders.base import (
    Access,
    FileError,
    IngestError,
    Section,
    SourceDocument,
    document_from_meta,
    heading_text,
    parse_access,
    parse_bool,
    parse_date,
    parse_front_matter,
)
from grounded_agent.store.catalog import KnownVersion
from grounded_agent.store.errors import StoreError
from grounded_agent.store.records import ChunkRecord, DocumentRecord, passage_text
from grounded_agent.untrusted.screening import FlaggedDocument, drop_prompt_elements, screen

if TYPE_CHECKING:
    from grounded_agent.store.vectorstore import KnowledgeStore

log = logging.getLogger(__name__)

MAX_CHARS = 1100
"""Upper bound of a chunk; chunks aim at 800-1,100 characters, cut at paragraphs or sentences."""
MIN_CHARS = 250
"""A trailing piece shorter than this joins the previous chunk when it fits."""
CHUNKER_VERSION = 2
"""Part of the content hash: changing the chunker re-ingests everything once (2: chunks end at
page boundaries)."""
WINDOW_DOCS = 256
"""Documents embedded and written per round, bounding memory on large corpora."""

_HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t]*#*[ \t]*$")
_FENCE = re.compile(r"^\s*(```|~~~)")
_SENTENCE_END = re.compile(r"(?<=[.!?…])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9À-Ý])")


class IngestReport(BaseModel):
    """What one ingestion did; `model_dump(mode="json")` is the CLI's --json object."""

    documents: int = Field(0, description="Documents read without error (written or skipped).")
    added: int = Field(0, description="Document versions written for the first time.")
    chunks: int = Field(0, description="Chunks written.")
    skipped: int = Field(0, description="Documents unchanged since the last ingestion.")
    replaced: int = Field(0, description="Document versions whose earlier chunks were replaced.")
    deactivated: int = Field(0, description="Older versions no longer searched.")
    restored: int = Field(0, description="Removed versions brought back by reading their file.")
    access_changed: int = Field(
        0, description="Unchanged documents whose access list changed (changed in place)."
    )
    removed: int = Field(
        0, description="With sync: versions whose file is gone from the directory, now removed."
    )
    errors: list[FileError] = Field(default_factory=list)
    flagged: list[FlaggedDocument] = Field(
        default_factory=list,
        description="Documents read whose text or metadata holds instruction-like content or "
        "prompt markup (screening.py), written or skipped; kept out of answers unless "
        "GROUNDED_AGENT_FLAGGED_DOCUMENTS=include.",
    )
    warnings: list[FileError] = Field(
        default_factory=list,
        description="Documents read and written with a part left out, and why (words longer "
        "than loaders.base.MAX_TOKEN_CHARS).",
    )
    files: int = 0
    embedding_seconds: float = 0.0
    database_seconds: float = 0.0
    elapsed_seconds: float = 0.0


# --- chunking -----------------------------------------------------------------------------------


def markdown_sections(
    body: str, *, headings: bool = True, first_page: int | None = None
) -> list[Section]:
    """Sections of a Markdown or text body: `#` headings (not inside code fences) make the heading
    path; a form feed ends a page, and each section starts on the page of its first text."""
    sections: list[Section] = []
    stack: list[tuple[int, str]] = []
    buf: list[str] = []
    page = first_page
    start_page = page
    in_fence = False

    def flush() -> None:
        raw = "".join(buf)
        text = raw.strip()
        if text:
            lead = raw[: len(raw) - len(raw.lstrip())]
            start = start_page + lead.count("\f") if start_page is not None else None
            sections.append(Section(tuple(t for _, t in stack), text, start))
        buf.clear()

    for line in body.splitlines(keepends=True):
        if not buf:
            start_page = page
        if page is not None:
            page += line.count("\f")
        bare = line.lstrip("\f")
        if _FENCE.match(bare):
            in_fence = not in_fence
        m = None if in_fence or not headings else _HEADING.match(bare.rstrip("\n"))
        if m:
            flush()
            start_page = page
            level = len(m.group(1))
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, heading_text(m.group(2))))
        else:
            buf.append(line)
    flush()
    return sections


def split_sections(body: str, *, headings: bool = True) -> list[tuple[list[str], str]]:
    """(heading path, text) of each section; headings inside code fences are not headings."""
    return [(list(s.path), s.text) for s in markdown_sections(body, headings=headings)]


def document_sections(doc: SourceDocument) -> list[Section]:
    """The sections a loader found, or those of a Markdown or text body; form feeds in a body
    number its pages from the document's `page` (else 1)."""
    if doc.sections is not None:
        return doc.sections
    first = (doc.page or 1) if "\f" in doc.text else doc.page
    return markdown_sections(doc.text, headings=doc.fmt == "markdown", first_page=first)


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


def split_paged_text(
    text: str, page: int | None = None, max_chars: int = MAX_CHARS, min_chars: int = MIN_CHARS
) -> list[tuple[str, int | None]]:
    """Packs paragraphs (then sentences) into chunks of at most max_chars, each with the page of
    its text: `page` is where `text` starts, and every form feed in it turns a page. A chunk ends
    at a page boundary, so a citation of it names the page its every sentence is printed on (a
    sentence across a page turn is cut there)."""
    pieces: list[tuple[str, str, int | None]] = []  # (text, separator before it, page)
    for paragraph in re.split(r"\n[ \t]*\n", text):
        first = True
        for i, part in enumerate(paragraph.split("\f")):
            if i and page is not None:
                page += 1
            part = part.strip()
            if not part:
                continue
            for j, piece in enumerate(_split_long(part, max_chars)):
                pieces.append((piece, "\n\n" if first and j == 0 else " ", page))
            first = False
    chunks: list[tuple[str, int | None]] = []
    cur = ""
    cur_page: int | None = None
    for piece, sep, piece_page in pieces:
        if not cur:
            cur, cur_page = piece, piece_page
        elif piece_page == cur_page and len(cur) + len(sep) + len(piece) <= max_chars:
            cur = cur + sep + piece
        else:
            chunks.append((cur, cur_page))
            cur, cur_page = piece, piece_page
    if cur:
        if (
            chunks
            and len(cur) < min_chars
            and chunks[-1][1] == cur_page
            and len(chunks[-1][0]) + 2 + len(cur) <= max_chars + min_chars
        ):
            chunks[-1] = (chunks[-1][0] + "\n\n" + cur, chunks[-1][1])
        else:
            chunks.append((cur, cur_page))
    return chunks


def split_text(text: str, max_chars: int = MAX_CHARS, min_chars: int = MIN_CHARS) -> list[str]:
    """Packs paragraphs (then sentences) into chunks of at most max_chars."""
    return [c for c, _ in split_paged_text(text, None, max_chars, min_chars)]


def chunk_document(doc: SourceDocument, max_chars: int = MAX_CHARS) -> list[ChunkRecord]:
    """Heading-aware chunks: section = heading path ("Pricing > Pro plan"), page = the page the
    chunk's text is printed on (None where the file has no pages)."""
    chunks: list[ChunkRecord] = []
    for sec in document_sections(doc):
        section = " > ".join(sec.path) or None
        for piece, page in split_paged_text(sec.text, sec.page, max_chars):
            chunks.append(ChunkRecord(piece, len(chunks), section, page))
    return chunks


def content_hash(doc: SourceDocument) -> str:
    """What decides "unchanged": text, sections, every metadata field and the chunker version."""
    payload: dict[str, Any] = {
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
    if doc.sections is not None:  # a Markdown document's sections are its text
        payload["sections"] = [[list(s.path), s.page, s.text] for s in doc.sections]
    data = json.dumps(payload, sort_keys=True, default=str, ensure_ascii=False)
    return hashlib.sha256(data.encode("utf-8")).hexdigest()


def refuse_unstorable(doc: SourceDocument) -> None:
    """IngestError, before anything is embedded, for text PostgreSQL cannot store: a NUL
    character, or a lone surrogate (an unpaired escape in JSON Lines)."""
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


def resolve_access(declared: Access | None, given: Access | None) -> tuple[str, ...] | None:
    """Who may read a document: what it declares, else what the ingest was given (--access),
    else GROUNDED_AGENT_DEFAULT_ACCESS (public unless set); None: everyone."""
    chosen = declared if declared is not None else given
    if chosen is None:
        chosen = default_access()
    return None if chosen == "public" else tuple(chosen)


def default_access() -> Access:
    """GROUNDED_AGENT_DEFAULT_ACCESS: what a document that declares nothing gets (public,
    private, or groups); ValueError naming the setting when it is malformed."""
    raw = os.environ.get(DEFAULT_ACCESS_ENV, "").strip()
    if not raw:
        return "public"
    try:
        return parse_access(raw, DEFAULT_ACCESS_ENV)
    except IngestError as exc:
        raise ValueError(str(exc)) from None


DEFAULT_ACCESS_ENV = "GROUNDED_AGENT_DEFAULT_ACCESS"


def to_record(doc: SourceDocument, access: Access | None = None) -> DocumentRecord:
    """The record of a document read (its text and metadata cleaned by the loader): screened,
    then stored without the prompt elements the screening found (`drop_prompt_elements`).
    `access`: who may read it where the document declares nothing (`resolve_access`)."""
    refuse_unstorable(doc)
    reasons = screen(doc)
    if reasons:
        doc = _without_prompt_elements(doc)
    chunks = chunk_document(doc)
    if not chunks:
        raise IngestError("empty document: no text")
    where: dict[str, Any] = {"source_file": doc.origin, "format": doc.fmt}
    if doc.source_path:
        where["source_path"] = doc.source_path
    if reasons:  # stored with every chunk: the read path leaves them out by the run's setting
        where["flagged"] = reasons
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
        access=resolve_access(doc.access, access),
        extra={**doc.extra, **where},
    )


def _without_prompt_elements(doc: SourceDocument) -> SourceDocument:
    """`doc` with prompt elements, and the text planted inside them, dropped from its text."""
    if doc.sections is None:
        return dataclasses.replace(doc, text=drop_prompt_elements(doc.text))
    sections = [dataclasses.replace(s, text=drop_prompt_elements(s.text)) for s in doc.sections]
    return dataclasses.replace(doc, sections=[s for s in sections if s.text.strip()])


# --- the pipeline -------------------------------------------------------------------------------


def _progress_bar(total: int, enabled: bool) -> Any:
    from tqdm import tqdm

    show = enabled and sys.stderr.isatty()
    return tqdm(total=total, unit="chunk", desc="embedding", file=sys.stderr, disable=not show)


Read = tuple[str, str | None, DocumentRecord]
"""(origin, absolute path of its file, record) of one document read."""


def _read_files(
    roots: list[Path], report: IngestReport, access: Access | None
) -> tuple[list[Read], set[str], list[str]]:
    """Reads every file (errors go to `report`): the documents read, the files read with an error
    (--sync keeps their documents), and the directories among `roots` as path prefixes."""
    records: list[Read] = []
    failed_files: set[str] = set()
    for path, problem in iter_files(roots):
        if problem is not None:
            report.errors.append(FileError(file=str(path), reason=problem))
            continue
        report.files += 1
        try:
            docs, line_errors = load_file(path)
        except IngestError as exc:
            report.errors.append(FileError(file=str(path), reason=str(exc)))
            failed_files.add(os.path.abspath(path))
            continue
        except Exception as exc:  # a parser's own failure on one file must not stop the others
            log.warning("could not read %s", path, exc_info=True)
            first = (str(exc).strip().splitlines() or [""])[0][:160]
            report.errors.append(
                FileError(file=str(path), reason=f"could not read: {type(exc).__name__}: {first}")
            )
            failed_files.add(os.path.abspath(path))
            continue
        if line_errors:
            report.errors.extend(line_errors)
            failed_files.add(os.path.abspath(path))
        for doc in docs:
            try:
                record = to_record(doc, access)
            except IngestError as exc:
                report.errors.append(FileError(file=doc.origin, reason=str(exc)))
                failed_files.add(doc.source_path or os.path.abspath(path))
                continue
            records.append((doc.origin, doc.source_path, record))
            report.warnings.extend(FileError(file=doc.origin, reason=n) for n in doc.notes)
            if record.extra.get("flagged"):
                report.flagged.append(FlaggedDocument(
                    doc_id=record.doc_id, file=doc.origin, reasons=record.extra["flagged"]))
    report.documents = len(records)
    dirs = [os.path.join(os.path.abspath(r), "") for r in roots if r.is_dir()]
    return records, failed_files, dirs


async def aingest_paths(
    paths: Sequence[Path],
    store: KnowledgeStore,
    *,
    progress: bool = False,
    sync: bool = False,
    access: Access | None = None,
) -> IngestReport:
    """Ingests files and directories into `store`; see `ingest_paths`. One ingestion per
    knowledge base at a time: a second one waits, then skips what the first wrote instead of
    embedding it again."""
    async with store.aingest_lock():
        return await _aingest(paths, store, progress=progress, sync=sync, access=access)


async def _aingest(
    paths: Sequence[Path],
    store: KnowledgeStore,
    *,
    progress: bool,
    sync: bool,
    access: Access | None,
) -> IngestReport:
    started = time.perf_counter()
    report = IngestReport()
    roots = [Path(p) for p in paths]
    default_access()  # a malformed setting stops the ingest before anything is read
    # reading and parsing (PDFs especially) is blocking work: off the event loop
    records, failed_files, sync_dirs = await asyncio.to_thread(_read_files, roots, report, access)

    if records or sync:  # table creation (first run) may load the model: timed in neither bucket
        await store.aensure_schema()
    t0 = time.perf_counter()
    known: dict[tuple[str, str | None], KnownVersion] = {}
    ids = sorted({r.doc_id for _, _, r in records})
    for i in range(0, len(ids), 1000):
        known.update(await store.aknown_versions(ids[i : i + 1000]))
    report.database_seconds += time.perf_counter() - t0
    pending: list[Read] = []
    touch: list[Read] = []
    regroup: list[DocumentRecord] = []
    for origin, source, rec in records:
        stored = known.get((rec.doc_id, rec.version))
        if stored is not None and stored.content_hash == rec.content_hash:
            report.skipped += 1
            if stored.removed or (source is not None and stored.source_path != source):
                touch.append((origin, source, rec))
            if stored.access != rec.access:  # who may read it changed, its text did not
                regroup.append(rec)
        else:
            pending.append((origin, source, rec))
    t0 = time.perf_counter()
    for _, source, rec in touch:  # unchanged, but moved or removed earlier: no embedding needed
        report.restored += await store.atouch_version(rec.doc_id, rec.version, source)
    for rec in regroup:  # the same text with another access list: changed in place
        await store.aset_access(rec.doc_id, rec.access, [rec.version])
        report.access_changed += 1
    report.database_seconds += time.perf_counter() - t0

    batch = max(1, store.settings.embed_batch_size)
    if pending:  # load the model here, so its start-up counts as embedding time
        t0 = time.perf_counter()
        await asyncio.to_thread(store.embeddings.embed_query, "warm-up")
        report.embedding_seconds += time.perf_counter() - t0
    bar = _progress_bar(sum(len(r.chunks) for _, _, r in pending), progress)
    try:
        for w in range(0, len(pending), WINDOW_DOCS):
            window = pending[w : w + WINDOW_DOCS]
            texts = [
                passage_text(r.title, c.section, c.content) for _, _, r in window for c in r.chunks
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
            for origin, source, rec in window:
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
                    if source is not None:
                        failed_files.add(source)
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
    if sync:
        t0 = time.perf_counter()
        seen = {(r.doc_id, r.version) for _, _, r in records}
        for prefix in sync_dirs:
            report.removed += await _sync_directory(store, prefix, seen, failed_files)
        report.database_seconds += time.perf_counter() - t0
    report.elapsed_seconds = time.perf_counter() - started
    log.info(
        "ingested %d documents (%d added, %d replaced, %d skipped, %d removed, %d chunks, "
        "%d errors, %d flagged) in %.1fs",
        report.documents,
        report.added,
        report.replaced,
        report.skipped,
        report.removed,
        report.chunks,
        len(report.errors),
        len(report.flagged),
        report.elapsed_seconds,
    )
    return report


async def _sync_directory(
    store: KnowledgeStore,
    prefix: str,
    seen: set[tuple[str, str | None]],
    failed_files: set[str],
) -> int:
    """Removes the versions ingested earlier from files under the directory `prefix` that this
    run did not read (their file is gone, or no longer holds that document version); a file that
    failed to read this time keeps its documents. The number of versions removed."""
    gone: dict[str, list[str | None]] = {}
    for doc_id, version, source in await store.aversions_under(prefix):
        if (doc_id, version) not in seen and source not in failed_files:
            gone.setdefault(doc_id, []).append(version)
    removed = 0
    for doc_id, versions in sorted(gone.items()):
        result = await store.aremove_versions(doc_id, versions)
        removed += result.versions if result is not None else 0
        log.info("sync %s: removed %s versions %s (file gone)", prefix, doc_id, versions)
    return removed


def ingest_paths(
    paths: Sequence[Path],
    store: KnowledgeStore,
    *,
    progress: bool = False,
    sync: bool = False,
    access: Access | None = None,
) -> IngestReport:
    """Ingests files and directories into the store: Markdown and text (.md, .markdown, .txt),
    JSON Lines (.jsonl), PDF (.pdf), Word (.docx) and HTML (.html, .htm).

    A bad file lands in `errors` and the others are still ingested; a database that cannot be
    reached raises StoreUnavailable (nothing was reported as done that was not). With `sync`,
    document versions ingested earlier from files under a directory in `paths` that this run did
    not read (the file was deleted, or its version changed) are removed: no longer searched.
    `access` ("public", or groups; empty: private): who may read the documents that declare no
    `access` of their own (default: GROUNDED_AGENT_DEFAULT_ACCESS, else public). An unchanged
    document whose access changed is changed in place, without embedding it again.
    """
    return store.run_sync(
        aingest_paths(paths, store, progress=progress, sync=sync, access=access)
    )


__all__ = [
    "CHUNKER_VERSION",
    "MAX_CHARS",
    "MIN_CHARS",
    "SUFFIXES",
    "FileError",
    "IngestError",
    "IngestReport",
    "Section",
    "SourceDocument",
    "aingest_paths",
    "chunk_document",
    "content_hash",
    "document_from_meta",
    "document_sections",
    "ingest_paths",
    "iter_files",
    "load_file",
    "markdown_sections",
    "parse_access",
    "parse_bool",
    "parse_date",
    "parse_front_matter",
    "split_paged_text",
    "split_sections",
    "split_text",
    "to_record",
]
