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


class StoreTimeout(StoreError, TimeoutError):
    """A store operation took longer than its timeout; a subclass of TimeoutError on purpose."""


def map_error(exc: BaseException, what: str) -> StoreError | None:
    """Database failures as StoreUnavailable/StoreTimeout; None for anything else (a bug)."""
    import psycopg
    from sqlalchemy.exc import DBAPIError, InterfaceError

    if isinstance(exc, StoreError):
        return exc
    orig = getattr(exc, "orig", None) or exc
    if isinstance(orig, psycopg.errors.QueryCanceled):
        return StoreTimeout(f"{what}: the database cancelled the statement (timeout)")
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
