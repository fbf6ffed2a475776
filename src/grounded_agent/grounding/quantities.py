"""Figures as quantities: the same amount written in another unit ("2 weeks" for "14 days",
"20%" for "a fifth", "0.5 l" for "500 ml").

Used where a judgement must not confirm a changed figure (citations.check_answer): a figure a
sentence writes in digits stands in its sources when the sources state it, as written or as the
same quantity in another unit of the same kind."""

from __future__ import annotations

import re
from dataclasses import dataclass

from grounded_agent.grounding.text import data_lines


def _table() -> tuple[dict[str, int], dict[str, float], dict[str, tuple[str, float]]]:
    """data/quantities.txt: number words, parts ("a third") and units by kind."""
    numbers: dict[str, int] = {}
    parts: dict[str, float] = {}
    units: dict[str, tuple[str, float]] = {}
    for line in data_lines("quantities.txt"):
        kind, rest = line.split(None, 1)
        phrase, value = rest.rsplit(None, 1)
        if kind == "number":
            numbers[phrase] = int(value)
        elif kind == "part":
            parts[phrase] = float(value)
        else:
            units[phrase] = (kind, float(value))
    return numbers, parts, units


NUMBER_WORDS, SHARE_WORDS, _UNITS = _table()
"""Numbers written as words, shares in words (answer_types reads both too), units by kind."""
TIME_UNITS = tuple(u for u, (kind, _) in _UNITS.items() if kind == "time")
_WORDS = {**NUMBER_WORDS, "a": 1, "an": 1, "half a": 0.5, "half an": 0.5}
_UNIT_WORDS = "|".join(sorted((re.escape(u) for u in _UNITS if u != "%"), key=len, reverse=True))
_NUMBER = r"\d+(?:[.,]\d+)*"
_DIGIT_QUANTITY = re.compile(
    rf"(?P<n>{_NUMBER})\s*(?:-\s*)?(?P<u>%|(?:{_UNIT_WORDS})s?\b)", re.IGNORECASE
)
_WORD_QUANTITY = re.compile(
    rf"\b(?P<n>{'|'.join(sorted(_WORDS, key=len, reverse=True))})[\s-]+(?P<u>(?:{_UNIT_WORDS})s?)\b",
    re.IGNORECASE,
)
_SHARE = re.compile(
    rf"\b(?:{'|'.join(sorted(SHARE_WORDS, key=len, reverse=True))})\b(?!\s+an?\b)", re.IGNORECASE
)
"""A share ("a fifth"); "half an hour" is a time, read above."""
_DIGITS = re.compile(_NUMBER)
CLOCK = re.compile(
    r"\b(?P<h>\d{1,2})(?:[:.](?P<m>\d{2}))?\s*(?P<half>[ap])\.?\s?m\b\.?"
    r"|\b(?P<h24>\d{1,2}):(?P<m24>\d{2})\b",
    re.IGNORECASE,
)
"""A time of day, "4 pm", "7.30 a.m." or "16:00": the same time however it is written."""
_NUMBER_WORD = re.compile(
    rf"\b(?:(?P<tens>{'|'.join(w for w, n in NUMBER_WORDS.items() if 20 <= n <= 90)})[- ])?"
    rf"(?P<word>{'|'.join(NUMBER_WORDS)})\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Quantity:
    kind: str
    value: float
    """In the kind's base unit (seconds, litres, kilograms, metres, a share of 1)."""


def _number(raw: str) -> float | None:
    if re.fullmatch(r"\d{1,3}(,\d{3})+(\.\d+)?", raw):
        raw = raw.replace(",", "")
    elif re.fullmatch(r"\d+,\d{1,2}", raw):
        raw = raw.replace(",", ".")
    try:
        return float(raw)
    except ValueError:
        return None


def _unit(raw: str) -> tuple[str, float] | None:
    u = raw.lower()
    return _UNITS.get(u) or (_UNITS.get(u[:-1]) if u.endswith("s") else None)


def quantities(text: str) -> list[Quantity]:
    """Every quantity the text states: digits or number words with a unit, percentages, shares."""
    out = []
    for pattern, read in ((_DIGIT_QUANTITY, _number), (_WORD_QUANTITY, lambda w: _WORDS[w.lower()])):
        for m in pattern.finditer(text):
            n, unit = read(m.group("n")), _unit(m.group("u"))
            if n is not None and unit is not None:
                out.append(Quantity(unit[0], n * unit[1]))
    out += [Quantity("share", SHARE_WORDS[m.group(0).lower()]) for m in _SHARE.finditer(text)]
    return out


def _same(a: Quantity, b: Quantity) -> bool:
    return a.kind == b.kind and abs(a.value - b.value) <= 0.005 * max(abs(a.value), abs(b.value))


def _clock(m: re.Match[str]) -> int | None:
    """Minutes after midnight of a time of day, or None where it names none ("25:00")."""
    if m.group("h24") is not None:
        h, minutes = int(m.group("h24")), int(m.group("m24"))
    else:
        h, minutes = int(m.group("h")), int(m.group("m") or 0)
        if not 1 <= h <= 12:
            return None
        h = h % 12 + (12 if m.group("half").lower() == "p" else 0)
    return h * 60 + minutes if h < 24 and minutes < 60 else None


def _numbers_as_words(text: str) -> set[float]:
    """The numbers a text writes as words: "ten", "twenty-five", "twice" (as 2)."""
    out = set()
    for m in _NUMBER_WORD.finditer(text):
        tens = NUMBER_WORDS[m.group("tens").lower()] if m.group("tens") else 0
        out.add(float(tens + NUMBER_WORDS[m.group("word").lower()]))
    return out


def figures_stated(sentence: str, sources: str) -> bool:
    """Every figure the sentence writes in digits stands in the sources: as written, as a number
    word ("10" for "ten"), as the same time of day ("4 pm" for "16:00"), or as the same quantity
    in another unit. A figure that is none of these is a changed one."""
    written = {_number(m.group(0)) for m in _DIGITS.finditer(sources)} | _numbers_as_words(sources)
    times = {_clock(m) for m in CLOCK.finditer(sources)} - {None}
    clocks = [(m.start(), m.end(), _clock(m)) for m in CLOCK.finditer(sentence)]
    theirs = quantities(sources)
    for m in _DIGITS.finditer(sentence):
        if _number(m.group(0)) in written:
            continue
        at = next((t for a, b, t in clocks if a <= m.start() < b), None)
        if at is not None and at in times:
            continue
        q = next((x for x in _DIGIT_QUANTITY.finditer(sentence) if x.start() == m.start()), None)
        mine = quantities(q.group(0)) if q else []
        if not mine or not any(_same(mine[0], t) for t in theirs):
            return False
    return True
