"""Row 11: a crowd on the endpoint. N concurrent requests ($GA_LOAD_REQUESTS: 60 in the normal
suite, 200 under `make faults`) against the served app with the model double answering every
call after 200 ms over HTTP, the real knowledge-base tool on PostgreSQL, and every other request
in a conversation thread (checkpoints on the same database).

Every request completes (200) or is shed (503 with Retry-After); no other status. Peak RSS and
peak database connections are measured and bounded; no answer carries another request's
question, and no thread holds another thread's turn."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import httpx
import psutil
import pytest

from grounded_agent.checkpoint import POOL_MAX_SIZE, open_checkpointer
from grounded_agent.graph.builder import build_graph
from grounded_agent.llm.structured import forget_methods
from grounded_agent.serve.app import ServeSettings, create_app
from grounded_agent.store import KnowledgeStore
from tests.support.openai_double import ModelDouble
from tests.support.serving import serving

pytestmark = pytest.mark.integration

REQUESTS = int(os.environ.get("GA_LOAD_REQUESTS", "60"))
MODEL_LATENCY_S = 0.2
MAX_CONCURRENCY = 64
RSS_BOUND_MIB = 1024
"""Peak growth allowed over the process's size before the load (it holds the embedding-free
test stack, the double and the endpoint)."""


@pytest.fixture
def model(monkeypatch: pytest.MonkeyPatch) -> Iterator[ModelDouble]:
    double = ModelDouble()
    double.configure(latency_s=MODEL_LATENCY_S)
    with double.serve() as base_url:
        monkeypatch.setenv("OPENAI_BASE_URL", base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-faults-load-0123456789")
        forget_methods()
        yield double
        forget_methods()


class Sampler:
    """Peak RSS of this process and peak connections to the database, sampled every 50 ms."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.rss = self.connections = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        import psycopg

        proc = psutil.Process()
        with psycopg.connect(self.url, autocommit=True) as conn:
            while not self._stop.is_set():
                self.rss = max(self.rss, proc.memory_info().rss)
                row = conn.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                    "AND pid <> pg_backend_pid()"
                ).fetchone()
                self.connections = max(self.connections, int(row[0]) if row else 0)
                time.sleep(0.05)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


async def _fire(base: str, n: int) -> list[tuple[int, str, dict[str, Any], str | None]]:
    limits = httpx.Limits(max_connections=n, max_keepalive_connections=n)
    async with httpx.AsyncClient(base_url=base, timeout=120, limits=limits) as client:

        async def one(i: int) -> tuple[int, str, dict[str, Any], str | None]:
            question = f"What does plan number {i} cost per user?"
            body: dict[str, Any] = {"input": {"question": question}}
            thread = f"load-{i}" if i % 2 else None
            if thread:
                body["config"] = {"configurable": {"thread_id": thread}}
            r = await client.post("/agent/invoke", json=body)
            return r.status_code, question, r.json(), r.headers.get("retry-after")

        return await asyncio.gather(*(one(i) for i in range(n)))


def check_load(results: list[tuple[int, str, dict[str, Any], str | None]]) -> Counter[int]:
    """Completed (200, its own question) or shed (503, Retry-After); nothing else."""
    codes = Counter(code for code, *_ in results)
    assert set(codes) <= {200, 503}, codes
    for code, question, body, retry_after in results:
        if code == 503:
            assert retry_after and int(retry_after) > 0 and body["error"] == "overloaded"
        else:  # no answer belongs to another request
            assert body["output"]["question"] == question
    return codes


async def test_concurrent_requests_complete_or_are_shed(
    model: ModelDouble, fake_store: KnowledgeStore, fault: Any
) -> None:
    row = fault(11, f"load: {REQUESTS} concurrent requests, 200 ms model")
    graph = build_graph(store=fake_store)  # ChatOpenAI from the env; the real KB tool
    app = create_app(graph, store=fake_store,
                     settings=ServeSettings(max_concurrency=MAX_CONCURRENCY), threads=True)
    baseline = psutil.Process().memory_info().rss
    url = await asyncio.to_thread(fake_store.database_url)
    with serving(app) as base:
        # one request first: the saver, the pools and the schema exist before the crowd
        async with httpx.AsyncClient(base_url=base, timeout=60) as c:
            warm = await c.post("/agent/invoke", json={
                "input": {"question": "warm up"}, "config": {"configurable": {"thread_id": "w"}}})
        assert warm.status_code == 200, warm.text
        with Sampler(url) as sampler:
            started = time.monotonic()
            results = await _fire(base, REQUESTS)
            elapsed = time.monotonic() - started
    codes = check_load(results)
    assert codes[200] >= min(REQUESTS, MAX_CONCURRENCY) // 2
    # no thread holds another's turn
    async with open_checkpointer(store=fake_store) as saver:
        threaded = build_graph(store=fake_store, checkpointer=saver)
        for code, question, _, _ in results:
            i = int(question.split("number ")[1].split()[0])
            if code == 200 and i % 2:
                state = await threaded.aget_state({"configurable": {"thread_id": f"load-{i}"}})
                assert [h["question"] for h in state.values["history"]] == [question]
    grown_mib = (sampler.rss - baseline) / 2**20
    assert grown_mib < RSS_BOUND_MIB
    # the store's pool (5 + 5 overflow), the thread pool, the sampler and a little slack
    assert sampler.connections <= 10 + POOL_MAX_SIZE + 4
    # negative control: the same check rejects a 500, a shed request without Retry-After and
    # an answer to another request's question
    ok = (200, "q1", {"output": {"question": "q1"}}, None)
    for wrong in [(500, "q2", {"error": "internal_error"}, None),
                  (503, "q2", {"error": "overloaded"}, None),
                  (200, "q2", {"output": {"question": "q1"}}, None)]:
        with pytest.raises(AssertionError):
            check_load([ok, wrong])
    row.record(
        saw=f"{codes[200]} completed, {codes[503]} shed (503 + Retry-After), "
        f"{sum(v for k, v in codes.items() if k not in (200, 503))} other; {elapsed:.1f}s",
        logged=f"{len(model.requests)} model requests",
        control="check_load rejects a 500, a 503 without Retry-After, a crossed answer",
        requests=REQUESTS, completed=codes[200], shed=codes[503],
        peak_rss_mib=round(sampler.rss / 2**20), rss_growth_mib=round(grown_mib),
        peak_db_connections=sampler.connections,
    )
