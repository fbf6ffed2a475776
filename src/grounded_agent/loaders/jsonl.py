"""JSON Lines: one document a line (`doc_id` or `id`, `title`, `text`, any metadata)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from grounded_agent.loaders.base import FileError, IngestError, SourceDocument, document_from_meta
from grounded_agent.loaders.markdown import decode_utf8


def load_jsonl(
    path: Path, raw: bytes, sidecar: dict[str, Any]
) -> tuple[list[SourceDocument], list[FileError]]:
    """Documents of the good lines, and one error per bad line (a sidecar does not apply: each
    record carries its own metadata)."""
    content = decode_utf8(raw)
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
            except RecursionError:  # the line's own fault: the other lines still go in
                raise IngestError("invalid JSON: nests too deep") from None
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
