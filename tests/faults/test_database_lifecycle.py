"""Row 14: the embedded database's life cycle (issue 26), on a data home of its own.

`grounded-agent db status` reports the server (running or not, data home, port, size,
documents) without starting one; `db stop` leaves no postmaster of that home running; `serve`
starts the embedded server it owns again when it is killed (-9) and requests recover within
10 s without restarting `serve`, which /healthz reports (`database`, `database_restarts`).
"""

from __future__ import annotations

import io
import json
import logging
import os
import signal
import time
import uuid
from collections.abc import Iterator
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

from grounded_agent import cli
from grounded_agent.serve.app import ServeSettings, create_app
from grounded_agent.store import StoreSettings, open_store
from grounded_agent.store.server import ensure_embedded_server, postmasters_of
from tests.faults.conftest import logged
from tests.faults.test_fuzz import graph
from tests.integration.conftest import server_home
from tests.support.serving import serving

pytestmark = pytest.mark.integration

RECOVERY_TARGET_S = 10.0
"""Issue 26's target for serve's recovery, reported in the fault table (a timed assertion would
fail on a loaded machine, not on a regression); the test itself waits up to a minute."""


@pytest.fixture
def home(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    with server_home("ga-dblife-") as path:
        monkeypatch.setenv("GROUNDED_AGENT_HOME", str(path))
        monkeypatch.delenv("DATABASE_URL", raising=False)
        yield path


def run_cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = cli.main(list(argv))
    return code, out.getvalue(), err.getvalue()


def _page(client: httpx.Client, thread: str | None = None) -> httpx.Response:
    body: dict[str, Any] = {"input": {"search": {"text": "price"}}}
    if thread:
        body["config"] = {"configurable": {"thread_id": thread}}
    return client.post("/agent/invoke", json=body)


def _searched(r: httpx.Response) -> bool:
    """A page request the database answered (a failed read is a 200 saying `unavailable`)."""
    return r.status_code == 200 and r.json()["output"]["status"] in ("answered", "not_found")


def test_db_status_and_stop(home: Path, fault: Any) -> None:
    row = fault(14, "`db status` and `db stop` on a data home")
    code, out, _ = run_cli("db", "status", "--json")
    before = json.loads(out)
    assert code == 0 and before["running"] is False and before["home"] == str(home.resolve())
    assert postmasters_of(home / "pgdata") == []  # status started nothing
    ensure_embedded_server(home)
    code, out, _ = run_cli("db", "status", "--json")
    up = json.loads(out)
    assert code == 0 and up["running"] is True, up
    assert up["pid"] in postmasters_of(home / "pgdata"), up
    assert up["port"] == 5432 and up["socket"].endswith(".s.PGSQL.5432"), up
    assert up["size_bytes"] > 10 * 2**20 and up["documents"] == 0, up
    with psycopg.connect(ensure_embedded_server(home)) as conn:  # status wrote nothing
        tables = conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'")
        assert tables.fetchone() == (0,)
    store = open_store(StoreSettings.from_env())
    store.ensure_schema()  # a knowledge base with its table: counted by the health check
    code, out, _ = run_cli("db", "status", "--json")
    store.close()
    assert json.loads(out)["documents"] == 0 and json.loads(out)["chunks"] == 0, out
    code, text, _ = run_cli("db", "status")
    assert "embedded PostgreSQL: running" in text and "grounded-agent db stop" in text, text
    code, out, err = run_cli("db", "stop")
    assert code == 0 and f"pid {up['pid']}" in out, (out, err)
    assert postmasters_of(home / "pgdata") == []  # no postmaster of that home runs
    code, out, _ = run_cli("db", "stop")
    assert code == 0 and "was not running" in out
    code, out, _ = run_cli("db", "status")
    assert "embedded PostgreSQL: not running" in out
    os.environ["DATABASE_URL"] = "postgresql://agent:ext-s3cret-pw@127.0.0.1:1/kb"
    try:
        code, _, err = run_cli("db", "stop")
    finally:
        del os.environ["DATABASE_URL"]
    assert code == 2 and "external server" in err and "ext-s3cret-pw" not in err
    row.record(saw=f"status: running pid {up['pid']}, port {up['port']} (Unix socket), "
               f"{up['size_bytes'] / 2**20:.0f} MiB, {up['documents']} documents; after "
               "`db stop`: no postmaster of the home; stop again: 'was not running'; "
               "external DATABASE_URL: exit 2, password not shown",
               control="status before any start reports not running and starts nothing")


def test_serve_restarts_the_embedded_server_it_owns(
    home: Path, fault: Any, caplog: pytest.LogCaptureFixture
) -> None:
    row = fault(14, "embedded PostgreSQL killed (-9) under `serve`")
    caplog.set_level(logging.WARNING)
    table = f"t_{uuid.uuid4().hex[:12]}"
    store = open_store(StoreSettings(home=home, database_url=None, embeddings="local",
                                     table_name=table),
                       embeddings=DeterministicFakeEmbedding(size=384), table_name=table)
    app = create_app(graph(), store=store, settings=ServeSettings(db_watch_s=0.5), threads=True)
    thread = f"life-{uuid.uuid4().hex[:8]}"
    ensure_embedded_server(home)
    with serving(app) as base, httpx.Client(base_url=base, timeout=120) as client:
        assert _searched(_page(client, thread))
        first = client.get("/healthz").json()
        assert first["database"] == "up" and first["database_restarts"] == 0
        (pid,) = postmasters_of(home / "pgdata")
        os.kill(pid, signal.SIGKILL)
        killed = time.monotonic()
        states: list[str] = []
        recovered = None
        while time.monotonic() - killed < 60:
            h = client.get("/healthz")
            states.append(h.json().get("database", "?"))
            back = h.status_code == 200 and h.json().get("database_restarts") == 1
            if back and _searched(_page(client, thread)):
                recovered = time.monotonic() - killed
                break
            time.sleep(0.2)
        after = client.get("/healthz").json()
        new = postmasters_of(home / "pgdata")
        threaded = client.post("/agent/invoke", json={
            "input": {"question": "What is the Pro plan price?"},
            "config": {"configurable": {"thread_id": thread}}})
    assert recovered is not None, states[-5:]
    assert new and pid not in new and after["database"] == "up"
    assert threaded.status_code == 200 and threaded.json()["output"]["status"] == "answered"
    assert "starting it again" in caplog.text and "started again" in caplog.text
    row.record(saw=f"requests and /healthz back {recovered:.1f}s after the kill, no restart "
               f"of serve (healthz database states seen: {', '.join(dict.fromkeys(states))}; "
               f"database_restarts {after['database_restarts']}); the thread continues",
               logged=logged(caplog, "starting it again", "started again",
                             level=logging.WARNING))
    row.record(recovery_s=round(recovered, 2), target_s=RECOVERY_TARGET_S,
               within_target=recovered < RECOVERY_TARGET_S)
    store.close()


def test_serve_keeps_trying_when_a_restart_fails(
    home: Path, fault: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """The server killed while its data directory is unreadable to it: the first restarts fail
    (healthz `down`), and once the directory is readable again the next one succeeds."""
    row = fault(14, "embedded PostgreSQL killed under `serve` while it cannot start again")
    caplog.set_level(logging.WARNING)
    table = f"t_{uuid.uuid4().hex[:12]}"
    store = open_store(StoreSettings(home=home, database_url=None, embeddings="local",
                                     table_name=table),
                       embeddings=DeterministicFakeEmbedding(size=384), table_name=table)
    app = create_app(graph(), store=store, settings=ServeSettings(db_watch_s=0.3), threads=False)
    ensure_embedded_server(home)
    pgdata = home / "pgdata"
    with serving(app) as base, httpx.Client(base_url=base, timeout=120) as client:
        assert _searched(_page(client))
        (pid,) = postmasters_of(pgdata)
        mode = pgdata.stat().st_mode
        pgdata.chmod(0)
        try:
            os.kill(pid, signal.SIGKILL)
            deadline = time.monotonic() + 60
            while "could not start the embedded PostgreSQL yet" not in caplog.text:
                assert time.monotonic() < deadline, caplog.text[-2000:]
                time.sleep(0.2)
            during = client.get("/healthz")
        finally:
            pgdata.chmod(mode)
        deadline = time.monotonic() + 60
        while not _searched(_page(client)):
            assert time.monotonic() < deadline, caplog.text[-2000:]
            time.sleep(0.3)
        # the watch may still be inside a restart attempt that a slow pg_ctl started before the
        # directory was readable again: it settles on "up" (one or more restarts on a loaded box)
        after = client.get("/healthz").json()
        while after["database"] != "up":
            assert time.monotonic() < deadline, caplog.text[-2000:]
            time.sleep(0.3)
            after = client.get("/healthz").json()
    store.close()
    assert during.status_code == 503 and during.json()["database"] in ("down", "restarting")
    assert after["database"] == "up" and after["database_restarts"] >= 1
    failures = caplog.text.count("could not start the embedded PostgreSQL yet")
    row.record(saw=f"while unreadable: healthz {during.status_code} "
               f"{during.json()['database']}; readable again: served, restarts "
               f"{after['database_restarts']}",
               logged=f"{failures} failed restart(s) logged, then 'started again'")


def test_without_the_watch_a_killed_server_stays_down(home: Path) -> None:
    """Negative control: an app that does not watch (what serve was before) stays at 503."""
    table = f"t_{uuid.uuid4().hex[:12]}"
    store = open_store(StoreSettings(home=home, database_url=None, embeddings="local",
                                     table_name=table),
                       embeddings=DeterministicFakeEmbedding(size=384), table_name=table)
    app = create_app(graph(), store=store, settings=ServeSettings(db_watch_s=None),
                     threads=False)
    ensure_embedded_server(home)
    with serving(app) as base, httpx.Client(base_url=base, timeout=120) as client:
        assert _searched(_page(client))
        assert "database_restarts" not in client.get("/healthz").json()
        (pid,) = postmasters_of(home / "pgdata")
        os.kill(pid, signal.SIGKILL)
        time.sleep(3.0)
        h = client.get("/healthz")
    store.close()
    assert h.status_code == 503 and h.json()["database"] == "down"
    assert postmasters_of(home / "pgdata") == []


def test_serve_watches_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    """`grounded-agent serve` (settings from the environment) watches every second; 0 turns it
    off; an app built for tests watches only when asked."""
    monkeypatch.delenv("GROUNDED_AGENT_DB_WATCH_S", raising=False)
    assert ServeSettings.from_env().db_watch_s == 1.0
    monkeypatch.setenv("GROUNDED_AGENT_DB_WATCH_S", "0")
    assert ServeSettings.from_env().db_watch_s is None
    monkeypatch.setenv("GROUNDED_AGENT_DB_WATCH_S", "soon")
    with pytest.raises(ValueError, match="GROUNDED_AGENT_DB_WATCH_S"):
        ServeSettings.from_env()
    assert ServeSettings().db_watch_s is None


def test_a_failed_start_names_the_postmaster_holding_the_data_directory(home: Path) -> None:
    """A postmaster started from another, since removed, installation keeps the data directory
    and fails every start here; the error names it and how to end it. Control: none runs, no
    hint."""
    from grounded_agent.store.server import postmaster_hint

    ensure_embedded_server(home)
    pids = postmasters_of(home / "pgdata")
    hint = postmaster_hint(home / "pgdata")
    assert pids and f"pid {pids[0]}" in hint and "'grounded-agent db stop'" in hint, hint
    assert "postgres" in hint  # the executable it runs from, which tells an installation apart
    code, _, _ = run_cli("db", "stop")
    assert code == 0 and postmaster_hint(home / "pgdata") == ""


def test_a_store_that_cannot_start_tells_the_user_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One line of what failed, one of what to do, for the embedded server and for
    DATABASE_URL; the URL's password is not shown."""
    (tmp_path / "file").write_text("not a directory")
    monkeypatch.setenv("GROUNDED_AGENT_HOME", str(tmp_path / "file" / "home"))
    monkeypatch.delenv("DATABASE_URL", raising=False)
    code, _, err = run_cli("docs", "list")
    assert code == 1 and "StoreUnavailable" in err and "'grounded-agent db status'" in err, err
    monkeypatch.setenv("DATABASE_URL", "postgresql://agent:ext-s3cret-pw@127.0.0.1:1/kb")
    code, _, err = run_cli("docs", "list")
    assert code == 1 and "DATABASE_URL" in err and "db status" not in err, err
    assert "ext-s3cret-pw" not in err
