"""Row 13: what an operator sees in the log of a plain `grounded-agent serve` (issue 26).

The logging is the CLI's own `serve_logging(verbose=False)`; the server is uvicorn on loopback.
One WARNING line per shed (503) request and per client that hung up (its run cancelled: no
further model call), and the whole traceback of a 500 under the incident id its body names, with
the secrets of the environment redacted. Nothing at INFO.
"""

from __future__ import annotations

import io
import logging
import re
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from grounded_agent import cli
from grounded_agent.graph.builder import build_graph
from grounded_agent.serve.app import ServeSettings, create_app
from tests.faults.test_endpoint import _model, dead_store
from tests.faults.test_sources import QUESTION, FlakyStore, kb_tool
from tests.support.serving import serving

pytestmark = pytest.mark.integration

SECRET = "sk-operator-log-0123456789abcdef"


@pytest.fixture
def serve_log() -> Iterator[io.StringIO]:
    """The root logger as `grounded-agent serve` sets it up, writing into a buffer."""
    root = logging.getLogger()
    level = root.level
    stream = io.StringIO()
    handler = cli.serve_logging(False, stream)
    try:
        yield stream
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


class _FailingGraph:
    """A graph whose run fails with the environment's API key in the message."""

    async def ainvoke(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(f"provider said: Incorrect API key provided: {SECRET}")


def _slow_app(model: Any) -> Any:
    graph = build_graph(chat_model=model, tools={"knowledge_base": kb_tool(FlakyStore(["ok"]))})
    return create_app(graph, store=dead_store(), settings=ServeSettings(max_concurrency=1),
                      threads=False)


def test_serve_logs_each_shed_hung_up_and_failed_request(
    fault: Any, serve_log: io.StringIO, monkeypatch: pytest.MonkeyPatch
) -> None:
    row = fault(13, "operator's log of a plain `serve`: shed, hung-up and failed requests")
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    model = _model()  # each model call takes 0.5 s and is counted as it starts
    with serving(_slow_app(model)) as base:
        # a client that gives up after 0.3 s: the model's first call is running
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(f"{base}/agent/invoke", json={"input": {"question": QUESTION}},
                       timeout=0.3)
        at_hangup = model.started
        time.sleep(2.0)  # a run left going would make its second call by now
        after = model.started
    codes: list[int] = []
    with serving(_slow_app(_model())) as base:
        # two at once on one slot: one runs, one is shed
        held = threading.Thread(target=lambda: codes.append(httpx.post(
            f"{base}/agent/invoke", json={"input": {"question": QUESTION}}, timeout=30
        ).status_code))
        held.start()
        time.sleep(0.3)
        codes.append(httpx.post(f"{base}/agent/invoke",
                                json={"input": {"question": QUESTION}}, timeout=30).status_code)
        held.join()
    failing = create_app(_FailingGraph(), store=dead_store(),  # type: ignore[arg-type]
                         settings=ServeSettings(), threads=False)
    with serving(failing) as base:
        r = httpx.post(f"{base}/agent/invoke", json={"input": {"question": QUESTION}}, timeout=30)
    assert r.status_code == 500 and SECRET not in r.text
    incident = r.json()["incident"]
    text = serve_log.getvalue()
    assert sorted(codes) == [200, 503], codes
    assert at_hangup == 1 and after == at_hangup, (at_hangup, after)  # the run was cancelled
    lines = text.splitlines()
    shed = [x for x in lines if "request shed (503)" in x]
    hung = [x for x in lines if "request cancelled: the client hung up" in x]
    assert len(shed) == 1 and " WARNING " in shed[0], text
    assert len(hung) == 1 and " WARNING " in hung[0] and "/agent/invoke" in hung[0], text
    # the 500: its whole traceback under the incident id the client was given, redacted
    start = text.index(f"request failed (incident {incident}): Traceback (most recent call last)")
    failure = text[start:]
    assert "RuntimeError: provider said: Incorrect API key provided: [redacted]" in failure
    assert re.search(r'File ".*runnable\.py", line \d+, in ainvoke', failure), failure[:800]
    assert SECRET not in text
    assert " INFO " not in text and " DEBUG " not in text  # warnings by default
    # negative control: the CLI's one-line formatter (used before for serve) cut the 500 to
    # its first line, which names neither the error nor where it happened
    record = logging.LogRecord("grounded_agent.serve", logging.ERROR, __file__, 1,
                               "request failed (incident %s): %s", (incident, failure), None)
    cut = cli._OneLineFormatter("%(message)s").format(record)
    assert "RuntimeError" not in cut and "Traceback" in cut
    row.record(
        saw=f"a client gone after 0.3 s: model calls {at_hangup} at the hang-up, {after} 2 s "
        f"later; two requests on one slot: {sorted(codes)}; a failing run: 500 with incident "
        f"{incident}",
        logged=f"{len(shed)} shed line, {len(hung)} hang-up line, the 500's traceback "
        f"({failure.count(chr(10)) + 1} lines) under its incident id, the key [redacted]; "
        "nothing at INFO",
        control="the one-line formatter serve used before cuts the traceback to its first line",
    )
