"""Small PDF and Word files built in code, for the tests and the sample knowledge base.

PDFs are written with pypdf alone (a runtime dependency): each page is a content stream that sets
lines of Helvetica at known positions and sizes, so a test knows exactly which text is on which
page, which lines are headings (larger type) and where paragraphs end (a wider gap). Output is
byte-for-byte reproducible. Word files use python-docx, with their ZIP entries' timestamps
fixed so they are reproducible too.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

Block = tuple[str, Any]
"""("title" | "h1" | "h2" | "p" | "li", text), ("table", rows), or ("gap", points)."""

_SIZES = {"title": 20.0, "h1": 15.0, "h2": 12.5, "p": 10.5, "li": 10.5, "footer": 8.0}
_LEADING = 1.35
_WIDTH = 612.0
_HEIGHT = 792.0
_MARGIN = 72.0


def _escape(text: str) -> bytes:
    raw = text.encode("cp1252")
    return raw.replace(b"\\", b"\\\\").replace(b"(", b"\\(").replace(b")", b"\\)")


def _wrap(text: str, size: float, width: float) -> list[str]:
    """Greedy word wrap with Helvetica's average character width (about half the type size)."""
    per_line = max(10, int(width / (size * 0.5)))
    lines: list[str] = []
    cur = ""
    for word in text.split():
        if cur and len(cur) + 1 + len(word) > per_line:
            lines.append(cur)
            cur = word
        else:
            cur = f"{cur} {word}" if cur else word
    if cur:
        lines.append(cur)
    return lines


def _page_stream(blocks: Sequence[Block], footer: str | None, image_only: bool) -> bytes:
    ops: list[bytes] = []
    if image_only:  # what a scan looks like to a text extractor: marks, no text
        ops.append(b"0.85 g 72 120 468 600 re f 0.2 g 90 600 300 12 re f 90 560 380 12 re f")
        return b"\n".join(ops)
    y = _HEIGHT - _MARGIN
    for kind, value in blocks:
        if kind == "gap":
            y -= float(value)
            continue
        if kind == "table":
            for row in value:
                line = "    ".join(str(c) for c in row)
                ops.append(b"BT /F1 10.5 Tf 72 %.1f Td (%s) Tj ET" % (y, _escape(line)))
                y -= 10.5 * _LEADING
            y -= 8
            continue
        size = _SIZES[kind]
        font = b"/F2" if kind in ("title", "h1", "h2") else b"/F1"
        indent = 84.0 if kind == "li" else 72.0
        text = f"\u2022 {value}" if kind == "li" else str(value)
        if kind in ("h1", "h2"):
            y -= size * 0.6
        for line in _wrap(text, size, _WIDTH - indent - _MARGIN):
            ops.append(
                b"BT %s %.1f Tf %.1f %.1f Td (%s) Tj ET" % (font, size, indent, y, _escape(line))
            )
            y -= size * _LEADING
        y -= size * (0.2 if kind in ("title", "h1", "h2", "li") else 0.8)
        if y < _MARGIN:
            raise ValueError("page overflows: move blocks to the next page")
    if footer:
        ops.append(b"BT /F1 8 Tf 72 40 Td (%s) Tj ET" % _escape(footer))
    return b"\n".join(ops)


def pdf_bytes(
    pages: Sequence[Sequence[Block]],
    *,
    info: dict[str, str] | None = None,
    lang: str | None = None,
    footer: str | None = None,
    image_only: bool = False,
    user_password: str | None = None,
    owner_password: str | None = None,
) -> bytes:
    """A PDF with one page per entry of `pages`. `footer` may hold {page} and {pages};
    `info` holds document information entries ("/Title", "/ModDate": "D:20261005120000Z")."""
    from pypdf import PdfWriter
    from pypdf.generic import DecodedStreamObject, DictionaryObject, NameObject, TextStringObject

    writer = PdfWriter()
    fonts = DictionaryObject()
    for name, base in (("/F1", "/Helvetica"), ("/F2", "/Helvetica-Bold")):
        font = DictionaryObject(
            {
                NameObject("/Type"): NameObject("/Font"),
                NameObject("/Subtype"): NameObject("/Type1"),
                NameObject("/BaseFont"): NameObject(base),
                NameObject("/Encoding"): NameObject("/WinAnsiEncoding"),
            }
        )
        fonts[NameObject(name)] = writer._add_object(font)
    for n, blocks in enumerate(pages, start=1):
        page = writer.add_blank_page(_WIDTH, _HEIGHT)
        page[NameObject("/Resources")] = DictionaryObject({NameObject("/Font"): fonts})
        stream = DecodedStreamObject()
        text = footer.format(page=n, pages=len(pages)) if footer else None
        stream.set_data(_page_stream(blocks, text, image_only))
        page[NameObject("/Contents")] = writer._add_object(stream)
    if info:
        writer.add_metadata(info)
    if lang:
        writer._root_object[NameObject("/Lang")] = TextStringObject(lang)
    if user_password is not None or owner_password is not None:
        writer.encrypt(
            user_password=user_password or "",
            owner_password=owner_password,
            algorithm="RC4-128",  # pypdf writes RC4 without the optional crypto package
        )
    buf = io.BytesIO()
    writer.write(buf)
    return buf.getvalue()


def docx_bytes(blocks: Sequence[Block], *, core: dict[str, Any] | None = None) -> bytes:
    """A Word file: "title" (Title style), "h1"/"h2"/"h3" (Heading N), "p", "li" (List Bullet),
    "table" (rows of cells); `core` sets core properties (title, version, language, created,
    modified, author...). Reproducible: ZIP timestamps are fixed."""
    import docx

    document = docx.Document()
    props = document.core_properties
    epoch = datetime(2026, 1, 1)
    props.author = ""
    props.comments = ""
    props.last_modified_by = ""
    props.created = epoch
    props.modified = epoch
    for key, value in (core or {}).items():
        setattr(props, key, value)
    for kind, value in blocks:
        if kind == "title":
            document.add_heading(str(value), 0)
        elif kind in ("h1", "h2", "h3"):
            document.add_heading(str(value), int(kind[1]))
        elif kind == "p":
            document.add_paragraph(str(value))
        elif kind == "li":
            document.add_paragraph(str(value), style="List Bullet")
        elif kind == "table":
            rows = list(value)
            table = document.add_table(rows=len(rows), cols=len(rows[0]))
            for r, row in enumerate(rows):
                for c, cell in enumerate(row):
                    table.cell(r, c).text = str(cell)
        else:
            raise ValueError(f"unknown block {kind!r}")
    buf = io.BytesIO()
    document.save(buf)
    return _fixed_zip(buf.getvalue())


def _fixed_zip(data: bytes) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as src, zipfile.ZipFile(out, "w") as dst:
        for item in src.infolist():
            fixed = zipfile.ZipInfo(item.filename, date_time=(2026, 1, 1, 0, 0, 0))
            fixed.compress_type = zipfile.ZIP_DEFLATED
            fixed.external_attr = 0o644 << 16
            dst.writestr(fixed, src.read(item.filename))
    return out.getvalue()


def write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path
