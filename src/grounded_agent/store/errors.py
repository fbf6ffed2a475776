"""Exceptions of the knowledge store: a failed read must never look like an empty one. Every
database call goes through `guarded`, which runs it on the process loop (blocking.py) with a
timeout and turns database failures into these."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

from grounded_agent.blocking import on_loop

T = TypeVar("T")


class StoreError(Exception):
    """Base class of knowledge-store failures."""


class StoreUnavailable(StoreError):
    """The database cannot be reached or started (embedded server, DATABASE_URL, credentials)."""


class StoreBusy(StoreUnavailable):
    """The database is running but refuses new connections: its connection limit is reached
    ("sorry, too many clients already"), or it is starting up or shutting down. Connecting is
    retried for a while (`vectorstore.CONNECT_RETRY_S`) before this is raised."""


class StoreTimeout(StoreError, TimeoutError):
    """A store operation took longer than its timeout; a subclass of TimeoutError on purpose."""


_DATA_CLASSES = frozenset({"22", "23", "54"})
"""SQLSTATE classes of a statement's own data: data exception, integrity violation, program
limit exceeded ("index row size exceeds btree maximum" is 54000, which psycopg raises as an
OperationalError). The write of one document failed; the database is fine."""
_BUSY = (
    ("53300", "too many clients", "the database has reached its connection limit (too many "
     "clients); retry when other runs have finished"),
    ("57P03", "the database system is starting up", "the database is starting up; retry shortly"),
    ("57P03", "the database system is shutting down", "the database is shutting down"),
)


def busy_reason(exc: BaseException) -> str | None:
    """What a connection refused by a running database says (connection limit, start-up), or
    None. Refusals at connect time carry no SQLSTATE in psycopg: their message is read too."""
    orig = getattr(exc, "orig", None) or exc
    sqlstate = getattr(orig, "sqlstate", None)
    text = str(orig).lower()
    for code, words, reason in _BUSY:
        if sqlstate == code == "53300" or words in text:
            return reason
    return None


def map_error(exc: BaseException, what: str) -> StoreError | None:
    """Database failures as StoreUnavailable/StoreTimeout; None for anything else (a bug)."""
    import psycopg
    from sqlalchemy.exc import DBAPIError, InterfaceError

    if isinstance(exc, StoreError):
        return exc
    orig = getattr(exc, "orig", None) or exc
    if isinstance(orig, psycopg.errors.QueryCanceled):
        return StoreTimeout(f"{what}: the database cancelled the statement (timeout)")
    if busy_reason(orig) is not None:
        return StoreBusy(f"{what}: {busy_reason(orig)}")
    sqlstate = getattr(orig, "sqlstate", None) or ""
    if sqlstate[:2] in _DATA_CLASSES:  # the statement's data, not the database: one document's
        return None
    if isinstance(orig, psycopg.OperationalError | psycopg.InterfaceError | OSError) or isinstance(
        exc, InterfaceError | ConnectionError
    ):
        first = str(orig).strip().splitlines()[0] if str(orig).strip() else type(orig).__name__
        return StoreUnavailable(f"{what}: database unreachable: {first}")
    if isinstance(exc, DBAPIError) and exc.connection_invalidated:
        return StoreUnavailable(f"{what}: database connection lost")
    return None


async def guarded(coro: Coroutine[Any, Any, T], what: str, limit: float | None) -> T:
    """Runs `coro` on the process loop, which owns every database connection, within `limit`
    seconds, mapping database failures."""
    try:
        task = on_loop(coro)
        return await asyncio.wait_for(task, limit) if limit else await task
    except TimeoutError as exc:
        if isinstance(exc, StoreError):
            raise
        raise StoreTimeout(f"{what}: no answer within {limit or 0:.1f}s") from None
    except Exception as exc:
        mapped = map_error(exc, what)
        if mapped is None or mapped is exc:
            raise
        raise mapped from exc
