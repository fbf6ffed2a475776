"""Secrets out of every log line: the values of the key variables and the database password are
replaced before an exception's text or traceback is logged. Providers echo keys in error bodies
("Incorrect API key provided: sk-..."), and a traceback carries those bodies."""

from __future__ import annotations

import contextlib
import os
import traceback
from urllib.parse import urlsplit

SECRET_VARIABLES = (
    "OPENAI_API_KEY",
    "TAVILY_API_KEY",
    "GROUNDED_AGENT_API_KEY",
    "LANGSMITH_API_KEY",
    "LANGCHAIN_API_KEY",
)
MIN_SECRET_CHARS = 6
"""Shorter values (a placeholder such as "test") would blank out ordinary words."""


def known_secrets() -> list[str]:
    """The secrets of this process's environment, longest first."""
    found = [os.environ.get(name, "").strip() for name in SECRET_VARIABLES]
    url = os.environ.get("DATABASE_URL", "").strip()
    if url:
        with contextlib.suppress(ValueError):
            found.append(urlsplit(url).password or "")
    return sorted({s for s in found if len(s) >= MIN_SECRET_CHARS}, key=len, reverse=True)


def redact_secrets(text: str, *extra: str | None) -> str:
    for secret in [*known_secrets(), *(e for e in extra if e and len(e) >= MIN_SECRET_CHARS)]:
        text = text.replace(secret, "[redacted]")
    return text


def describe(exc: BaseException, limit: int = 300) -> str:
    """`Type: first line of the message`, secrets removed."""
    first = (str(exc).strip().splitlines() or [""])[0]
    text = f"{type(exc).__name__}: {first}" if first else type(exc).__name__
    return redact_secrets(text)[:limit]


def redacted_traceback(exc: BaseException) -> str:
    """The whole traceback as text, secrets removed."""
    return redact_secrets("".join(traceback.format_exception(exc)).rstrip())
