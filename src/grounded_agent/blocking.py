"""The one sync bridge: one background event loop per process, open until the process exits.

What the agent opens belongs to the loop that opened it: the store's database connections, a
thread's checkpointer pool, the model's HTTP client. `asyncio.run` closes its loop when it
returns, so a second `ask()` in the same process found its model's connections on a closed loop
("Event loop is closed"); and a loop per caller would keep the store's connections from the
others. So the blocking API (`ask`, `search`, the CLI) and the store's blocking methods hand their
coroutine to this loop and wait for it (`run_blocking`), and async callers on a loop of their own
hand the store's database work to it (`on_loop`)."""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Concatenate, ParamSpec, TypeVar

T = TypeVar("T")
S = TypeVar("S")
P = ParamSpec("P")


class _ProcessLoop:
    """One daemon thread running one event loop, started on first use (again after a fork)."""

    _lock = threading.Lock()
    _loop: asyncio.AbstractEventLoop | None = None
    _thread: threading.Thread | None = None

    @classmethod
    def get(cls) -> asyncio.AbstractEventLoop:
        with cls._lock:
            if cls._loop is None or cls._thread is None or not cls._thread.is_alive():
                loop = asyncio.new_event_loop()
                thread = threading.Thread(
                    target=loop.run_forever, name="grounded-agent-loop", daemon=True
                )
                thread.start()
                cls._loop, cls._thread = loop, thread
            return cls._loop

    @classmethod
    def in_loop_thread(cls) -> bool:
        return cls._thread is not None and threading.current_thread() is cls._thread


def process_loop() -> asyncio.AbstractEventLoop:
    """The process's event loop (started on first use)."""
    return _ProcessLoop.get()


def in_loop_thread() -> bool:
    """True inside the process loop's own thread, where waiting for it would never end."""
    return _ProcessLoop.in_loop_thread()


def _running_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


async def _within(context: contextvars.Context, coro: Coroutine[Any, Any, T]) -> T:
    # the caller's context variables (tracing, callbacks) go with the coroutine
    return await asyncio.get_running_loop().create_task(coro, context=context)


def run_blocking(coro: Coroutine[Any, Any, T], *, refuse_in_running_loop: bool = True) -> T:
    """Runs `coro` to completion on the process loop and returns its result; an interrupted
    wait (Ctrl-C) cancels it there.

    Refused inside a running event loop, where the caller should await the async form instead
    (the public blocking API); the store's blocking methods pass `refuse_in_running_loop=False`
    and are refused only on the process loop itself."""
    if in_loop_thread():
        coro.close()
        raise RuntimeError("a blocking call from the process loop itself: await it instead")
    if refuse_in_running_loop and _running_loop():
        coro.close()
        raise RuntimeError(
            "a blocking call inside a running event loop: await the async form instead "
            "(aask, asearch)"
        )
    future = asyncio.run_coroutine_threadsafe(
        _within(contextvars.copy_context(), coro), process_loop()
    )
    try:
        return future.result()
    except BaseException:
        future.cancel()  # a KeyboardInterrupt in the wait: the run stops too
        raise


def on_loop(coro: Coroutine[Any, Any, T]) -> Awaitable[T]:
    """`coro` run on the process loop, awaitable from any loop (as is on the loop itself)."""
    if in_loop_thread():
        return asyncio.ensure_future(coro)
    return asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, process_loop()))


def blocking(
    method: Callable[Concatenate[S, P], Coroutine[Any, Any, T]],
) -> Callable[Concatenate[S, P], T]:
    """The blocking twin of an async method: the same call, run to completion on the process
    loop. The async method already applies its timeout and error mapping."""

    def twin(self: S, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return run_blocking(method(self, *args, **kwargs), refuse_in_running_loop=False)

    name = method.__name__.removeprefix("a")
    twin.__name__ = name
    twin.__qualname__ = method.__qualname__.rsplit(".", 1)[0] + "." + name
    twin.__module__ = method.__module__
    twin.__doc__ = f"Blocking `{method.__name__}`."
    return twin
