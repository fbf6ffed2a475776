"""The check every text from outside passes before it is stored, searched or sent: beneath the
schemas and the document query, which both refuse what it names."""

from __future__ import annotations

import functools
import re
import unicodedata

_SURROGATE = re.compile("[\ud800-\udfff]")


def text_problem(value: str) -> str | None:
    """Why `value` cannot travel as text (a lone surrogate, a NUL character), or None.

    A lone surrogate is what undecodable bytes become (a command line's invalid UTF-8) or an
    unpaired escape in JSON: it cannot be encoded, so it would fail later in a tool call, the
    database or the response. PostgreSQL text cannot hold NUL.
    """
    bad = _SURROGATE.search(value)
    if bad is not None:
        return (
            f"is not valid Unicode text: a lone surrogate (U+{ord(bad.group()):04X}, from "
            f"invalid UTF-8 or an unpaired escape) at character {bad.start() + 1}"
        )
    nul = value.find("\x00")
    if nul >= 0:
        return f"holds a NUL character at character {nul + 1}"
    return None


# --- the one normalisation of untrusted text ------------------------------------------------

_TERMINAL = re.compile(
    r"\x1b\[[0-?]*[ !#-/]*[@-\[\]-~]?"  # CSI: cursor moves, erase (ESC[2J), colours, hidden text
    r"|\x1b[\]PX^_][^\x07\x1b\x9c\n]{0,2000}(?:\x07|\x1b\\|\x9c)"  # OSC (OSC 8), DCS, SOS, PM, APC
    r"|\x1b[ -/]*[0-~]?"  # two- and three-byte escapes (ESC c resets the terminal)
    r"|\x9b[0-?]*[ !#-/]*[@-\[\]-~]?"  # the same, introduced by their one-byte C1 forms
    r"|[\x90\x98\x9d-\x9f][^\x07\x1b\x9c\n\"\\]{0,2000}(?:\x07|\x1b\\|\x9c)"
)
"""Terminal control sequences (ECMA-48): the whole sequence goes, not only its ESC byte, so no
"[2J" or link target is left behind as text. A quote or backslash never counts as part of a
sequence: removing one could end a JSON string early. A string sequence (OSC, DCS) goes whole only up to
its terminator on the same line; unterminated, its introducer goes and the rest stays as text
(what follows could be anything, a JSON string's closing quote included)."""

_KEPT_CONTROLS = frozenset("\t\n\r\f")
_LINE_BREAKS = {0x2028: "\n", 0x2029: "\n\n", 0x0B: "\n", 0x85: "\n"}
_INVISIBLE_EXTRA = [
    0x034F, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x180B, 0x180C, 0x180D, 0x180F, 0x3164, 0xFFA0,
    *range(0xFE00, 0xFE10), *range(0xE0100, 0xE01F0),
]
"""Characters that render as nothing but are not of category Cf: the combining grapheme joiner,
Hangul fillers, Khmer inherent vowels, Mongolian and other variation selectors."""


@functools.cache
def _invisible_table() -> dict[int, str | None]:
    """Code point -> replacement: every control (Cc) but tab, newline, return and form feed,
    every format character (Cf: zero-width spaces and joiners, bidi controls, soft hyphen, tag
    characters, BOM), the invisibles of `_INVISIBLE_EXTRA` removed; line and paragraph
    separators, vertical tab and NEL become newlines. Cf occurs in planes 0, 1 and 14 only."""
    table: dict[int, str | None] = {}
    for cp in [*range(0x20000), *range(0xE0000, 0xE1000)]:
        cat = unicodedata.category(chr(cp))
        if (cat == "Cc" and chr(cp) not in _KEPT_CONTROLS) or cat == "Cf":
            table[cp] = None
    table.update(dict.fromkeys(_INVISIBLE_EXTRA))
    table.update(_LINE_BREAKS)
    return table


@functools.cache
def _invisible_pattern() -> re.Pattern[str]:
    """The characters `_invisible_table` maps, as one character class (a regex scan is many
    times faster than `str.translate` with a mapping on long, mostly clean text)."""
    cps = sorted(_invisible_table())
    ranges: list[str] = []
    start = prev = cps[0]
    for cp in [*cps[1:], -1]:
        if cp != prev + 1:
            ranges.append(re.escape(chr(start)) + ("-" + re.escape(chr(prev)) if prev > start
                                                   else ""))
            start = cp
        prev = cp
    return re.compile("[" + "".join(ranges) + "]")


def _strip_invisible(value: str) -> str:
    if not _invisible_pattern().search(value):
        return value
    table = _invisible_table()
    return _invisible_pattern().sub(lambda m: table[ord(m.group())] or "", value)


def clean_text(value: str) -> str:
    """`value` as this project stores, screens and shows it: terminal control sequences removed
    whole, invisible and control characters removed (tab, newline, return and form feed stay),
    then NFKC, so a full-width `［77］` reads `[77]`, an instruction split by a zero-width space
    reads as one word, and what screening tests is what is shown. Idempotent. Lone surrogates
    are left for `text_problem` to refuse."""
    out = _TERMINAL.sub("", value) if "\x1b" in value or _C1_INTRODUCERS.search(value) else value
    if _SURROGATE.search(out):  # a pair written as two escapes ("\ud83d\ude00" in YAML) is joined
        out = out.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    out = _strip_invisible(out)
    if out.isascii():  # ASCII is its own NFKC, and holds no invisible character once stripped
        return out
    return _strip_invisible(unicodedata.normalize("NFKC", out))


_C1_INTRODUCERS = re.compile("[\x90\x98\x9b\x9d-\x9f]")


def terminal_safe(value: str) -> str:
    """`value` safe to print on a terminal: control sequences and control characters removed
    (newline and tab stay). For everything the CLI prints, JSON included: no character it
    adds or removes can end a JSON string (other line breaks become spaces, not newlines)."""
    if value.isprintable():
        return value
    out = _TERMINAL.sub("", value) if "\x1b" in value or _C1_INTRODUCERS.search(value) else value
    out = out.translate(_BREAKS_AS_SPACES)
    return _strip_invisible(out).replace("\r", "").replace("\f", " ")


_BREAKS_AS_SPACES = dict.fromkeys(_LINE_BREAKS, " ")


@functools.cache
def _bracket_table() -> dict[int, str]:
    """Every opening bracket (category Ps) but "(" and "{" -> "[", every closing one (Pe) but
    ")" and "}" -> "]": 【77】, 〔77〕, ⟦77⟧ and the rest read as the marker [77]."""
    table: dict[int, str] = {}
    for cp in range(0x20000):
        cat = unicodedata.category(chr(cp))
        if cat == "Ps" and chr(cp) not in "({":
            table[cp] = "["
        elif cat == "Pe" and chr(cp) not in ")}":
            table[cp] = "]"
    return table


def fold_brackets(value: str) -> str:
    """`value` with look-alike square brackets as "[" and "]", character for character (the
    positions of what is found in it are those of `value`)."""
    return value.translate(_bracket_table())


# --- document metadata ----------------------------------------------------------------------

MAX_DOC_ID_CHARS = 256
"""The longest document id: the same for ingest, `docs show` and `docs remove` (a longer one
would not fit PostgreSQL's index row in every script)."""
DOC_ID_CHARACTERS = "letters, digits, spaces and . , : ; _ - + # @ ~ / ( ) & '"
_DOC_ID = re.compile(r"[^\W_]|_")
_DOC_ID_FULL = re.compile(r"[\w][\w .,:;+#@~/()&'\-]*")
_DOC_ID_OTHER = re.compile(r"[^\w .,:;+#@~/()&'\-]+")
MAX_VERSION_CHARS = 64
_VERSION = re.compile(r"[\w][\w .,:+~/()#\-]*")
MAX_URL_CHARS = 2048
_URL = re.compile(r"https?://[^\s/?#<>\"'`\\^{}|]+(?:[/?#][^\s<>\"'`\\^{}|]*)?", re.IGNORECASE)
_LANGUAGE = re.compile(r"[a-z]{2,3}(?:-[a-z0-9]{2,8})?")


def doc_id_problem(value: str) -> str | None:
    """Why `value` cannot be a document id (see DOC_ID_CHARACTERS and MAX_DOC_ID_CHARS), or
    None. Markup, citation markers, quotes and controls cannot be spelled with those characters,
    so an id is safe to show as it is."""
    if not value.strip():
        return "is empty"
    if len(value) > MAX_DOC_ID_CHARS:
        return f"is longer than {MAX_DOC_ID_CHARS} characters"
    if value != value.strip():
        return "starts or ends with a space"
    if not _DOC_ID_FULL.fullmatch(value):
        return f"may hold only {DOC_ID_CHARACTERS}, starting with a letter or digit"
    return None


def safe_doc_id(value: str) -> str:
    """An id derived from a file name, made valid: characters outside DOC_ID_CHARACTERS become
    "-", and it is cut to MAX_DOC_ID_CHARS."""
    out = _DOC_ID_OTHER.sub("-", clean_text(value)).strip(" -")
    out = out if out and _DOC_ID.match(out[0]) else f"doc-{out}".rstrip("-")
    return out[:MAX_DOC_ID_CHARS].rstrip()


def version_problem(value: str) -> str | None:
    """Why `value` cannot be a version label ("2026.10", "v2 draft", "1.0-rc1"), or None."""
    if len(value) > MAX_VERSION_CHARS:
        return f"is longer than {MAX_VERSION_CHARS} characters"
    if not _VERSION.fullmatch(value):
        return "may hold only letters, digits, spaces and . , : _ - + ~ / ( ) #"
    return None


def url_problem(value: str) -> str | None:
    """Why `value` cannot be a document's URL, or None: an http or https address with a host,
    no spaces, quotes or angle brackets, at most MAX_URL_CHARS long."""
    if len(value) > MAX_URL_CHARS:
        return f"is longer than {MAX_URL_CHARS} characters"
    if not _URL.fullmatch(value):
        return "must be an http:// or https:// address"
    return None


def is_web_url(value: object) -> bool:
    """An http(s) address that `url_problem` accepts: the only kind shown as a link."""
    return isinstance(value, str) and url_problem(value) is None


def language_problem(value: str) -> str | None:
    """Why `value` cannot be a document language, or None: an ISO code ("en", "pt-br")."""
    if not _LANGUAGE.fullmatch(value.lower()):
        return "must be an ISO code such as en, de or pt-br"
    return None
