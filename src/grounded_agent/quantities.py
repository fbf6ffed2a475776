"""Figures as quantities: the same amount written in another unit ("2 weeks" for "14 days",
"20%" for "a fifth", "0.5 l" for "500 ml").

Used where a judgement must not confirm a changed figure (citations.check_answer): a figure a
sentence writes in digits stands in its sources when the sources state it, as written or as the
same quantity in another unit of the same kind."""

from __future__ import annotations

import re
from dataclasses import dataclass

_UNITS: dict[str, tuple[str, float]] = {
    # time, in seconds (a month is a twelfth of a year, not 30 days)
    "second": ("time", 1.0), "sec": ("time", 1.0), "minute": ("time", 60.0), "min": ("time", 60.0),
    "hour": ("time", 3600.0), "hr": ("time", 3600.0), "h": ("time", 3600.0),
    "day": ("time", 86400.0), "week": ("time", 604800.0), "fortnight": ("time", 1209600.0),
    "month": ("time", 2629800.0), "year": ("time", 31557600.0), "yr": ("time", 31557600.0),
    "decade": ("time", 315576000.0),
    # volume, in litres
    "ml": ("volume", 0.001), "millilitre": ("volume", 0.001), "milliliter": ("volume", 0.001),
    "cl": ("volume", 0.01), "l": ("volume", 1.0), "litre": ("volume", 1.0),
    "liter": ("volume", 1.0),
    # mass, in kilograms
    "mg": ("mass", 1e-6), "g": ("mass", 0.001), "gram": ("mass", 0.001), "kg": ("mass", 1.0),
    "kilogram": ("mass", 1.0), "tonne": ("mass", 1000.0), "t": ("mass", 1000.0),
    # length, in metres
    "mm": ("length", 0.001), "cm": ("length", 0.01), "m": ("length", 1.0),
    "metre": ("length", 1.0), "meter": ("length", 1.0), "km": ("length", 1000.0),
    "kilometre": ("length", 1000.0), "kilometer": ("length", 1000.0),
    # shares
    "%": ("share", 0.01), "percent": ("share", 0.01), "per cent": ("share", 0.01),
}
NUMBER_WORDS: dict[str, int] = {
    "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14,
    "fifteen": 15, "sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19, "twenty": 20,
    "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90,
    "hundred": 100, "thousand": 1000, "million": 1000000, "dozen": 12, "once": 1, "twice": 2,
    "thrice": 3,
}
"""Numbers written as words, as the support check reads them (citations.py) and quantities here."""
_WORDS = {**NUMBER_WORDS, "a": 1, "an": 1, "half a": 0.5, "half an": 0.5}
_SHARES = {
    "half": 0.5, "a third": 1 / 3, "one third": 1 / 3, "a quarter": 0.25, "one quarter": 0.25,
    "three quarters": 0.75, "a fifth": 0.2, "one fifth": 0.2, "a tenth": 0.1, "one tenth": 0.1,
    "two thirds": 2 / 3,
}
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
    rf"\b(?:{'|'.join(sorted(_SHARES, key=len, reverse=True))})\b(?!\s+an?\b)", re.IGNORECASE
)
"""A share ("a fifth"); "half an hour" is a time, read above."""
_DIGITS = re.compile(_NUMBER)
_CLOCK = re.compile(
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
    out += [Quantity("share", _SHARES[m.group(0).lower()]) for m in _SHARE.finditer(text)]
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
    times = {_clock(m) for m in _CLOCK.finditer(sources)} - {None}
    clocks = [(m.start(), m.end(), _clock(m)) for m in _CLOCK.finditer(sentence)]
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
