"""Loaders: one module per file format, each yielding `SourceDocument`s of sections and pages.

| suffix | loader | sections | pages |
|---|---|---|---|
| .md .markdown .txt | `markdown` | `#` headings (Markdown) | form feeds |
| .jsonl | `jsonl` | none | a record's `page` |
| .pdf | `pdf` (pypdf) | headings by font size | the PDF's pages |
| .docx | `word` (python-docx) | heading styles | none (a .docx has no fixed pages) |
| .html .htm | `webpage` (Beautiful Soup) | `<h1>`-`<h6>` | none |

Metadata comes from the file (front matter, PDF information, DOCX core properties, HTML `<title>`
and `<meta>`) and a sidecar `NAME.EXT.meta.yaml` overrides it, key by key.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from grounded_agent.loaders.base import (
    FOLLOW_LINKS_ENV,
    SIDECAR_SUFFIX,
    FileError,
    IngestError,
    Section,
    SourceDocument,
    follow_links_setting,
    read_sidecar,
)

Loader = Callable[[Path, bytes, dict[str, Any]], "list[SourceDocument] | tuple[list[SourceDocument], list[FileError]]"]


def _markdown(path: Path, raw: bytes, sidecar: dict[str, Any]) -> list[SourceDocument]:
    from grounded_agent.loaders.markdown import load_markdown

    return load_markdown(path, raw, sidecar)


def _jsonl(
    path: Path, raw: bytes, sidecar: dict[str, Any]
) -> tuple[list[SourceDocument], list[FileError]]:
    from grounded_agent.loaders.jsonl import load_jsonl

    return load_jsonl(path, raw, sidecar)


def _pdf(path: Path, raw: bytes, sidecar: dict[str, Any]) -> list[SourceDocument]:
    from grounded_agent.loaders.pdf import load_pdf

    return load_pdf(path, raw, sidecar)


def _docx(path: Path, raw: bytes, sidecar: dict[str, Any]) -> list[SourceDocument]:
    from grounded_agent.loaders.word import load_docx

    return load_docx(path, raw, sidecar)


def _html(path: Path, raw: bytes, sidecar: dict[str, Any]) -> list[SourceDocument]:
    from grounded_agent.loaders.webpage import load_html

    return load_html(path, raw, sidecar)


LOADERS: dict[str, Loader] = {
    ".md": _markdown,
    ".markdown": _markdown,
    ".txt": _markdown,
    ".jsonl": _jsonl,
    ".pdf": _pdf,
    ".docx": _docx,
    ".html": _html,
    ".htm": _html,
}
"""Suffix -> loader; each imports its library on first use."""

SUFFIXES = frozenset(LOADERS)


MAX_FILE_BYTES = 256 * 1024 * 1024
"""The largest file read: a bound on memory, far above any document."""


def _special(mode: int) -> str | None:
    """What a file that is not a regular file is, or None."""
    if stat.S_ISREG(mode):
        return None
    kinds = {stat.S_ISFIFO: "a FIFO (named pipe)", stat.S_ISSOCK: "a socket",
             stat.S_ISCHR: "a character device", stat.S_ISBLK: "a block device",
             stat.S_ISDIR: "a directory"}
    kind = next((name for test, name in kinds.items() if test(mode)), "not a regular file")
    return f"{kind}, not a regular file: skipped"


def read_regular(path: Path, limit: int = MAX_FILE_BYTES) -> bytes:
    """The bytes of a regular file; IngestError for a FIFO, device or socket (opened without
    blocking, so a FIFO nobody writes cannot stall the ingest), a file past `limit`, or one that
    cannot be read."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise IngestError(f"unreadable: {exc.strerror or type(exc).__name__}") from None
    try:
        info = os.fstat(fd)
        problem = _special(info.st_mode)
        if problem is not None:
            raise IngestError(problem)
        if info.st_size > limit:
            raise IngestError(f"larger than {limit // (1024 * 1024)} MB: skipped")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        with os.fdopen(fd, "rb", closefd=False) as f:
            return f.read(limit + 1)
    except OSError as exc:
        raise IngestError(f"unreadable: {exc.strerror or type(exc).__name__}") from None
    finally:
        os.close(fd)


def load_file(path: Path) -> tuple[list[SourceDocument], list[FileError]]:
    """Documents of one file, and errors of single records in it (JSON Lines); raises
    IngestError with the reason when the whole file is unusable."""
    loader = LOADERS.get(path.suffix.lower())
    if loader is None:
        raise IngestError(f"unsupported file type {path.suffix or '(none)'}")
    raw = read_regular(path)
    if not raw:
        raise IngestError("empty file (0 bytes)")
    sidecar = read_sidecar(path)
    loaded = loader(path, raw, sidecar)
    docs, errors = loaded if isinstance(loaded, tuple) else (loaded, [])
    source_path = os.path.abspath(path)
    for doc in docs:
        doc.source_path = source_path
    return docs, errors


def _supported() -> str:
    names = sorted(SUFFIXES)
    return ", ".join(names[:-1]) + " or " + names[-1]


def _in_folder(child: Path, root: Path, follow_links: bool) -> str | None:
    """Why a file found in the folder `root` is not read (None: it is): a special file, or a
    symbolic link that leads out of the folder (unless `follow_links`), dangles or loops."""
    try:
        info = child.lstat()
    except OSError as exc:
        return f"unreadable: {exc.strerror or type(exc).__name__}"
    if stat.S_ISLNK(info.st_mode):
        try:
            target = child.resolve(strict=True)
            info = target.stat()
        except (OSError, RuntimeError):
            return "a symbolic link to nothing (or a loop): skipped"
        if not follow_links and not target.is_relative_to(root.resolve()):
            return (f"a symbolic link to a file outside {root}: not followed (set "
                    f"{FOLLOW_LINKS_ENV}=1 to follow it)")
    return _special(info.st_mode)


def iter_files(
    paths: Sequence[Path], *, follow_links: bool | None = None
) -> Iterator[tuple[Path, str | None]]:
    """Files to ingest (directories recurse into known suffixes, without entering linked
    folders), or (path, reason) to report: special files are skipped, and so are symbolic links
    out of the folder unless `follow_links` (default: GROUNDED_AGENT_FOLLOW_SYMLINKS=1). A file
    named on its own is read wherever its link leads, if it is a regular file."""
    if follow_links is None:
        follow_links = follow_links_setting()
    for p in paths:
        if p.is_dir():
            found: list[Path] = []
            for top, _dirs, names in os.walk(p, followlinks=False):
                found.extend(Path(top, n) for n in names)
            for child in sorted(found):
                if child.suffix.lower() in SUFFIXES and not child.name.lower().endswith(
                    SIDECAR_SUFFIX
                ):
                    yield child, _in_folder(child, p, follow_links)
        elif p.name.lower().endswith(SIDECAR_SUFFIX):
            yield p, "a metadata sidecar: ingest the document beside it"
        elif p.suffix.lower() not in SUFFIXES:
            yield p, f"unsupported file type {p.suffix or '(none)'}: use {_supported()}"
        elif not p.exists() and not p.is_symlink():
            yield p, "no such file"
        else:
            try:
                yield p, _special(p.stat().st_mode)
            except OSError as exc:
                yield p, f"unreadable: {exc.strerror or type(exc).__name__}"


__all__ = [
    "LOADERS",
    "MAX_FILE_BYTES",
    "SIDECAR_SUFFIX",
    "SUFFIXES",
    "FileError",
    "IngestError",
    "Section",
    "SourceDocument",
    "iter_files",
    "load_file",
    "read_regular",
]
