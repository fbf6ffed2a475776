"""The agent with a real small model (Qwen2.5-Coder-0.5B-Instruct) served by llama.cpp's
llama-server, and by llama-cpp-python where that is built: `scripts/local_model.py serve`, the
sample knowledge base ingested by the real CLI, then the CLI, the Python API and the endpoint.

Skipped unless GROUNDED_AGENT_TEST_LOCAL_MODEL=1 and `make local-model` has built the server and
the model (`make test-local` does both, then runs this file). What is asserted holds for any competent model, not one reply's
words: an answerable question is answered with the right document cited and its figure in the
answer, a question the knowledge base cannot answer is not answered, no call failed or timed out
(no `model_unavailable`), and the server answered no request with HTTP 500.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import LOCAL_MODEL_SCRIPT, ROOT, child_env, free_port, local_model_server
from tests.support.benchmarks import load_script

pytestmark = [
    pytest.mark.e2e, pytest.mark.slow, pytest.mark.local_model,
    # minutes on two cores: run by `make test-local`, not by every `pytest` on a machine that
    # happens to have the model built
    pytest.mark.skipif(os.environ.get("GROUNDED_AGENT_TEST_LOCAL_MODEL") != "1",
                       reason="set GROUNDED_AGENT_TEST_LOCAL_MODEL=1 (make test-local)"),
]

SCRIPT = LOCAL_MODEL_SCRIPT
GROUNDED_AGENT = Path(sys.executable).parent / "grounded-agent"
ANSWERED = ("answered", "answered_with_caveat")
PRICE = ("How much does the Pro plan cost per user per month?", "lumenary-pricing", "29")
OFF_TOPIC = "What is the boiling point of mercury?"


LOCAL = load_script(SCRIPT)


@pytest.fixture(scope="module", params=LOCAL.ENGINES)
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Any]]:
    """`local_model.py serve` for one engine: its base URL, model name and log."""
    engine = str(request.param)
    why = LOCAL.ready(engine)
    if why is not None:
        pytest.skip(why)
    log = tmp_path_factory.mktemp(f"local-{engine}") / "server.log"
    with local_model_server(["--engine", engine], log, timeout_s=180) as lines:
        name = lines[1].strip().split("=", 1)[1]
        yield {"engine": engine, "base_url": lines[0].strip(), "model": name, "log": log}


LIMITS = {"GROUNDED_AGENT_TIME_BUDGET_S": "300", "GROUNDED_AGENT_MODEL_TIMEOUT_S": "120"}
"""Generous limits (defaults 45 s and 20 s): on a slow or shared CI machine a 0.5B model's cold
2,500-token prompt alone can take 20-30 s, and these tests check what the agent does with the
model's replies, not how fast two cores are (bench_local_model.py measures that)."""


def env_for(home: Path, server: dict[str, Any]) -> dict[str, str]:
    return {**child_env(home), "OPENAI_BASE_URL": server["base_url"],
            "OPENAI_API_KEY": "local", "GROUNDED_AGENT_MODEL": server["model"], **LIMITS}


def http_500s(server: dict[str, Any]) -> list[str]:
    """The server's 500s as its own log records them (llama-server logs no access lines, so a
    search for "POST ... 500" alone would find none there whatever happened)."""
    text = server["log"].read_text(errors="replace") if server["log"].is_file() else ""
    return list(LOCAL.http_500s(text))


def kinds(out: dict[str, Any]) -> list[str]:
    return [w["kind"] for w in out["warnings"]]


def check_answered(out: dict[str, Any], source_id: str, figure: str) -> None:
    assert out["status"] in ANSWERED, (out["answer"], out["trail"])
    assert out["citations"] and out["citations"][0]["source_id"] == source_id, out["citations"]
    assert figure in out["answer"], out["answer"]
    assert "model_unavailable" not in kinds(out), out["warnings"]


def test_the_python_api_answers_and_abstains(ingested_home: Path, server: dict[str, Any]) -> None:
    script = (
        "import json, sys; from grounded_agent import ask\n"
        "for q in sys.argv[1:]:\n"
        "    print(json.dumps(ask(q).model_dump(mode='json')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, PRICE[0], OFF_TOPIC],
        env=env_for(ingested_home, server), cwd=ROOT, capture_output=True, text=True, timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    price, off = (json.loads(line) for line in done.stdout.strip().splitlines()[-2:])
    check_answered(price, PRICE[1], PRICE[2])
    assert price["usage"]["llm_calls"] >= 1  # the model was asked, not bypassed
    assert off["status"] == "not_found" and not off["citations"], off["answer"]
    assert http_500s(server) == []


RECOMMENDED = {LOCAL.JUDGE_SUPPORT: "0", LOCAL.JUDGE_MODEL_ANSWERS: "1"}
"""What `serve` recommends for this model (docs/how-to/local-model.md): the CLI runs with it, the
Python API and the endpoint with the defaults."""


def test_the_cli_answers_through_the_local_model(
    ingested_home: Path, server: dict[str, Any]
) -> None:
    done = subprocess.run(
        [str(GROUNDED_AGENT), "ask", PRICE[0], "--json"],
        env={**env_for(ingested_home, server), **RECOMMENDED}, cwd=ROOT, capture_output=True,
        text=True, timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    check_answered(json.loads(done.stdout), PRICE[1], PRICE[2])
    assert http_500s(server) == []


def test_the_endpoint_answers_through_the_local_model(
    ingested_home: Path, server: dict[str, Any], tmp_path: Path
) -> None:
    from tests.e2e.conftest import stop_group
    from tests.e2e.test_llm_http import start_server

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with (tmp_path / "serve.log").open("w+") as log:
        proc = start_server([str(GROUNDED_AGENT), "serve", "--port", str(port)],
                            env_for(ingested_home, server), url, "/healthz", log)
        try:
            r = httpx.post(f"{url}/agent/invoke", json={"input": {"question": PRICE[0]}},
                           timeout=600)
        finally:
            stop_group(proc)
    assert r.status_code == 200, r.text
    check_answered(r.json()["output"], PRICE[1], PRICE[2])
    assert http_500s(server) == []
