"""Rows 8 and 12, and the malformed bodies of row 10, against the endpoint over real HTTP.

Row 8: a client that hangs up mid-stream cancels its run: no model call starts after the
disconnect (counted by the model itself), the run is logged as cancelled, the slot is freed.
Row 12: under DEBUG logging and a run of faults, no API key, database password or credentialed
URL reaches the logs, an answer, an error body or the stream."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from grounded_agent.graph.builder import build_graph
from grounded_agent.serve.app import ServeSettings, create_app
from grounded_agent.store import StoreSettings, open_store
from tests.fakes import ScriptedChatModel, text, tool_call
from tests.faults.conftest import logged
from tests.faults.test_sources import QUESTION, FlakyStore, kb_tool
from tests.support.serving import serving

DB_PASSWORD = "pg-faults-s3cret-pw"
DEAD_DB = f"postgresql://agent:{DB_PASSWORD}@127.0.0.1:1/kb"


def dead_store() -> Any:
    from langchain_core.embeddings import DeterministicFakeEmbedding

    settings = StoreSettings(database_url=DEAD_DB, connect_timeout_s=1, query_timeout_s=3)
    return open_store(settings, embeddings=DeterministicFakeEmbedding(size=8))


class CountingModel(ScriptedChatModel):
    """Scripted replies, each after `delay_s`; counts calls as they start, so a call cut short
    by the cancellation still counts, and one that never starts does not."""

    delay_s: float = 0.5
    started: int = 0

    def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> Any:
        self.started += 1
        time.sleep(self.delay_s)
        return super()._generate(messages, stop, run_manager, **kwargs)


def _model() -> CountingModel:
    """Two model calls after prepare_question: the draft (a paraphrase) and its support
    judgement (one source and a question: the search is chosen without the model)."""
    return CountingModel(responses=[
        text("Each user on the Pro plan pays 49 EUR a month [1]."),
        tool_call("SupportJudgement", {"supported": [1]}),
    ])


def _stream_until(base: str, stop_after: int | None) -> list[str]:
    """Reads /agent/stream; hangs up after `stop_after` data events (None: reads to the end)."""
    events: list[str] = []
    with httpx.Client(base_url=base, timeout=30) as c, c.stream(
        "POST", "/agent/stream", json={"input": {"question": QUESTION}}
    ) as r:
        for line in r.iter_lines():
            if line.startswith("event:"):
                events.append(line[6:].strip())
                if stop_after is not None and events.count("data") >= stop_after:
                    break
    return events


# --- row 8 ------------------------------------------------------------------------------------


def test_client_disconnect_mid_stream_cancels_the_run(
    fault: Any, caplog: pytest.LogCaptureFixture
) -> None:
    row = fault(8, "client hangs up mid-stream")
    caplog.set_level(logging.INFO)
    model = _model()
    kb = kb_tool(FlakyStore(["ok"]))
    app = create_app(build_graph(chat_model=model, tools={"knowledge_base": kb}),
                     store=dead_store(), settings=ServeSettings(max_concurrency=1), threads=False)
    guard = next(m for m in app.user_middleware if m.cls.__name__ == "GuardMiddleware")
    assert guard  # the concurrency slot below proves the run ended
    with serving(app) as base:
        events = _stream_until(base, stop_after=1)  # after prepare_question: the model is next
        at_disconnect = model.started
        time.sleep(2.5)  # long enough for every remaining step of an uncancelled run
        after = model.started
        # the single concurrency slot is free again: the cancelled run released it
        follow = httpx.post(f"{base}/agent/invoke",
                            json={"input": {"question": QUESTION}}, timeout=30)
    assert after <= at_disconnect + 1  # at most the call already in flight, then nothing
    assert follow.status_code != 503
    assert "run cancelled" in caplog.text
    # negative control: the same run with a client that stays makes every call
    control = _model()
    app2 = create_app(build_graph(chat_model=control, tools={"knowledge_base": kb}),
                      store=dead_store(), settings=ServeSettings(), threads=False)
    with serving(app2) as base2:
        full = _stream_until(base2, stop_after=None)
    assert control.started == 2 and full[-1] == "end"  # the judgement is skipped: local signals
    assert after < control.started
    row.record(
        saw=f"stream closed after {events.count('data')} event; model calls started: "
        f"{at_disconnect} at the disconnect, {after} 2.5s later (a full run: {control.started})",
        logged=logged(caplog, "run cancelled", level=logging.WARNING),
        control=f"a client that stays: {control.started} calls, stream ends with '{full[-1]}'",
    )


# --- row 12 -----------------------------------------------------------------------------------

SECRETS = {
    "OPENAI_API_KEY": "sk-faults-openai-0123456789abcdef",
    "TAVILY_API_KEY": "tvly-faults-0123456789abcdef",
    "GROUNDED_AGENT_API_KEY": "ga-faults-endpoint-key-0123456789",
}


def leaks(text: str) -> list[str]:
    found = [name for name, value in SECRETS.items() if value in text]
    if DB_PASSWORD in text:
        found.append("database password")
    if DEAD_DB in text:
        found.append("credentialed database URL")
    return found


@pytest.fixture
def debug_logs(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    caplog.set_level(logging.DEBUG)
    for name in ("httpx", "httpcore", "openai", "psycopg", "sqlalchemy", "uvicorn", "langserve"):
        logging.getLogger(name).setLevel(logging.DEBUG)
    yield caplog


def test_no_secret_under_faults_with_debug_logging(
    fault: Any, debug_logs: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    row = fault(12, "secrets under faults, DEBUG logging")
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    import respx

    from grounded_agent.llm.structured import forget_methods
    from grounded_agent.tools.web_search import make_web_search_tool
    from tests.support.openai_double import Fault, ModelDouble
    from tests.tool_fakes import KeywordScorer

    double = ModelDouble()
    outputs: list[str] = []
    with double.serve() as model_url:
        monkeypatch.setenv("OPENAI_BASE_URL", model_url)
        forget_methods()
        double.configure(faults=[Fault(status=401, message="Incorrect API key provided: "
                                       + SECRETS["OPENAI_API_KEY"])])
        with respx.mock(base_url="https://api.tavily.com", assert_all_called=False) as web:
            web.route(host="127.0.0.1").pass_through()
            web.post("/search").mock(return_value=httpx.Response(
                401, json={"detail": {"error": f"Unauthorized: key {SECRETS['TAVILY_API_KEY']}"}}
            ))
            tools = {
                "knowledge_base": kb_tool(FlakyStore(["timeout", "timeout"]), timeout_s=0.8),
                "web": make_web_search_tool(KeywordScorer(), timeout_s=2.0),
            }
            app = create_app(
                build_graph(tools=tools), store=dead_store(),
                settings=ServeSettings(api_key=SECRETS["GROUNDED_AGENT_API_KEY"]),
                threads=True, database_url=DEAD_DB,
            )
            headers = {"X-API-Key": SECRETS["GROUNDED_AGENT_API_KEY"]}
            body = {"input": {"question": QUESTION, "sources": ["knowledge_base", "web"]}}
            threaded = {**body, "config": {"configurable": {"thread_id": "t-secret"}}}
            with serving(app) as base, httpx.Client(base_url=base, timeout=60,
                                                    headers=headers) as c:
                for path, payload in [
                    ("/agent/invoke", body), ("/agent/stream", body),
                    ("/agent/invoke", threaded), ("/agent/stream", threaded),
                    ("/agent/batch", {"inputs": [body["input"]]}),
                ]:
                    r = c.post(path, json=payload)
                    outputs.append(f"{path} {r.status_code} {r.text}")
                outputs.append(c.get("/healthz").text)
                outputs.append(httpx.post(f"{base}/agent/invoke", json=body,
                                          headers={"X-API-Key": "wrong"}).text)
    seen = "\n".join(outputs)
    assert "unavailable" in seen and "rate_limit" not in seen
    log_text = debug_logs.text + "\n".join(
        str(r.args) + str(r.exc_text or "") for r in debug_logs.records
    )
    assert leaks(seen) == [], leaks(seen)
    assert leaks(log_text) == [], leaks(log_text)
    # negative control: the detector finds each secret where one is
    planted = " ".join([*SECRETS.values(), DEAD_DB])
    assert set(leaks(planted)) == {*SECRETS, "database password", "credentialed database URL"}
    row.record(
        saw=f"{len(outputs)} responses, 0 secrets; statuses: "
        + ", ".join(o.split(" ", 2)[1] for o in outputs[:5]),
        logged=f"{len(debug_logs.records)} DEBUG+ records, 0 secrets",
        control="the leak detector finds every planted secret",
    )

