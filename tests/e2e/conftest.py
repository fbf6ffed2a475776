"""End-to-end fixtures: a GROUNDED_AGENT_HOME with the sample knowledge base ingested, shared by
the `langgraph dev` and notebook tests, and its embedded server stopped at the end."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest

from grounded_agent.sample import SAMPLE_KB

ROOT = Path(__file__).resolve().parents[2]
LANGGRAPH = Path(os.environ.get("VIRTUAL_ENV") or ROOT / ".venv") / "bin" / "langgraph"
TINY_KB = """---
doc_id: tiny-pricing
title: Tiny price list
document_date: 2026-01-15
---
# Tiny price list

## Pro plan
The Pro plan costs 29 euros per user per month on monthly billing.
"""


def child_env(home: Path) -> dict[str, str]:
    """Environment of a child process: offline, no keys, this test's home and database."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "TAVILY_API_KEY", "DATABASE_URL",
                        "LANGSMITH_API_KEY", "LANGCHAIN_API_KEY", "GROUNDED_AGENT_API_KEY",
                        "GROUNDED_AGENT_KEYS_FILE")}
    env.update(GROUNDED_AGENT_HOME=str(home), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               LANGSMITH_TRACING="false", TOKENIZERS_PARALLELISM="false",
               GROUNDED_AGENT_SOURCES="knowledge_base")
    return env


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def stop_group(proc: subprocess.Popen[Any], timeout_s: float = 20) -> None:
    """Stop a server started with start_new_session=True and everything it spawned (langgraph
    dev's workers, llama-server under local_model.py): SIGTERM to its process group, then SIGKILL
    if it has not gone within `timeout_s`."""
    for sig, wait_s in ((signal.SIGTERM, timeout_s), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:  # the whole group has gone already
            return
        try:
            proc.wait(timeout=wait_s)
            return
        except subprocess.TimeoutExpired:
            continue


@contextlib.contextmanager
def langgraph_dev(config: Path, env: dict[str, str], log_path: Path) -> Iterator[str]:
    """`langgraph dev` serving `config` on a free port until the block ends: its URL. Skips where
    the CLI is not installed; fails with the server's log when it does not come up."""
    if not LANGGRAPH.exists():
        pytest.skip(f"{LANGGRAPH} is missing: install the dev extra (langgraph-cli[inmem])")
    port = free_port()
    log = log_path.open("w+")
    proc = subprocess.Popen(
        [str(LANGGRAPH), "dev", "--no-browser", "--no-reload", "--port", str(port),
         "--config", str(config)],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group, so its workers stop with it
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                if httpx.get(f"{url}/ok", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                log.seek(0)
                pytest.fail(f"langgraph dev did not come up:\n{log.read()[-3000:]}")
            time.sleep(0.5)
        yield url
    finally:
        stop_group(proc)
        log.close()


LOCAL_MODEL_SCRIPT = ROOT / "scripts" / "local_model.py"


@contextlib.contextmanager
def local_model_server(args: Sequence[str], log: Path, timeout_s: float) -> Iterator[list[str]]:
    """`scripts/local_model.py serve ARGS` until the block ends: the two lines it prints first
    (its base URL, then the model setting); fails with the server's log when they do not come."""
    proc = subprocess.Popen(
        [sys.executable, str(LOCAL_MODEL_SCRIPT), "serve", *args, "--log", str(log)],
        stdout=subprocess.PIPE, text=True, start_new_session=True,
    )
    lines: list[str] = []
    reader = threading.Thread(
        target=lambda: lines.extend(proc.stdout.readline() for _ in range(2))  # type: ignore[union-attr]
    )
    reader.start()
    reader.join(timeout=timeout_s)
    try:
        tail = log.read_text(errors="replace")[-2000:] if log.is_file() else ""
        assert len(lines) == 2 and lines[0].startswith("http://127.0.0.1:"), (lines, tail)
        yield lines
    finally:
        stop_group(proc, timeout_s=30)


@pytest.fixture(scope="session")
def kb_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The packaged sample knowledge base, or one tiny document when the sample is not there."""
    if SAMPLE_KB.is_dir() and any(SAMPLE_KB.glob("*.md")):
        return SAMPLE_KB
    path = tmp_path_factory.mktemp("tiny_kb")
    (path / "pricing.md").write_text(TINY_KB, encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def ingested_home(tmp_path_factory: pytest.TempPathFactory, kb_dir: Path) -> Iterator[Path]:
    """A home whose default table holds the knowledge base, ingested by the real CLI."""
    home = tmp_path_factory.mktemp("e2e_home")
    done = subprocess.run(
        [sys.executable, "-m", "grounded_agent.cli", "ingest", str(kb_dir)],
        env=child_env(home), cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    yield home
    from grounded_agent.store.server import stop_embedded_server

    stop_embedded_server(home)
