"""HTML (.html, .htm; Beautiful Soup, MIT, over lxml): the title from `<title>`, `<h1>`-`<h6>` as
the section path, the page's `<main>` (or `<body>`) without scripts, styles, navigation, forms
and page chrome (a site header, footer or sidebar outside the article). The `lang` attribute, a
canonical link and a publication or modification date in `<meta>` are read where present.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from grounded_agent.loaders.base import (
    IngestError,
    Section,
    SourceDocument,
    parse_date,
    sectioned_document,
    table_text,
)

_DROP = (
    "script", "style", "noscript", "template", "svg", "canvas", "iframe", "object", "embed",
    "nav", "form", "button", "select", "input", "textarea", "head", "menu",
)
_CHROME = ("header", "footer", "aside")
_CHROME_ROLES = {"navigation", "banner", "contentinfo", "search", "complementary", "menu"}
_BLOCK = {
    "p", "div", "section", "article", "main", "blockquote", "ul", "ol", "dl", "dt", "dd",
    "table", "thead", "tbody", "tfoot", "figure", "figcaption", "address", "hr", "header",
    "footer", "aside", "details", "summary", "fieldset", "center", "body", "html",
}
_BR = "\u2028"
"""A <br> inside a paragraph (a source's own newlines are just spaces)."""
_HEADINGS = {f"h{i}": i for i in range(1, 7)}
_DATE_META = (
    "article:modified_time", "og:updated_time", "dcterms.modified", "last-modified",
    "article:published_time", "dcterms.date", "dc.date", "date", "pubdate", "publish_date",
)


def load_html(path: Path, raw: bytes, sidecar: dict[str, Any]) -> list[SourceDocument]:
    from bs4 import BeautifulSoup

    if b"\x00" in raw[:4096] and not raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise IngestError("corrupt HTML: binary data, not text")
    try:
        soup: Any = BeautifulSoup(raw, "lxml")
    except Exception as exc:
        raise IngestError(f"unreadable HTML: {type(exc).__name__}") from None
    file_meta = _page_metadata(soup)
    root: Any = soup.find("main") or soup.find(attrs={"role": "main"}) or soup.body or soup
    for tag in root.find_all(_DROP):
        tag.decompose()
    for tag in root.find_all(attrs={"role": True}):
        if not tag.decomposed and str(tag.get("role", "")).lower() in _CHROME_ROLES:
            tag.decompose()
    for tag in root.find_all(_CHROME):
        if not tag.decomposed and tag.find_parent(("article", "main", "section")) is None:
            tag.decompose()
    for tag in root.find_all(attrs={"hidden": True}):
        if not tag.decomposed:
            tag.decompose()
    sections = _Walker().run(root)
    return sectioned_document(path, sections, file_meta, sidecar, "html")


class _Walker:
    """Block elements end paragraphs; headings open sections; rows become "a | b" lines."""

    def __init__(self) -> None:
        self.sections: list[Section] = []
        self.path: tuple[str, ...] = ()
        self.levels: tuple[int, ...] = ()
        self.paragraphs: list[str] = []
        self.inline: list[str] = []

    def run(self, root: Any) -> list[Section]:
        self.visit(root)
        self.end_section()
        return self.sections

    def end_paragraph(self) -> None:
        lines = [" ".join(x.split()) for x in "".join(self.inline).split(_BR)]
        text = "\n".join(x for x in lines if x)
        if text:
            self.paragraphs.append(text)
        self.inline = []

    def end_section(self) -> None:
        self.end_paragraph()
        text = "\n\n".join(self.paragraphs).strip()
        if text:
            self.sections.append(Section(self.path, text))
        self.paragraphs = []

    def heading(self, level: int, title: str) -> None:
        self.end_section()
        keep = 0
        while keep < len(self.levels) and self.levels[keep] < level:
            keep += 1
        self.path = (*self.path[:keep], title)
        self.levels = (*self.levels[:keep], level)

    def visit(self, node: Any) -> None:
        from bs4.element import (
            Comment,
            Declaration,
            Doctype,
            NavigableString,
            ProcessingInstruction,
            Tag,
        )

        for child in list(node.children):
            if isinstance(child, (Comment, Doctype, Declaration, ProcessingInstruction)):
                continue
            if isinstance(child, NavigableString):
                self.inline.append(str(child))
                continue
            if not isinstance(child, Tag):
                continue
            name = child.name.lower()
            if name in _HEADINGS:
                title = " ".join(child.get_text(" ").split())
                if title:
                    self.heading(_HEADINGS[name], title)
            elif name == "br":
                self.inline.append(_BR)
            elif name == "pre":
                self.end_paragraph()
                text = child.get_text().strip("\n")
                if text.strip():
                    self.paragraphs.append(re.sub(r"\n[ \t]*\n", "\n", text))
            elif name == "li":
                self.end_paragraph()
                self.inline.append("- ")
                self.visit(child)
                self.end_paragraph()
            elif name == "table":
                self.end_paragraph()
                rows = [
                    [c.get_text(" ") for c in tr.find_all(("td", "th"), recursive=False)]
                    for tr in child.find_all("tr")
                ]
                rendered = table_text(rows)
                if rendered:
                    self.paragraphs.append(rendered)
            elif name in _BLOCK or name == "p":
                self.end_paragraph()
                self.visit(child)
                self.end_paragraph()
            else:
                self.visit(child)


def _page_metadata(soup: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {}
    if soup.title is not None:
        title = " ".join(soup.title.get_text(" ").split())
        if title:
            meta["title"] = title
    html = soup.find("html")
    lang = str(html.get("lang") or "").strip() if html is not None else ""
    if re.match(r"^[A-Za-z]{2,3}\b", lang):
        meta["language"] = re.split(r"[-_]", lang)[0].lower()
    canonical = soup.find("link", rel="canonical")
    href = str(canonical.get("href") or "").strip() if canonical is not None else ""
    if href.startswith(("http://", "https://")):
        meta["source_url"] = href
    found: dict[str, str] = {}
    for tag in soup.find_all("meta"):
        key = str(tag.get("property") or tag.get("name") or tag.get("itemprop") or "").lower()
        content = str(tag.get("content") or "").strip()
        if key and content:
            found.setdefault(key, content)
    for key in _DATE_META:
        if key in found:
            try:
                meta["document_date"] = parse_date(found[key][:10])
                break
            except IngestError:
                continue
    return meta
