"""PDF: the text layer (pypdf, BSD), one page number per paragraph, headings by font size.

Lines come from pypdf's text extraction with their position and font size; a larger gap than
the page's usual line spacing starts a paragraph, a line set clearly larger than the body text
is a heading (its size ranks its level), a running header or footer repeated on most pages and
bare page numbers are dropped, and a word hyphenated at a line end is joined again. Metadata:
the document information dictionary (title, modification or creation date, author) and the
catalogue's /Lang. An encrypted PDF opens when its user password is empty; a PDF without any
text is reported as "no text layer (scanned PDF?)", since there is nothing to index without OCR.
"""

from __future__ import annotations

import io
import itertools
import logging
import math
import re
import statistics
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from grounded_agent.loaders.base import (
    IngestError,
    Section,
    SourceDocument,
    sectioned_document,
)

log = logging.getLogger(__name__)

HEADING_RATIO = 1.15
"""A line at least this much larger than the body text is a heading."""
MAX_HEADING_CHARS = 120
PARAGRAPH_GAP = 1.4
"""A gap between lines this many times the page's usual line spacing starts a paragraph."""

_PAGE_NUMBER = re.compile(r"^\W*(page\s*)?\d{1,4}(\s*(of|/)\s*\d{1,4})?\W*$", re.IGNORECASE)
_SENTENCE_END = re.compile(r"[.!?:;…)\]\"”’]$")
_WORDISH = re.compile(r"[^\W\d_]")
_DOT_LEADER = re.compile(r"(\.\s?){4,}\s*\d*\s*$")
_BULLET = re.compile(r"^([•◦▪‣○●■□–\-*]|\(?\d{1,2}[.)]|\(?[a-z][.)])\s")
"""A layout line that opens a list item (PDF glyphs such as ◦ ■ □ too) keeps its own line.
Not sentences.BULLET, whose marks differ ("+", indented items, "100.")."""


@dataclass
class _Line:
    text: str
    y: float | None
    size: float | None


@dataclass
class _Builder:
    """Accumulates (heading path, paragraphs) across pages into sections."""

    sections: list[Section] = field(default_factory=list)
    path: tuple[str, ...] = ()
    paragraphs: list[str] = field(default_factory=list)
    start_page: int | None = None
    para: list[str] = field(default_factory=list)
    para_page: int | None = None
    page_of_last_text: int | None = None

    def add_line(self, text: str, page: int) -> None:
        if not self.para:
            self.para_page = page
            if self.paragraphs and self.page_of_last_text is not None:
                text = "\f" * (page - self.page_of_last_text) + text
        elif self.page_of_last_text is not None and page > self.page_of_last_text:
            text = "\f" * (page - self.page_of_last_text) + text  # a paragraph across pages
        if self.start_page is None:
            self.start_page = page
        self.para.append(text)
        self.page_of_last_text = page

    def end_paragraph(self) -> None:
        if self.para:
            self.paragraphs.append(_join_lines(self.para))
        self.para = []

    def heading(self, level: int, title: str) -> None:
        self.end_section()
        self.path = (*self.path[:level], title)

    def end_section(self) -> None:
        self.end_paragraph()
        text = "\n\n".join(self.paragraphs).strip()
        if text:
            self.sections.append(Section(self.path, text, self.start_page))
        self.paragraphs = []
        self.start_page = None


def load_pdf(path: Path, raw: bytes, sidecar: dict[str, Any]) -> list[SourceDocument]:
    from pypdf import PdfReader
    from pypdf.errors import DependencyError

    if b"%PDF-" not in raw[:1024]:
        raise IngestError("corrupt PDF: no PDF header (is it a PDF file?)")
    try:
        reader = PdfReader(io.BytesIO(raw))
        encrypted = reader.is_encrypted
    except Exception as exc:  # pypdf raises many types for damaged files
        raise IngestError(f"corrupt PDF: {_short(exc)}") from None
    if encrypted:
        try:
            opened = bool(reader.decrypt(""))
        except DependencyError:
            raise IngestError(
                "encrypted PDF: decrypting it needs the 'cryptography' package"
            ) from None
        except Exception:
            opened = False
        if not opened:
            raise IngestError(
                "encrypted PDF: it needs a password to open; ingest an unencrypted copy"
            )
    try:
        pages = [_page_lines(page) for page in reader.pages]
    except Exception as exc:
        raise IngestError(f"corrupt PDF: {_short(exc)}") from None
    if not pages:
        raise IngestError("corrupt PDF: no pages")
    if not any(line.text.strip() for lines in pages for line in lines):
        which = "its page has no" if len(pages) == 1 else f"none of its {len(pages)} pages has"
        raise IngestError(
            f"no text layer (scanned PDF?): {which} text to index; run OCR on it first"
        )
    sections = sections_from_lines(pages)
    return sectioned_document(path, sections, _file_metadata(reader), sidecar, "pdf")


def _short(exc: Exception) -> str:
    text = " ".join(str(exc).split())[:160]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _page_lines(page: Any) -> list[_Line]:
    """The page's text lines in reading order, each with its baseline height and font size."""
    lines: list[_Line] = []
    parts: list[str] = []
    y: float | None = None
    sizes: Counter[float] = Counter()

    def end_line() -> None:
        nonlocal y
        text = " ".join("".join(parts).split())
        if text:
            size = sizes.most_common(1)[0][0] if sizes else None
            lines.append(_Line(text, y, size))
        parts.clear()
        sizes.clear()
        y = None

    def visit(text: str, cm: Any, tm: Any, font: Any, font_size: Any) -> None:
        nonlocal y
        for i, piece in enumerate(text.split("\n")):
            if i:
                end_line()
            if not piece:
                continue
            if piece.strip():
                try:
                    # the text rendering matrix: text matrix times the current transformation
                    b = tm[0] * cm[1] + tm[1] * cm[3]
                    d = tm[2] * cm[1] + tm[3] * cm[3]
                    ty = tm[4] * cm[1] + tm[5] * cm[3] + cm[5]
                    scale = math.hypot(tm[2] * cm[0] + tm[3] * cm[2], d) or math.hypot(b, d)
                    size = round(float(font_size) * scale * 2) / 2
                except (TypeError, IndexError, ValueError):
                    ty, size = None, None
                if y is None and ty is not None:
                    y = float(ty)
                if size:
                    sizes[size] += len(piece.strip())
            parts.append(piece)

    page.extract_text(visitor_text=visit)
    end_line()
    return lines


def sections_from_lines(pages: list[list[_Line]]) -> list[Section]:
    """Sections (heading path, paragraphs, first page) from the lines of each page."""
    pages = _drop_running_lines(pages)
    sized: Counter[float] = Counter()
    for lines in pages:
        for line in lines:
            if line.size:
                sized[line.size] += len(line.text)
    body = sized.most_common(1)[0][0] if sized else None
    heading_sizes = sorted(
        {line.size for lines in pages for line in lines if line.size and _is_heading(line, body)},
        reverse=True,
    )[:4]
    level_of = {size: i for i, size in enumerate(heading_sizes)}

    b = _Builder()
    for page_no, lines in enumerate(pages, start=1):
        spacing = _line_spacing(lines, body)
        prev: _Line | None = None
        pending_heading: tuple[float, list[str]] | None = None
        for line in lines:
            size = line.size
            if size is not None and size in level_of and _is_heading(line, body):
                if pending_heading and pending_heading[0] == size and prev is not None and (
                    _gap(prev, line) is not None and _gap(prev, line) <= size * 1.6  # type: ignore[operator]
                ):
                    pending_heading[1].append(line.text)  # a heading set on two lines
                else:
                    if pending_heading:
                        b.heading(level_of[pending_heading[0]], " ".join(pending_heading[1]))
                    b.end_paragraph()
                    pending_heading = (size, [line.text])
                prev = line
                continue
            if pending_heading:
                b.heading(level_of[pending_heading[0]], " ".join(pending_heading[1]))
                pending_heading = None
                prev = None
            if prev is None:
                if b.para and not _continues(b.para[-1], line.text):
                    b.end_paragraph()
            else:
                gap = _gap(prev, line)
                if gap is None or gap < -1 or (spacing and gap > spacing * PARAGRAPH_GAP + 0.5):
                    b.end_paragraph()
            b.add_line(line.text, page_no)
            prev = line
        if pending_heading:
            b.heading(level_of[pending_heading[0]], " ".join(pending_heading[1]))
    b.end_section()
    return b.sections


def _is_heading(line: _Line, body: float | None) -> bool:
    return (
        body is not None
        and line.size is not None
        and line.size >= body * HEADING_RATIO
        and len(line.text) <= MAX_HEADING_CHARS
        and _WORDISH.search(line.text) is not None
        and _DOT_LEADER.search(line.text) is None  # a table of contents entry
    )


def _gap(prev: _Line, line: _Line) -> float | None:
    """How far down the page `line` sits below `prev` (negative: it moved up, a new column)."""
    if prev.y is None or line.y is None:
        return None
    return prev.y - line.y


def _line_spacing(lines: list[_Line], body: float | None) -> float | None:
    """The usual distance between two consecutive body lines of a page."""
    gaps = [
        a.y - c.y
        for a, c in itertools.pairwise(lines)
        if a.y is not None and c.y is not None and a.y > c.y and a.size == c.size == body
    ]
    if not gaps:
        return (body * 1.2) if body else None
    usual = min(statistics.median(gaps), sorted(gaps)[len(gaps) // 4] * 1.2)
    return min(usual, body * 1.5) if body else usual  # one-line paragraphs: gaps are breaks


def _continues(previous: str, following: str) -> bool:
    """Whether text at the top of a page goes on with the paragraph the last page ended."""
    return not _SENTENCE_END.search(previous.rstrip()) or following[:1].islower()


def _join_lines(lines: list[str]) -> str:
    out = ""
    for line in lines:
        if not out:
            out = line
            continue
        head = line.lstrip("\f")
        feeds = line[: len(line) - len(head)]
        if len(out) > 1 and out[-1] == "-" and out[-2].isalpha() and head[:1].islower():
            out = out[:-1] + feeds + head  # "configu-" + "ration"
        elif _BULLET.match(head):
            out = f"{out}\n{feeds}{head}"  # list items keep a line each
        else:
            out = f"{out} {feeds}{head}" if not feeds else f"{out}{feeds}{head}"
    return out


def _normalise(text: str) -> str:
    return re.sub(r"\d+", "#", text.lower()).strip()


def _drop_running_lines(pages: list[list[_Line]]) -> list[list[_Line]]:
    """Removes bare page numbers at a page's top or bottom, and a running header or footer: the
    same first or last line (digits aside) on most pages of a document of three or more."""
    running: set[str] = set()
    if len(pages) >= 3:
        for pick in (0, -1):
            counts = Counter(_normalise(lines[pick].text) for lines in pages if lines)
            running.update(t for t, n in counts.items() if n >= max(3, 0.6 * len(pages)))
    out = []
    for lines in pages:
        kept = list(lines)
        for pick in (0, -1, 0, -1):  # a number below a footer, a header above a number
            if kept and (
                _PAGE_NUMBER.match(kept[pick].text) or _normalise(kept[pick].text) in running
            ):
                kept.pop(pick)
        out.append(kept)
    return out


def _file_metadata(reader: Any) -> dict[str, Any]:
    """Title, date, language and author from the PDF itself; a damaged field is left out."""
    meta: dict[str, Any] = {}
    try:
        info = reader.metadata
    except Exception:
        info = None
    if info is not None:
        title = _text(info, "title")
        if title:
            meta["title"] = re.sub(r"^Microsoft (Word|PowerPoint) - ", "", title)
        for attr in ("modification_date", "creation_date"):
            try:
                value = getattr(info, attr)
            except Exception:  # an unparseable date string
                value = None
            if isinstance(value, datetime):
                meta["document_date"] = value.date()
                break
        author = _text(info, "author")
        if author:
            meta["author"] = author
    try:
        lang = reader.trailer["/Root"].get("/Lang")
    except Exception:
        lang = None
    if isinstance(lang, str) and re.match(r"^[A-Za-z]{2,3}\b", lang.strip()):
        meta["language"] = re.split(r"[-_]", lang.strip())[0].lower()
    return meta


def _text(info: Any, attr: str) -> str | None:
    try:
        value = getattr(info, attr)
    except Exception:
        return None
    if not isinstance(value, str):
        return None
    value = " ".join(value.replace("\x00", "").split())
    return value or None
