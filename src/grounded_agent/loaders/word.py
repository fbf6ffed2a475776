"""Word (.docx, python-docx, MIT): heading styles become the section path, tables become rows of
cells, list items keep a dash; the core properties give the title, date, language and author.

A .docx has no fixed pages (they depend on the printer and fonts), so its chunks carry none.
"""

from __future__ import annotations

import io
import re
import zipfile
from datetime import datetime
from pathlib import Path
from typing import Any

from grounded_agent.loaders.base import (
    IngestError,
    Section,
    SourceDocument,
    sectioned_document,
    table_text,
)

_OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
_HEADING_NAME = re.compile(r"^heading\s*(\d)$", re.IGNORECASE)
_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"


def load_docx(path: Path, raw: bytes, sidecar: dict[str, Any]) -> list[SourceDocument]:
    import docx

    if raw.startswith(_OLE_MAGIC):
        raise IngestError(
            "not a .docx but an OLE file: a password-protected document or an old .doc; "
            "save it as .docx without a password"
        )
    if not zipfile.is_zipfile(io.BytesIO(raw)):
        raise IngestError("corrupt Word file: not a ZIP package (is it a .docx?)")
    try:
        document = docx.Document(io.BytesIO(raw))
        sections = _sections(document)
    except Exception as exc:  # python-docx and lxml raise many types for damaged packages
        detail = " ".join(str(exc).split())[:160]
        raise IngestError(f"corrupt Word file: {type(exc).__name__}: {detail}") from None
    return sectioned_document(path, sections, _core_metadata(document), sidecar, "docx")


def _sections(document: Any) -> list[Section]:
    from docx.table import Table

    sections: list[Section] = []
    path: tuple[str, ...] = ()
    blocks: list[str] = []
    items: list[str] = []

    def end_list() -> None:
        if items:
            blocks.append("\n".join(items))
            items.clear()

    def end_section() -> None:
        end_list()
        text = "\n\n".join(blocks).strip()
        if text:
            sections.append(Section(path, text))
        blocks.clear()

    for block in document.iter_inner_content():
        if isinstance(block, Table):
            end_list()
            rendered = table_text(_table_rows(block))
            if rendered:
                blocks.append(rendered)
            continue
        text = " ".join(block.text.split())
        if not text:
            continue
        level = _heading_level(block)
        if level is not None:
            end_section()
            path = (*path[:level], text)
        elif _is_list_item(block):
            items.append(f"- {text}")
        else:
            end_list()
            blocks.append(text)
    end_section()
    return sections


def _heading_level(paragraph: Any) -> int | None:
    """0 for the Title style, N for Heading N (or an outline level), None for body text."""
    own = _outline_level(paragraph._p.pPr)
    if own is not None:
        return own + 1
    style = paragraph.style
    while style is not None:
        name = (style.name or "").strip()
        if name.lower() == "title":
            return 0
        m = _HEADING_NAME.match(name)
        if m:
            return int(m.group(1))
        level = _outline_level(style.element.pPr)
        if level is not None:
            return level + 1
        style = style.base_style
    return None


def _outline_level(ppr: Any) -> int | None:
    if ppr is None:
        return None
    el = ppr.find(f"{_W}outlineLvl")
    if el is None:
        return None
    try:
        level = int(el.get(f"{_W}val"))
    except (TypeError, ValueError):
        return None
    return level if 0 <= level < 9 else None  # 9 is "body text"


def _is_list_item(paragraph: Any) -> bool:
    ppr = paragraph._p.pPr
    if ppr is not None and ppr.find(f"{_W}numPr") is not None:
        return True
    name = (paragraph.style.name or "") if paragraph.style is not None else ""
    return name.lower().startswith("list")


def _table_rows(table: Any) -> list[list[str]]:
    rows = []
    for row in table.rows:
        cells: list[str] = []
        previous = None
        for cell in row.cells:
            if cell._tc is previous:  # a merged cell repeats itself across the columns it spans
                continue
            previous = cell._tc
            cells.append(" ".join(cell.text.split()))
        rows.append(cells)
    return rows


def _core_metadata(document: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {}
    try:
        core = document.core_properties
    except Exception:
        return meta
    for key, attr in (("title", "title"), ("version", "version"), ("author", "author")):
        try:
            value = " ".join(str(getattr(core, attr) or "").split())
        except Exception:
            value = ""
        if value:
            meta[key] = value
    for attr in ("modified", "created"):
        try:
            stamp = getattr(core, attr)
        except Exception:  # an unparseable date
            stamp = None
        if isinstance(stamp, datetime):
            meta["document_date"] = stamp.date()
            break
    try:
        language = (core.language or "").strip()
    except Exception:
        language = ""
    if re.match(r"^[A-Za-z]{2,3}\b", language):
        meta["language"] = re.split(r"[-_]", language)[0].lower()
    return meta
