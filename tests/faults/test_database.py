"""Row 5: the embedded PostgreSQL stops while the endpoint runs, then starts again.

The endpoint is the app `grounded-agent serve` runs (create_app under uvicorn, here in a thread)
on a store of its own embedded server, so stopping that server disturbs no other test. While it
is down: knowledge-base questions are `unavailable` (never not_found, never a 500) and /healthz
is 503; threaded questions get 503 `unavailable` (invoke) or an unavailable result (stream).
Started again: the very next request succeeds, with no restart of the endpoint."""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from grounded_agent.graph.builder import build_graph
from grounded_agent.serve.app import ServeSettings, create_app
from grounded_agent.store import KnowledgeStore, StoreSettings, open_store
from grounded_agent.store.ingest import ingest_paths
from grounded_agent.store.server import ensure_embedded_server, stop_embedded_server
from tests.faults.conftest import logged
from tests.faults.test_sources import PRO, QUESTION
from tests.integration.conftest import server_home
from tests.support.serving import serving

pytestmark = pytest.mark.integration

PRICE_LIST = f"""---
id: pricing
title: Price list
document_date: 2026-01-15
---
# Price list

## Pro plan
{PRO}
"""


@pytest.fixture(scope="module")
def own_home() -> Iterator[Path]:
    with server_home("ga-faults-pg-") as home:
        ensure_embedded_server(home)
        yield home


@pytest.fixture(scope="module")
def store(own_home: Path) -> Iterator[KnowledgeStore]:
    settings = StoreSettings(home=own_home, database_url=None, embeddings="local",
                             table_name="kb_faults", connect_timeout_s=2.0)
    kb = open_store(settings, table_name="kb_faults")  # the bundled local embeddings
    docs = own_home / "docs"
    docs.mkdir(exist_ok=True)
    (docs / "pricing.md").write_text(PRICE_LIST, encoding="utf-8")
    report = ingest_paths([docs], kb)
    assert report.chunks and not report.errors, report
    yield kb
    ensure_embedded_server(own_home)
    kb.close()


def _sse_last(text: str) -> dict[str, Any]:
    data = [json.loads(line[5:]) for line in text.splitlines() if line.startswith("data:")]
    return data[-1] if data else {}


def assert_unavailable_not_absent(code: int, body: dict[str, Any]) -> None:
    assert code != 500 and body.get("error") != "internal_error", body
    out = body.get("output", body)
    if code == 200:
        assert out["status"] == "unavailable", out["status"]
        assert "could not find" not in out["answer"].lower()
    else:
        assert code == 503 and body["error"] == "unavailable", body


def test_database_stopped_then_started_under_the_endpoint(
    own_home: Path, store: KnowledgeStore, fault: Any, caplog: pytest.LogCaptureFixture
) -> None:
    row = fault(5, "embedded PostgreSQL stopped under the endpoint, then started")
    caplog.set_level(logging.INFO)
    app = create_app(build_graph(chat_model=None, store=store), store=store,
                     settings=ServeSettings())
    thread = f"t-{uuid.uuid4().hex[:8]}"
    ask = {"input": {"question": QUESTION, "sources": ["knowledge_base"]}}
    threaded = {**ask, "config": {"configurable": {"thread_id": thread}}}
    seen: dict[str, Any] = {}
    with serving(app) as base, httpx.Client(base_url=base, timeout=60) as c:
        first = c.post("/agent/invoke", json=threaded)
        assert first.status_code == 200, first.text
        assert first.json()["output"]["status"] in ("answered", "answered_with_caveat")

        stop_embedded_server(own_home)
        down: list[tuple[str, int, dict[str, Any], float]] = []
        for label, body, path in [
            ("invoke", ask, "/agent/invoke"),
            ("invoke thread", threaded, "/agent/invoke"),
            ("invoke thread again", threaded, "/agent/invoke"),
            ("stream", ask, "/agent/stream"),
            ("stream thread", threaded, "/agent/stream"),
        ]:
            t0 = time.monotonic()
            r = c.post(path, json=body)
            payload = _sse_last(r.text) if "stream" in path else r.json()
            down.append((label, r.status_code, payload, time.monotonic() - t0))
        health_down = c.get("/healthz")
        for _label, code, payload, _ in down:
            assert_unavailable_not_absent(code, payload)
        assert health_down.status_code == 503
        seen["down"] = ", ".join(
            f"{label} {code} {payload.get('output', payload).get('status') or payload.get('error')}"
            f" {took:.2f}s"
            for label, code, payload, took in down
        )

        ensure_embedded_server(own_home)
        t0 = time.monotonic()
        again = c.post("/agent/invoke", json=ask)  # the very next request
        took = time.monotonic() - t0
        again_thread = c.post("/agent/invoke", json=threaded)
        stream_again = c.post("/agent/stream", json=threaded)
        health_up = c.get("/healthz")
    assert again.status_code == 200 and again.json()["output"]["status"] == "answered"
    assert again_thread.status_code == 200, again_thread.text
    assert again_thread.json()["output"]["status"] == "answered"
    assert _sse_last(stream_again.text)["status"] == "answered"
    assert health_up.status_code == 200
    # negative control: a dead database read as "nothing found" is rejected by the same check
    wrong = {"output": {"status": "not_found",
                        "answer": "I could not find an answer to this question."}}
    with pytest.raises(AssertionError):
        assert_unavailable_not_absent(200, wrong)
    with pytest.raises(AssertionError):
        assert_unavailable_not_absent(500, {"error": "internal_error"})
    row.record(
        saw=f"down: {seen['down']}; healthz {health_down.status_code}; restarted: next request "
        f"{again.json()['output']['status']} in {took:.2f}s, threaded "
        f"{again_thread.json()['output']['status']}, healthz {health_up.status_code}",
        logged=logged(caplog, "database", "unavailable", level=logging.WARNING),
        control="assert_unavailable_not_absent rejects not_found and 500",
    )
