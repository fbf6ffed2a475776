"""Run the app under uvicorn in a background thread: tests and notebooks talk real HTTP to it."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def serving(app: Any, host: str = "127.0.0.1", *, startup_timeout_s: float = 30.0) -> Iterator[str]:
    """Serves `app` on a free loopback port (the OS picks it, so parallel runs do not clash);
    yields the base URL and stops the server on exit, lifespan shutdown included."""
    import uvicorn

    config = uvicorn.Config(app, host=host, port=0, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="grounded-agent-uvicorn", daemon=True)
    thread.start()
    deadline = time.monotonic() + startup_timeout_s
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            raise RuntimeError("the test server did not start")
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://{host}:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=15)
