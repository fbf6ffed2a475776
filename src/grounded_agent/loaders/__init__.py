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
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from grounded_agent.loaders.base import (
    SIDECAR_SUFFIX,
    FileError,
    IngestError,
    Section,
    SourceDocument,
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


def load_file(path: Path) -> tuple[list[SourceDocument], list[FileError]]:
    """Documents of one file, and errors of single records in it (JSON Lines); raises
    IngestError with the reason when the whole file is unusable."""
    loader = LOADERS.get(path.suffix.lower())
    if loader is None:
        raise IngestError(f"unsupported file type {path.suffix or '(none)'}")
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise IngestError(f"unreadable: {exc.strerror or type(exc).__name__}") from None
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


def iter_files(paths: Sequence[Path]) -> Iterator[tuple[Path, str | None]]:
    """Files to ingest (directories recurse into known suffixes), or (path, reason) to report."""
    for p in paths:
        if p.is_dir():
            for child in sorted(p.rglob("*")):
                if child.suffix.lower() in SUFFIXES and (child.is_file() or child.is_symlink()):
                    yield child, None
        elif p.name.lower().endswith(SIDECAR_SUFFIX):
            yield p, "a metadata sidecar: ingest the document beside it"
        elif p.suffix.lower() not in SUFFIXES:
            yield p, f"unsupported file type {p.suffix or '(none)'}: use {_supported()}"
        elif not p.exists() and not p.is_symlink():
            yield p, "no such file"
        else:
            yield p, None


__all__ = [
    "LOADERS",
    "SIDECAR_SUFFIX",
    "SUFFIXES",
    "FileError",
    "IngestError",
    "Section",
    "SourceDocument",
    "iter_files",
    "load_file",
]
