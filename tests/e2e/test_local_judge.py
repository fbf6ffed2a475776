"""The offline agent with the local judge (issue 47): Qwen2.5-Coder-1.5B-Instruct served by
llama-server (`scripts/local_model.py serve --model qwen2.5-coder-1.5b-instruct --judge`), the
sample knowledge base ingested by the real CLI, questions through the Python API with
GROUNDED_AGENT_LOCAL_JUDGE_URL set and no chat model.

Skipped unless GROUNDED_AGENT_TEST_LOCAL_MODEL=1 and `make local-model` has built the server and
assembled the 1.5B model (`make test-local` does both). What is asserted holds for any competent
judge, not one score: a question the knowledge base answers is answered, citing the right document,
with the local judge's gate named in the trail; questions whose documents are related but do not state the
answer are not answered; and a judge URL where nothing listens gives what the trained judge alone
gives, with the trail saying so.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import LOCAL_MODEL_SCRIPT, ROOT, child_env, free_port, local_model_server
from tests.support.benchmarks import load_script

pytestmark = [
    pytest.mark.e2e, pytest.mark.slow, pytest.mark.local_model,
    pytest.mark.skipif(os.environ.get("GROUNDED_AGENT_TEST_LOCAL_MODEL") != "1",
                       reason="set GROUNDED_AGENT_TEST_LOCAL_MODEL=1 (make test-local)"),
]

SCRIPT = LOCAL_MODEL_SCRIPT
LOCAL = load_script(SCRIPT)
JUDGE_MODEL = "qwen2.5-coder-1.5b-instruct"
PRICE = ("How much does the Pro plan cost per user per month?", "lumenary-pricing", "29")
UNSTATED = ("Does Lumenary offer a free trial of the Pro plan?",
            "Which payment methods does Lumenary accept?")
ANSWERED = ("answered", "answered_with_caveat", "partial")
ASK = (
    "import json, sys; from grounded_agent import ask\n"
    "for q in sys.argv[1:]:\n"
    "    print(json.dumps(ask(q).model_dump(mode='json')))\n"
)


@pytest.fixture(scope="module")
def judge_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """llama-server with the 1.5B model; its base URL without /v1 (what the setting takes)."""
    why = LOCAL.ready("llama-server", JUDGE_MODEL)
    if why is not None:
        pytest.skip(why)
    log = tmp_path_factory.mktemp("local-judge") / "server.log"
    with local_model_server(["--model", JUDGE_MODEL, "--judge"], log, timeout_s=240) as lines:
        assert lines[1].strip() == f"GROUNDED_AGENT_MODEL={JUDGE_MODEL}"
        url = lines[0].strip().removesuffix("/v1")
        props = json.loads(urllib.request.urlopen(f"{url}/props", timeout=10).read())
        # `--judge`: one slot, sized for the judge's prompts (not the chat model's three)
        assert props["total_slots"] == 1
        assert props["default_generation_settings"]["n_ctx"] == LOCAL.JUDGE_CONTEXT_TOKENS
        yield url


JUDGE_TIMEOUT_S = "180"
"""Here the judge itself is under test, not the machine's load: on two cores shared with other
work one sentence took 5-9 s (benchmarks/results/local-judge.md), past the 15 s a question has by
default, and the trained judge then decided (the fallback the other test and the unit tests
check)."""


def ask(home: Path, url: str | None, *questions: str) -> list[dict[str, Any]]:
    env = child_env(home)
    if url is not None:
        env["GROUNDED_AGENT_LOCAL_JUDGE_URL"] = url
        env["GROUNDED_AGENT_LOCAL_JUDGE_TIMEOUT_S"] = JUDGE_TIMEOUT_S
    done = subprocess.run([sys.executable, "-c", ASK, *questions], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads(line) for line in done.stdout.strip().splitlines()[-len(questions):]]


def judged(out: dict[str, Any]) -> str:
    return " ".join(t["detail"] for t in out["trail"] if t["node"] == "score_confidence")


def test_the_local_judge_answers_what_is_stated_and_not_what_is_not(
    ingested_home: Path, judge_url: str
) -> None:
    price, *unstated = ask(ingested_home, judge_url, PRICE[0], *UNSTATED)
    assert price["status"] in ANSWERED, (price["answer"], price["trail"])
    assert price["citations"] and price["citations"][0]["source_id"] == PRICE[1]
    assert PRICE[2] in price["answer"]
    assert "local gate decided" in judged(price), price["trail"]  # the default rule
    for out in unstated:
        assert out["status"] not in ANSWERED, (out["question"], out["answer"])
    assert price["usage"]["llm_calls"] == 0  # offline: the judge is no chat model call


def test_a_judge_where_nothing_listens_gives_the_trained_judges_outcome(
    ingested_home: Path,
) -> None:
    nowhere = f"http://127.0.0.1:{free_port()}"
    questions = (PRICE[0], *UNSTATED)
    alone = ask(ingested_home, None, *questions)
    down = ask(ingested_home, nowhere, *questions)
    for a, d in zip(alone, down, strict=True):
        assert (d["status"], d["answer"]) == (a["status"], a["answer"])
    assert "local judge unavailable" in judged(down[0]) and "trained judge decided" in judged(down[0])
