"""The sources block every prompt shows the model, built in one place and escaped.

Titles, sections, dates and passage text come from documents and web pages: none of them may
close the block or open a tag of its own. Attributes are escaped with quotes (`"` cannot end
an attribute, `>` cannot end a tag) and text is escaped so `</source>` or `<system>` in a
passage stays text. A model reads `&lt;` as `<`; the citation check unescapes what it copies.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence

from grounded_agent.schemas import Finding


def escape_attribute(value: object) -> str:
    """A value safe inside a double-quoted attribute (newlines folded to spaces)."""
    return html.escape(" ".join(str(value).split()), quote=True)


def escape_text(value: str) -> str:
    """Passage text safe between tags: `<`, `>` and `&` escaped, quotes left readable."""
    return html.escape(value, quote=False)


def render_sources(findings: Sequence[Finding]) -> str:
    """The numbered `<source>` elements of the answer prompt, one per finding, in order:
    `<source n="1" title="..." section="..." page="..." date="...">` (section, page and date
    where known)."""
    return "\n".join(
        _element(
            "source",
            [
                ("n", n),
                ("title", f.title),
                ("section", f.section or None),
                ("page", f.page),
                ("date", f.document_date or None),
            ],
            f.text,
        )
        for n, f in enumerate(findings, 1)
    )


def render_passages(findings: Iterable[Finding]) -> str:
    """The `<passage>` elements of a tool result (the evidence the confidence step judges)."""
    return "\n".join(
        _element(
            "passage",
            [
                ("source", f.source),
                ("id", f.source_id),
                ("title", f.title),
                ("relevance", f"{f.score:.2f}"),
            ],
            f.text,
        )
        for f in findings
    )


def _element(tag: str, attrs: Sequence[tuple[str, object]], body: str) -> str:
    shown = "".join(
        f' {name}="{escape_attribute(value)}"' for name, value in attrs if value is not None
    )
    return f"<{tag}{shown}>\n{escape_text(body)}\n</{tag}>"


def render_claims(claims: Sequence[tuple[str, Sequence[int]]]) -> str:
    """The numbered `<claim n="1" cites="2 3">` elements of the support judgement."""
    return "\n".join(
        _element("claim", [("n", n), ("cites", " ".join(str(c) for c in cites))], text)
        for n, (text, cites) in enumerate(claims, 1)
    )
