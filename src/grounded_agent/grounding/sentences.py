"""Sentences: where a passage or a draft splits into the units an answer quotes and a citation
closes. One splitter for the sentence choice, the judge, the citation check and the screening,
so a sentence quoted from a passage is the same sentence the check reads."""

from __future__ import annotations

import re
from collections.abc import Callable

from grounded_agent.grounding.text import data_lines

SENTENCE_END = re.compile(r"(?:(?<=[.!?])|(?<=[.!?][\"'”’)]))\s+(?=[\"'“‘(\[]?[A-Z0-9])")
"""Where one sentence ends and the next begins, also after a closing quote ('... things." He').
The sentence choice and the citation check split alike, so a quoted sentence keeps its marker."""


_ITEM = r"(?:[-*•+‣–]|\(?\d{1,3}[.)]|\(?[a-z][.)])"
BULLET = re.compile(rf"^\s*{_ITEM}\s+")
"""The mark of a list item ("- ", "* ", "1. ", "2) ", "(a) "): one pattern for the passages'
sentences and the drafts' claims."""


def _numbered(line: str) -> bool:
    item = BULLET.match(line)
    return item is not None and any(c.isdigit() for c in item.group(0))


def split_sentences(text: str) -> list[str]:
    """Sentences of a passage; headings and bullet lines count as their own sentences."""
    out: list[str] = []
    for block in re.split(rf"\n\s*\n|\n(?=\s*(?:{_ITEM}|#)\s|\s*\|)", _join_wrapped(text)):
        # a list item's own number ("1. Open ...") is no sentence of its own
        block = BULLET.sub("", " ".join(block.split()))
        if not block:
            continue
        out.extend(join_abbreviated([s.strip() for s in SENTENCE_END.split(block) if s.strip()]))
    return out


def join_abbreviated(
    pieces: list[str], continues: Callable[[str], bool] | None = None
) -> list[str]:
    """Pieces split at SENTENCE_END, a piece that ends in an abbreviation joined to the next:
    the passages' sentences and the drafts' claims are joined alike."""
    ends = continues or ends_with_abbreviation
    merged: list[str] = []
    for piece in pieces:
        if merged and ends(merged[-1]):
            merged[-1] = f"{merged[-1]} {piece}"
        else:
            merged.append(piece)
    return merged


def _join_wrapped(text: str) -> str:
    """Joins a line that only looks like a numbered item ("(CO\n2) is a gas") to the line it
    continues: an item follows a blank line, a line ending a sentence or clause, or another item;
    an item numbered 1 always starts a list."""
    lines = text.split("\n")
    out = lines[:1]
    for line in lines[1:]:
        prev = out[-1].rstrip()
        if (
            _numbered(line)
            and not line.lstrip().startswith(("1.", "1)"))
            and prev
            and prev[-1] not in ".!?:;)\"'”’"
            and not BULLET.match(prev)  # an item, numbered or not
            and not prev.lstrip().startswith(("#", "|"))
        ):
            out[-1] = f"{out[-1]} {line.strip()}"
        else:
            out.append(line)
    return "\n".join(out)


ABBREVIATIONS = frozenset(data_lines("abbreviations.txt"))
"""Words whose full stop does not end a sentence: one list for the sentence choice and the
citation check, so both split a passage the same way."""

_INITIALISM = re.compile(r"(?:[A-Za-z]\.)+[A-Za-z]")
"""Dotted initials ("U.S.", "U.K."): their last dot does not end a sentence."""


def ends_with_abbreviation(sentence: str) -> bool:
    """A piece ending in "St.", "e.g." or an initial ("J.") continues into the next one."""
    if not sentence.endswith("."):
        return False
    last = sentence[:-1].rsplit(None, 1)[-1].lstrip("(\"'") if sentence[:-1].strip() else ""
    return (
        last.lower() in ABBREVIATIONS
        or (len(last) == 1 and last.isalpha())
        or bool(_INITIALISM.fullmatch(last))
    )


_TABLE_ROW = re.compile(r"^\s*\|(.+)\|\s*$")
_TABLE_RULE = re.compile(r"^[\s|:\-]+$")


def answer_units(text: str) -> list[str]:
    """The sentences of a passage, a table row read out with its header as one sentence
    ("Priority: P1 Critical; First response: 15 minutes."), so that a row can be quoted."""
    units: list[str] = []
    header: list[str] | None = None
    prose: list[str] = []

    def flush() -> None:
        if prose:
            units.extend(split_sentences("\n".join(prose)))
            prose.clear()

    for line in text.splitlines():
        row = _TABLE_ROW.match(line)
        if row is None:
            header = None
            prose.append(line)
            continue
        flush()
        if _TABLE_RULE.match(line):
            continue
        cells = [c.strip() for c in row.group(1).split("|")]
        if header is None:
            header = cells
            continue
        pairs = [f"{h}: {c}" if h else c for h, c in zip(header, cells, strict=False) if c]
        if pairs:
            units.append("; ".join(pairs) + ".")
    flush()
    return [BULLET.sub("", u) for u in units]
