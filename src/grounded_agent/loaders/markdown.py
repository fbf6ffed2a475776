"""Markdown and plain text: optional YAML front matter, `#` headings as the section path, form
feeds as page breaks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from grounded_agent.loaders.base import (
    Format,
    IngestError,
    SourceDocument,
    document_from_meta,
    merge_meta,
    parse_front_matter,
)


def load_markdown(path: Path, raw: bytes, sidecar: dict[str, Any]) -> list[SourceDocument]:
    content = decode_utf8(raw)
    meta, body = parse_front_matter(content)
    fmt: Format = "text" if path.suffix.lower() == ".txt" else "markdown"
    return [
        document_from_meta(
            merge_meta(meta, sidecar), body, default_id=path.stem, origin=str(path), fmt=fmt
        )
    ]


def decode_utf8(raw: bytes) -> str:
    try:
        content = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise IngestError("not UTF-8 text") from None
    if not content.strip():
        raise IngestError("empty file")
    return content
