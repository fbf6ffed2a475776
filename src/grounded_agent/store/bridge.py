"""The sync/async bridge: one background event loop per process owns every database connection,
so the store can be used from sync code, from any event loop, and from several threads."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from typing import Any, Concatenate, ParamSpec, TypeVar

from grounded_agent.store.errors import StoreError, StoreTimeout, StoreUnavailable

T = TypeVar("T")
S = TypeVar("S")
P = ParamSpec("P")


class _BackgroundLoop:
    """One daemon event loop per process that owns every database connection."""

    _lock = threading.Lock()
    _loop: asyncio.AbstractEventLoop | None = None
    _thread: threading.Thread | None = None

    @classmethod
    def get(cls) -> asyncio.AbstractEventLoop:
        with cls._lock:
            if cls._loop is None or cls._thread is None or not cls._thread.is_alive():
                loop = asyncio.new_event_loop()
                thread = threading.Thread(
                    target=loop.run_forever, name="grounded-agent-store", daemon=True
                )
                thread.start()
                cls._loop, cls._thread = loop, thread
            return cls._loop

    @classmethod
    def in_loop_thread(cls) -> bool:
        return cls._thread is not None and threading.current_thread() is cls._thread


def store_loop() -> asyncio.AbstractEventLoop:
    """The store's event loop (started on first use)."""
    return _BackgroundLoop.get()


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


async def call(coro: Coroutine[Any, Any, T], what: str, limit: float | None) -> T:
    """Runs `coro` on the store's loop with a timeout, mapping database failures."""
    loop = _BackgroundLoop.get()
    try:
        if _BackgroundLoop.in_loop_thread():
            task: asyncio.Future[T] = asyncio.ensure_future(coro)
        else:
            task = asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, loop))
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


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Runs a coroutine on the store's loop to completion from blocking code."""
    if _BackgroundLoop.in_loop_thread():
        coro.close()
        raise RuntimeError("blocking store call from the store's own event loop")
    return asyncio.run_coroutine_threadsafe(coro, _BackgroundLoop.get()).result()


def blocking(
    method: Callable[Concatenate[S, P], Coroutine[Any, Any, T]],
) -> Callable[Concatenate[S, P], T]:
    """The blocking twin of an async method: the same call, run to completion on the store's
    loop. The async method already applies its timeout and error mapping."""

    def twin(self: S, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return run_sync(method(self, *args, **kwargs))

    name = method.__name__.removeprefix("a")
    twin.__name__ = name
    twin.__qualname__ = method.__qualname__.rsplit(".", 1)[0] + "." + name
    twin.__module__ = method.__module__
    twin.__doc__ = f"Blocking `{method.__name__}`."
    return twin
