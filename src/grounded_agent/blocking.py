"""The blocking API's event loop: one per thread, kept from call to call.

`asyncio.run` closes its loop when it returns. Clients that model libraries cache belong to the
loop that first used them (langchain-openai keeps one HTTP client per base URL and timeout), so a
second `ask()` in the same process found its model's connections on a closed loop and the model
step failed ("Event loop is closed"). Every blocking call of a thread therefore runs on that
thread's own loop, which stays open until the process exits."""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

_local = threading.local()
_runners: list[asyncio.Runner] = []
_lock = threading.Lock()


def run_blocking(coro: Coroutine[Any, Any, T]) -> T:
    """Runs `coro` to completion on this thread's loop; refused inside a running loop, where
    the caller should await the async form instead."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        coro.close()
        raise RuntimeError(
            "a blocking call inside a running event loop: await the async form instead "
            "(aask, asearch)"
        )
    runner: asyncio.Runner | None = getattr(_local, "runner", None)
    if runner is None:
        runner = asyncio.Runner()
        _local.runner = runner
        with _lock:
            _runners.append(runner)
    return runner.run(coro)


@atexit.register
def _close() -> None:
    with _lock:
        runners, _runners[:] = list(_runners), []
    for runner in runners:
        with contextlib.suppress(Exception):  # at exit, a loop that cannot close is left as is
            runner.close()
