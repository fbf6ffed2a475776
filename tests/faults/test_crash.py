"""Rows 6 and 7: processes killed with SIGKILL, as a crash or an OOM killer would.

Row 6: `grounded-agent serve` killed during a threaded run, started again, the same thread_id
asked again: the turn completes once, no duplicate answer, no orphaned tool message, the earlier
turn intact.
Row 7: `grounded-agent ingest` killed while it writes, then run again: no half-written document,
no duplicate chunk, term statistics equal to a recount; two ingests of one folder at once: one
consistent result, and the second embeds nothing the first wrote.

Real processes and the real embedded PostgreSQL of a home of their own: heavy (make faults)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from grounded_agent.grounding.text import terms
from grounded_agent.store import StoreSettings, open_store
from grounded_agent.store.ingest import load_file, to_record
from grounded_agent.store.records import passage_text
from grounded_agent.store.server import ensure_embedded_server
from tests.e2e.conftest import ROOT, child_env, free_port
from tests.integration.conftest import server_home
from tests.support.openai_double import ModelDouble

pytestmark = [pytest.mark.heavy, pytest.mark.e2e, pytest.mark.slow]


@pytest.fixture(scope="module")
def home() -> Iterator[Path]:
    with server_home("ga-faults-crash-") as h:
        ensure_embedded_server(h)
        yield h


def _table(home: Path) -> tuple[str, str]:
    store = open_store(StoreSettings(home=home, database_url=None, embeddings="local",
                                     table_name=None))
    return store.table_name, store.terms_table


def _sql(home: Path, query: str, *params: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(ensure_embedded_server(home), autocommit=True) as conn:
        exists = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (_table(home)[0],)).fetchone()
        if not exists or not exists[0]:
            return []
        return list(conn.execute(query, params).fetchall())


# --- row 6: the server killed during a threaded run ------------------------------------------


def _serve(home: Path, port: int, model_url: str, log: Path) -> subprocess.Popen[bytes]:
    env = {**child_env(home), "OPENAI_BASE_URL": model_url,
           "OPENAI_API_KEY": "sk-faults-crash-0123456789"}
    with log.open("ab") as fh:
        proc = subprocess.Popen(
            [sys.executable, "-m", "grounded_agent.cli", "serve", "--port", str(port)],
            env=env, cwd=ROOT, stdout=fh, stderr=subprocess.STDOUT,
        )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200:
                return proc
        except httpx.HTTPError:
            pass
        assert proc.poll() is None, log.read_text()[-2000:]
        time.sleep(0.3)
    proc.kill()
    raise AssertionError("the server did not start")


def _invoke(port: int, question: str, thread: str, timeout: float = 300) -> httpx.Response:
    return httpx.post(
        f"http://127.0.0.1:{port}/agent/invoke",
        json={"input": {"question": question, "sources": ["knowledge_base"]},
              "config": {"configurable": {"thread_id": thread}}},
        timeout=timeout,
    )


async def _thread_state(home: Path, thread: str) -> Any:
    from grounded_agent.checkpoint import open_checkpointer
    from grounded_agent.graph.builder import build_graph

    async with open_checkpointer(ensure_embedded_server(home)) as saver:
        graph = build_graph(chat_model=None, tools={}, checkpointer=saver)
        return await graph.aget_state({"configurable": {"thread_id": thread}})


def assert_turns(state: Any, questions: list[str]) -> None:
    history = state.values.get("history") or []
    assert [h["question"] for h in history] == questions, history
    messages = state.values.get("messages") or []
    called = {c["id"] for m in messages if m.type == "ai" for c in (m.tool_calls or [])}
    answered = [m.tool_call_id for m in messages if m.type == "tool"]
    assert set(answered) <= called, "a tool message answers no call"
    assert len(answered) == len(set(answered)), "a tool call answered twice"


async def test_server_killed_during_a_threaded_run(
    home: Path, tmp_path: Path, fault: Any
) -> None:
    row = fault(6, "kill -9 of `grounded-agent serve` mid-run, then the same thread_id")
    double = ModelDouble()
    log = tmp_path / "serve.log"
    thread = f"crash-{os.getpid()}"
    first_q, second_q = "What does the Pro plan cost?", "And what does the Team plan cost?"
    with double.serve() as model_url:
        port = free_port()
        server = _serve(home, port, model_url, log)
        try:
            first = _invoke(port, first_q, thread)
            assert first.status_code == 200, first.text
            first_answer = first.json()["output"]["answer"]
            # the second turn hangs in its rewrite step: the kill lands mid-run, after its
            # first tool round was checkpointed
            double.configure(latency_s=60.0, latency_steps=("reformulate_query",))
            import threading

            pending: dict[str, Any] = {}
            t = threading.Thread(target=lambda: pending.update(
                r=_safe_invoke(port, second_q, thread)), daemon=True)
            t.start()
            await asyncio.to_thread(_wait_for_step, double, "reformulate_query", 120.0)
            assert "reformulate_query" in double.steps(), double.steps()
            mid = await _thread_state(home, thread)
            server.send_signal(signal.SIGKILL)
            server.wait(timeout=30)
            t.join(timeout=30)
        finally:
            if server.poll() is None:
                server.kill()
        assert isinstance(pending.get("r"), Exception)  # the client saw the connection die
        double.configure()
        port = free_port()
        server = _serve(home, port, model_url, log)
        try:
            again = _invoke(port, second_q, thread)
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait(timeout=30)
    assert again.status_code == 200, again.text
    # a completed turn, whatever its status (a first search on a cold, loaded machine may time
    # out and say unavailable: the turn still ends once, with its answer node)
    out = again.json()["output"]
    assert out["status"] in ("answered", "answered_with_caveat", "partial", "not_found",
                             "unavailable")
    assert out["trail"][-1]["node"] == "answer"
    state = await _thread_state(home, thread)
    assert_turns(state, [first_q, second_q])  # once each, in order
    assert state.values["history"][0]["answer"] == (first_answer if first.json()["output"][
        "citations"] else "")  # the earlier turn intact
    wrong = type("S", (), {"values": {**state.values,
                                      "history": [*state.values["history"],
                                                  state.values["history"][-1]]}})()
    with pytest.raises(AssertionError):
        assert_turns(wrong, [first_q, second_q])
    reports = ", ".join(f"{x['source']} {x['status']}" for x in out["sources"])
    row.record(
        saw=f"turn 1 200; killed mid-turn 2 (checkpointed at '{mid.next}'); turn 2 again: "
        f"{again.status_code} {out['status']} "
        f"({reports}); history "
        f"{len(state.values['history'])} turns",
        logged="server log: " + (log.read_text()[-160:].strip().replace("\n", " | ") or "-"),
        control="a duplicated turn is rejected by the same check",
    )


def _wait_for_step(double: ModelDouble, step: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while step not in double.steps() and time.monotonic() < deadline:
        time.sleep(0.1)


def _safe_invoke(port: int, question: str, thread: str) -> Any:
    try:
        return _invoke(port, question, thread, timeout=120)
    except httpx.HTTPError as exc:
        return exc


# --- row 7: ingestion killed, and two at once ------------------------------------------------

DOCS = 60


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("crash_corpus")
    for i in range(DOCS):
        body = "\n\n".join(
            f"Clause {i}.{j}: the service tier number {i} includes item {j} with a "
            f"response time of {i + j} hours and a quota of {i * j + 7} tickets per month. "
            + " ".join(f"term{i}x{j}x{k}" for k in range(40))
            for j in range(2)
        )
        (folder / f"doc_{i:03d}.md").write_text(
            f"---\nid: doc-{i:03d}\ntitle: Service tier {i}\n---\n# Service tier {i}\n\n{body}\n",
            encoding="utf-8",
        )
    return folder


def _expected(corpus: Path) -> dict[str, int]:
    out = {}
    for path in sorted(corpus.glob("*.md")):
        docs, _ = load_file(path)
        for doc in docs:
            out[doc.doc_id] = len(to_record(doc).chunks)
    return out


def _ingest(home: Path, corpus: Path, **kw: Any) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "grounded_agent.cli", "ingest", str(corpus), "--json"],
        env=child_env(home), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, **kw,
    )


def assert_consistent(home: Path, expected: dict[str, int], complete: bool) -> Counter[str]:
    table, terms_table = _table(home)
    chunks = Counter(
        r[0] for r in _sql(home, f'SELECT doc_id FROM "{table}"')
    )
    assert set(chunks) <= set(expected)
    for doc_id, n in chunks.items():  # never half a document
        assert n == expected[doc_id], (doc_id, n, expected[doc_id])
    dupes = _sql(home, f'SELECT doc_id, chunk_index FROM "{table}" '
                       "GROUP BY doc_id, version, chunk_index HAVING count(*) > 1")
    assert dupes == []
    if complete:
        assert set(chunks) == set(expected)
    # the term statistics are exactly a recount of the chunks stored
    rows = _sql(home, f'SELECT title, section, content FROM "{table}"')
    recount: Counter[str] = Counter()
    for title, section, content in rows:
        recount.update(set(terms(passage_text(title, section, content))))
    recount[""] = len(rows)
    stored = {t: df for t, df in _sql(home, f'SELECT term, df FROM "{terms_table}" WHERE df <> 0')}
    assert stored == {t: n for t, n in recount.items() if n}, "term statistics drifted"
    return chunks


def _drop(home: Path) -> None:
    table, terms_table = _table(home)
    with psycopg.connect(ensure_embedded_server(home), autocommit=True) as conn:
        conn.execute(f'DROP TABLE IF EXISTS "{table}"')
        conn.execute(f'DROP TABLE IF EXISTS "{terms_table}"')


def test_ingest_killed_while_writing_then_again(home: Path, corpus: Path, fault: Any) -> None:
    row = fault(7, "kill -9 of `grounded-agent ingest` while it writes, then ingest again")
    _drop(home)
    expected = _expected(corpus)
    table, _ = _table(home)
    proc = _ingest(home, corpus)
    at_kill = 0
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and proc.poll() is None:
        rows = _sql(home, f'SELECT count(DISTINCT doc_id) FROM "{table}"')
        at_kill = int(rows[0][0]) if rows else 0
        if at_kill > 0:
            proc.send_signal(signal.SIGKILL)
            break
        time.sleep(0.02)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL, "the ingest finished before it could be killed"
    written = assert_consistent(home, expected, complete=False)
    again = _ingest(home, corpus)
    out, err = again.communicate(timeout=900)
    assert again.returncode == 0, err[-2000:]
    report = json.loads(out)
    final = assert_consistent(home, expected, complete=True)
    assert report["skipped"] == len(written) and report["added"] == DOCS - len(written)
    # negative control: half a document is caught
    with pytest.raises(AssertionError):
        assert_consistent(home, {**expected, next(iter(written)): 99}, complete=True)
    row.record(
        saw=f"killed with {len(written)}/{DOCS} documents written (whole ones, 0 duplicates); "
        f"again: exit 0, {report['added']} added, {report['skipped']} skipped, "
        f"{sum(final.values())} chunks, term statistics = recount",
        logged=(err.strip().splitlines() or ["-"])[-1][:160],
        control="a half-written document is caught by the same check",
    )


def test_two_ingests_of_one_folder_at_once(home: Path, corpus: Path, fault: Any) -> None:
    row = fault(7, "two `grounded-agent ingest` of one folder at once")
    _drop(home)
    expected = _expected(corpus)
    first, second = _ingest(home, corpus), _ingest(home, corpus)
    (out1, err1), (out2, err2) = first.communicate(timeout=900), second.communicate(timeout=900)
    assert first.returncode == 0 and second.returncode == 0, (err1[-1000:], err2[-1000:])
    reports = sorted((json.loads(out1), json.loads(out2)), key=lambda r: r["chunks"])
    final = assert_consistent(home, expected, complete=True)
    skipper, writer = reports
    assert skipper["chunks"] == 0 and skipper["skipped"] == DOCS  # it waited, then skipped all
    assert writer["added"] == DOCS
    assert skipper["embedding_seconds"] < 1.0  # nothing embedded twice
    row.record(
        saw=f"both exit 0; one added {writer['added']} ({writer['embedding_seconds']:.1f}s "
        f"embedding), the other skipped {skipper['skipped']} "
        f"({skipper['embedding_seconds']:.2f}s embedding); {sum(final.values())} chunks",
        control="skipped == documents and no second embedding",
    )
