"""The check every text from outside passes before it is stored, searched or sent: beneath the
schemas and the document query, which both refuse what it names."""

from __future__ import annotations

import re

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
