"""Row 19: the embedded PostgreSQL's connection limit reached ("sorry, too many clients
already"), on the session's real server: every free connection is taken by this test, then a
store that needs a new one waits until some are freed, and past its wait reports a busy
database (never "the database could not be started"). And CLI commands run in a tight loop in
one process leave no connections open behind them.
"""

from __future__ import annotations

import asyncio
import io
import logging
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import psycopg
import pytest

from grounded_agent import cli
from grounded_agent.store import KnowledgeStore, StoreSettings, open_store, vectorstore
from grounded_agent.store.errors import StoreBusy, StoreUnavailable, busy_reason

pytestmark = pytest.mark.integration


def _connections(url: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE backend_type = "
                           "'client backend'").fetchone()
        return int(row[0]) if row else 0


@contextmanager
def every_connection_taken(url: str) -> Iterator[list[psycopg.Connection[Any]]]:
    """Opens connections until the server refuses one for its limit; closes them on exit."""
    held: list[psycopg.Connection[Any]] = []
    try:
        while True:
            try:
                held.append(psycopg.connect(url, connect_timeout=5))
            except psycopg.OperationalError as exc:
                assert busy_reason(exc) is not None, exc  # control: the refusal is the limit
                break
            assert len(held) < 2_000, "no connection limit reached"
        yield held
    finally:
        for conn in held:
            conn.close()


@pytest.fixture
def store(pg_home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[KnowledgeStore]:
    """A store on the session's server, in its own table, which the CLI opens too."""
    table = f"kb_limit_{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv("GROUNDED_AGENT_HOME", str(pg_home))
    monkeypatch.setenv("GROUNDED_AGENT_KB_TABLE", table)
    monkeypatch.delenv("DATABASE_URL", raising=False)
    kb = open_store(StoreSettings(home=pg_home, database_url=None, embeddings="local",
                                  table_name=table))
    kb.ensure_schema()
    kb.run_sync(kb.aclose())  # no pooled connection left: the next call needs a new one
    yield kb
    kb.run_sync(kb.adrop())
    kb.run_sync(kb.aclose())


def test_a_connection_limit_reached_is_waited_out(store: KnowledgeStore, fault: Any,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    row = fault(19, "connection limit reached: waited out, then reported as such")
    caplog.set_level(logging.INFO)
    url = store.database_url()
    with every_connection_taken(url) as held:
        taken = len(held)
        # the first call waits; a thread frees the connections after 1.5 s
        loop_result: dict[str, Any] = {}

        async def call() -> None:
            t0 = time.perf_counter()
            loop_result["docs"] = await store.alist_documents()
            loop_result["s"] = time.perf_counter() - t0

        async def free_later() -> None:
            await asyncio.sleep(1.5)
            for conn in held[:5]:
                conn.close()

        async def both() -> None:
            await asyncio.gather(call(), free_later())

        asyncio.run(both())
    assert loop_result["docs"] == [] and loop_result["s"] >= 1.0, loop_result
    assert "connection limit" in caplog.text and "waiting" in caplog.text
    waited = loop_result["s"]

    # past the wait: a busy database, said so, by the API and by the CLI
    store.run_sync(store.aclose())
    with every_connection_taken(url), pytest.MonkeyPatch.context() as mp:
        mp.setattr(vectorstore, "CONNECT_RETRY_S", 1.0)
        with pytest.raises(StoreBusy) as busy:
            store.list_documents()
        assert isinstance(busy.value, StoreUnavailable)  # callers that catch it still do
        out, err = io.StringIO(), io.StringIO()
        with redirect_stdout(out), redirect_stderr(err):
            code = cli.main(["docs", "list"])
    assert code == 1
    assert "busy" in err.getvalue() and "connection limit" in err.getvalue(), err.getvalue()
    assert "could not be started" not in err.getvalue()
    row.record(
        saw=f"{taken} connections taken by the test until the server refused one; a call "
        f"waited {waited:.1f}s and succeeded once 5 were freed; past the wait, StoreBusy and the "
        f"CLI said: {err.getvalue().strip().splitlines()[-1]!r}",
        logged="INFO: '... connection limit ...: waiting ...'",
        control="every_connection_taken asserts the refusal it stops at is the limit",
        connections_taken=taken, waited_s=round(waited, 1),
    )


def test_cli_commands_in_a_tight_loop_leave_no_connection_open(
    store: KnowledgeStore, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, fault: Any,
) -> None:
    row = fault(19, "CLI commands in a tight loop, in one process")
    (tmp_path / "a.md").write_text("# Price\n\nThe Pro plan costs 49 EUR.\n", encoding="utf-8")
    url = store.database_url()
    before = _connections(url)
    runs = 0
    started = time.perf_counter()
    for i in range(60):
        argv = [["docs", "list"], ["docs", "remove", "--", "price"], ["docs", "show", "a"],
                ["ingest", str(tmp_path)]][i % 4]
        with redirect_stdout(io.StringIO()), redirect_stderr(io.StringIO()):
            code = cli.main(argv)
        assert code in (0, 1), (argv, code)
        runs += 1
    after = _connections(url)
    assert after - before <= 2, (before, after)
    # control: without closing each command's store, the same loop leaves connections open
    close = cli._close_command_stores
    monkeypatch.setattr(cli, "_close_command_stores", lambda: None)
    for _ in range(6):
        with redirect_stdout(io.StringIO()), redirect_stderr(io.StringIO()):
            cli.main(["docs", "list"])
    leaked = _connections(url) - after
    close()
    assert leaked >= 6, leaked
    row.record(saw=f"{runs} commands in {time.perf_counter() - started:.1f}s: client "
               f"connections {before} before, {after} after",
               control=f"counted in pg_stat_activity; without closing, 6 commands left "
               f"{leaked} open")
