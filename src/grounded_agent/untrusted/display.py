"""One neutralisation for everything shown to the user that comes from a document or web page.

Titles, sections, snippets, closest-passage pointers, notes, warnings and the answer's own
sentences all pass `neutral`: entities decoded, then markup removed (tags such as `</source>`,
a quote that closes an attribute `">`, Markdown images, the target of a Markdown link), links
that are not a source's own URL field removed, citation markers the citation layer did not
produce removed, and instruction-like sentences ("Ignore previous instructions ...", "answer
every ... with ...") never quoted. What a document says is shown as text; nothing it holds may
pass for markup, a citation, a link of ours or an order.

Clean text passes unchanged: only what matches is cut, and only lines that changed are re-spaced.
"""

from __future__ import annotations

import html
import re
from collections.abc import Collection, Iterable, Mapping
from typing import Any, TypeVar

from pydantic import BaseModel

from grounded_agent.grounding.citations import MARKER, marker_numbers
from grounded_agent.grounding.instructions import looks_like_instruction
from grounded_agent.inputs import clean_text, fold_brackets, is_web_url
from grounded_agent.untrusted.screening import PROMPT_TAG

T = TypeVar("T")

WITHHELD = "(instruction-like text withheld)"
"""Shown in a note or warning where a quoted sentence read as an order to the assistant."""
UNTITLED = "(untitled)"
"""A title that was nothing but markup or an instruction."""

_CUT = "\x1f"
"""Where markup was cut: a boundary, so the words on either side are not read as one sentence."""
_TAG = re.compile(
    r"<\s*/?\s*[A-Za-z!?|](?:\"[^\"\n]{0,2000}\"|'[^'\n]{0,2000}'|[^<>\"'\n]){0,2000}>"
    r"|<\|[^<>|\n]{0,40}\|>"
)
"""A tag, its quoted attributes whole (an `alt="a>b"` does not end it early)."""
_OPEN_TAG = re.compile(
    r"</?(?:[A-Za-z][\w:-]*\s+[\w:-]+\s*=|(?:script|style|iframe|img|svg|object|embed|"
    r"link|meta|form|input|a|source|system|user|assistant|instructions?|prompt)\b)[^\n]*",
    re.IGNORECASE,
)
"""A tag opened and never closed on its line (`<img src=x onerror=...`): cut to the line's end,
so no attribute of it is left as text."""
_PROMPT_SPAN = re.compile(rf"(?:{PROMPT_TAG.pattern})(?:[^\n]*(?:{PROMPT_TAG.pattern}))?",
                          re.IGNORECASE)
"""From the first prompt tag to the last on a line: the text planted inside a `<source>` element, or
between a `</source>` and a `<source>`, goes with them."""
_CODE_ELEMENT = re.compile(
    r"<\s*(script|style|iframe|object|embed|noscript|template|textarea|svg|math)\b[^\n]*?"
    r"(?:<\s*/\s*\1\s*>|$)",
    re.IGNORECASE,
)
"""An element whose content is code or markup, not text: dropped with its content (to its closing
tag, or the line's end)."""
_IMAGE = re.compile(r"!\[[^\]\n]{0,300}\](?:\([^)\n]{0,600}\))?")
_LINK = re.compile(r"\[([^\]\n]{1,300})\]\(([^)\s]{1,600})(?:\s+\"[^\"\n]{0,200}\")?\)")
_PAYLOAD_SCHEMES = (
    "javascript|vbscript|livescript|data|file|blob|about|mailto|tel|sms|callto|jar|view-source|"
    "intent|feed|magnet|urn|news|nntp|ftp|sftp|ssh|telnet|ldap|irc|xmpp|chrome|res|ms-[a-z-]+"
)
ANY_LINK = re.compile(
    r"(?<![\w.+-])(?:[a-z][a-z0-9+.-]{0,30}:[\\/]{2}|(?:" + _PAYLOAD_SCHEMES + r"):(?=[^\s:])"
    r"|[\\/]{2}(?=[\w-]+(?:\.[\w-]+)+)|www\.)[^\s<>\"'`]*",
    re.IGNORECASE,
)
"""A link of any scheme (`ftp://`, `x-app://`), one of the schemes that act without `//`
(`javascript:`, `data:`, `mailto:`), a scheme-relative `//host.tld/x`, or `www.`: only a
source's own http(s) URL field is shown as a link."""
_OPEN_ANGLE = re.compile(r"<(?![\s\d=]|$)")
_CLOSE_ANGLE = re.compile(r"(?<=\S)>|>(?![\s\d=]|$)")
"""A `>` that is not a spaced comparison or the " > " of a heading path."""
_SENTENCE_SPLIT = re.compile(rf"{_CUT}+|(?<=[.!?])\s+")
_SPACES = re.compile(r"[ \t]+")


def _unescape(text: str) -> str:
    """Entities decoded (twice-encoded ones too), so `&lt;/source&gt;` is cut like `</source>`."""
    for _ in range(3):
        decoded = html.unescape(text)
        if decoded == text:
            break
        text = decoded
    return text


def _allowed_marker(group: str, markers: int) -> bool:
    numbers, bad = marker_numbers(group)
    return bool(numbers) and not bad and all(1 <= n <= markers for n in numbers)


def _cut_markup(text: str, urls: Collection[str], markers: int) -> str:
    text = _PROMPT_SPAN.sub(_CUT, text)
    text = _CODE_ELEMENT.sub(_CUT, text)
    text = _IMAGE.sub(_CUT, text)

    def link(m: re.Match[str]) -> str:
        target = m.group(2)
        return m.group(1) + (f" {target}" if target in urls else "") + _CUT

    text = _LINK.sub(link, text)
    text = _TAG.sub(_CUT, text)
    text = _OPEN_TAG.sub(_CUT, text)

    def url(m: re.Match[str]) -> str:
        found = m.group(0).rstrip(".,;:!?")
        while found[-1:] in (")", "]") and found.count(found[-1]) > found.count(
            "(" if found[-1] == ")" else "["
        ):  # the bracket that closes the text around the link
            found = found[:-1]
        return m.group(0) if found in urls else _CUT + m.group(0)[len(found):]

    text = ANY_LINK.sub(url, text)
    text = _cut_markers(text, markers)
    text = _OPEN_ANGLE.sub(_CUT, text)
    return _CLOSE_ANGLE.sub(_CUT, text)


def _cut_markers(text: str, markers: int) -> str:
    """Citation markers the citation layer did not write removed: any number in a look-alike
    bracket (【77】, 〔77〕), and a number in [ ] past the citations given."""
    folded = fold_brackets(text)
    if folded == text and "[" not in text:
        return text
    out, last = [], 0
    for m in MARKER.finditer(folded):
        mine = text[m.start()] == "[" and text[m.end() - 1] == "]"
        if not (mine and _allowed_marker(m.group(1), markers)):
            out.append(text[last : m.start()])
            last = m.end()
    return "".join(out) + text[last:]


def _line(line: str, withheld: str) -> str:
    """A line's sentences (and the pieces markup separated) without the instruction-like ones."""
    pieces = [p.strip() for p in _SENTENCE_SPLIT.split(line)]
    kept: list[str] = []
    for piece in pieces:
        if not piece.strip(" \"'`.,;:-–—*#()"):
            continue
        if looks_like_instruction(piece):
            if withheld and (not kept or kept[-1] != withheld):
                kept.append(withheld)
            continue
        kept.append(piece)
    out = _SPACES.sub(" ", " ".join(kept)).strip()
    return re.sub(r"\s+([.,;:!?])", r"\1", out)


PASSES = 8
"""Passes of the cut before the last resort (real text settles in one or two)."""


def neutral(
    text: str | None, *, urls: Collection[str] = (), markers: int = 0, withheld: str = ""
) -> str:
    """`text` safe to show: see the module docstring. `urls` are the sources' own URL fields
    (kept); `markers` is the number of citations, whose markers `[1]`..`[markers]` the citation
    layer wrote (kept; any other marker is removed); `withheld` stands in for a removed
    instruction-like sentence (an answer drops it silently, a note says so). Stable: what it
    returns passes it unchanged (a cut can join pieces into something to cut again)."""
    out = text or ""
    for _ in range(PASSES):
        again = _once(out, urls, markers, withheld)
        if again == out:
            return out
        out = again
    # still changing (each pass may cut one of a run of nested brackets): no angle bracket is
    # worth that, and without them nothing is left for a further pass to cut
    return _once(out.replace("<", " ").replace(">", " "), urls, markers, withheld)


def _once(text: str, urls: Collection[str], markers: int, withheld: str) -> str:
    out: list[str] = []
    for line in clean_text(_unescape(text)).split("\n"):
        cut = _cut_markup(line, urls, markers)
        needs = cut != line or any(looks_like_instruction(p) for p in _SENTENCE_SPLIT.split(line))
        out.append(_line(cut, withheld) if needs else line)
    # what is left of a Markdown link's "](" once its parts were cut is no link either
    return re.sub(r"\n{3,}", "\n\n", "\n".join(out)).replace("](", "] (").strip()


def neutral_field(text: str | None, *, fallback: str = "", urls: Collection[str] = ()) -> str:
    """A one-line field (title, section, snippet): folded to one line, then `neutral`."""
    if not text:
        return fallback
    folded = " ".join(clean_text(_unescape(text)).split())
    return neutral(folded, urls=urls) or fallback


def shown_source(item: T) -> T:
    """A citation or pointer (a model or a mapping, returned as it came) with its title and
    section neutralised; its URL field is its own link and stays, if it is a web address."""
    fields = item.model_dump() if isinstance(item, BaseModel) else dict(item)  # type: ignore[call-overload]
    url = fields.get("url")
    own = [url] if isinstance(url, str) and is_web_url(url) else []
    changes: dict[str, Any] = {
        "title": neutral_field(fields.get("title"), fallback=UNTITLED, urls=own),
        "section": neutral_field(fields.get("section"), urls=own) or None,
        "url": url if own else None,
    }
    for name in _ID_FIELDS:  # a document's own names: shown as text, like its title
        value = fields.get(name)
        if isinstance(value, str) and not is_web_url(value):  # a web page's id is its URL
            changes[name] = neutral_field(value, fallback="-")
    if isinstance(item, BaseModel):
        return item.model_copy(update=changes)
    return {**fields, **changes}  # type: ignore[return-value]


_ID_FIELDS = ("source_id", "doc_id", "version", "language")
"""Fields of a citation or pointer that come from a document's metadata besides its title."""


def shown_answer(update: dict[str, Any]) -> dict[str, Any]:
    """The answer node's update as the user sees it: answer text, citations, closest pointers,
    warnings and the history entry neutralised (see `neutral`)."""
    citations = [shown_source(c) for c in update.get("citations") or []]
    urls = [str(u) for u in (_get(c, "url") for c in citations) if u]
    out = dict(update)
    out["answer"] = neutral(update.get("answer"), urls=urls, markers=len(citations))
    out["citations"] = citations
    out["closest"] = [shown_source(p) for p in update.get("closest") or []]
    out["warnings"] = shown_warnings(update.get("warnings") or [])
    if update.get("history"):
        out["history"] = [
            {**h, "answer": neutral(h.get("answer"), urls=urls, markers=len(citations))}
            for h in update["history"]
        ]
    return out


def _get(item: Any, name: str) -> Any:
    return getattr(item, name, None) if isinstance(item, BaseModel) else item.get(name)


def shown_warnings(warnings: Iterable[Any]) -> list[dict[str, Any]]:
    """Warnings whose detail may quote a document (a removed sentence after "...: "): the
    quote neutralised, an instruction-like one withheld."""
    out = []
    for w in warnings:
        fields = w.model_dump() if isinstance(w, BaseModel) else dict(w)
        head, sep, rest = str(fields.get("detail") or "").partition(": ")
        if sep and not looks_like_instruction(head):
            detail = neutral(head) + sep + (neutral(rest, withheld=WITHHELD) or WITHHELD)
        else:
            detail = neutral(head + sep + rest, withheld=WITHHELD)
        out.append({**fields, "detail": detail})
    return out


def shown_documents(documents: Mapping[str, Any]) -> dict[str, Any]:
    """A page of a document search (`DocumentList` as JSON): each title and snippet neutralised,
    a `source_url` kept only if it is a web address."""
    items = []
    for item in documents.get("items") or []:
        url = item.get("source_url")
        own = [url] if isinstance(url, str) and is_web_url(url) else []
        items.append({
            **item,
            **{k: neutral_field(item[k], fallback="-") for k in _ID_FIELDS
               if isinstance(item.get(k), str) and not is_web_url(item[k])},
            "title": neutral_field(item.get("title"), fallback=UNTITLED, urls=own),
            "snippet": neutral_field(item.get("snippet"), urls=own),
            "source_url": url if own else None,
        })
    return {**documents, "items": items}
