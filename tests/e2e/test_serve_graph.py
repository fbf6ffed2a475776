"""`grounded-agent serve --graph module:attribute`: a user's own graph (a vector store of their
own as its source) behind the same endpoint, in its own process, over real HTTP."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.e2e.conftest import ROOT, child_env, free_port, stop_group
from tests.e2e.test_llm_http import GROUNDED_AGENT, start_server

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

USER_APP = '''
from langchain_core.documents import Document
from langchain_core.vectorstores import InMemoryVectorStore

from grounded_agent import build_graph
from grounded_agent.sources import from_vectorstore
from grounded_agent.store.embeddings import local_embeddings

vs = InMemoryVectorStore(local_embeddings())
vs.add_documents([
    Document(page_content="The Zephyr Kettle costs EUR 49 in our shop.",
             metadata={"title": "Price list", "source": "prices.md"}),
    Document(page_content="Parking is free for the first 90 minutes.",
             metadata={"title": "Parking", "source": "parking.md"}),
])
graph = build_graph(chat_model=None, tools={"my_docs": from_vectorstore(vs, name="my_docs")})
'''


@pytest.fixture(scope="module")
def user_app(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("user_app")
    (folder / "user_app.py").write_text(USER_APP, encoding="utf-8")
    return folder


def _env(home: Path) -> dict[str, str]:
    env = child_env(home)
    env.pop("GROUNDED_AGENT_SOURCES")  # the graph's own default: the source it was given
    return env


@pytest.fixture(scope="module")
def served_graph(user_app: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    home = tmp_path_factory.mktemp("serve_graph_home")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with (tmp_path_factory.mktemp("serve_graph") / "server.log").open("w+") as log:
        cmd = [str(GROUNDED_AGENT), "serve", "--port", str(port), "--graph", "user_app:graph"]
        env = {**_env(home), "PYTHONPATH": str(user_app)}
        proc = start_server(cmd, env, url, "/healthz", log)
        try:
            yield url
        finally:
            stop_group(proc)
            from grounded_agent.store.server import stop_embedded_server

            stop_embedded_server(home)


def test_serve_graph_answers_from_the_users_source(served_graph: str) -> None:
    r = httpx.post(f"{served_graph}/agent/invoke",
                   json={"input": {"question": "How much does the Zephyr Kettle cost?"}}, timeout=120)
    assert r.status_code == 200, r.text
    out = r.json()["output"]
    assert out["status"] == "answered" and "EUR 49" in out["answer"]
    assert [(c["source"], c["title"]) for c in out["citations"]] == [("my_docs", "Price list")]
    assert [s["source"] for s in out["sources"]] == ["my_docs"]


def test_serve_graph_keeps_the_contract(served_graph: str) -> None:
    """The endpoint's limits hold for a user's graph: a source it lacks is a 422, not a 500."""
    r = httpx.post(f"{served_graph}/agent/invoke", timeout=60,
                   json={"input": {"question": "Parking?", "sources": ["intranet"]}})
    assert r.status_code == 422, r.text
    assert "intranet" in r.text and "my_docs" in r.text
    named = httpx.post(f"{served_graph}/agent/invoke", timeout=120, json={
        "input": {"question": "What does the Zephyr Kettle cost?", "sources": ["my_docs"]}})
    assert named.status_code == 200 and "EUR 49" in named.json()["output"]["answer"]


@pytest.mark.parametrize("spec", ["user_app", "user_app:nothing", "json:dumps", "no_such_module:x"])
def test_serve_graph_that_names_no_graph_says_so(spec: str, user_app: Path, tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "grounded_agent.cli", "serve", "--graph", spec,
         "--port", str(free_port())],
        env={**_env(tmp_path), "PYTHONPATH": str(user_app)}, cwd=ROOT, capture_output=True,
        text=True, timeout=120,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.startswith("grounded-agent: serve: --graph")


def test_a_provider_model_without_its_package_is_one_line(tmp_path: Path) -> None:
    """GROUNDED_AGENT_MODEL=provider:model whose package is not installed: the CLI says which
    package, in one line, and exits 2 (no traceback, no key)."""
    try:
        import langchain_anthropic  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("langchain-anthropic is installed here")
    env = {**_env(tmp_path), "GROUNDED_AGENT_MODEL": "anthropic:claude-sonnet-4-5",
           "ANTHROPIC_API_KEY": "sk-ant-secret-value"}
    done = subprocess.run(
        [sys.executable, "-m", "grounded_agent.cli", "ask", "What does the Pro plan cost?"],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=180,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    lines = done.stderr.strip().splitlines()
    assert lines[-1] == ("grounded-agent: ask: the model 'anthropic:claude-sonnet-4-5' needs the "
                         "package langchain-anthropic: pip install langchain-anthropic")
    assert "Traceback" not in done.stderr and "sk-ant-secret-value" not in done.stderr + done.stdout


def test_serve_graph_configurable_sources_are_the_graphs(served_graph: str) -> None:
    """config.configurable.sources names the user's source like a built-in one; a name the
    served graph lacks is refused before the run (400), on the stream route too."""
    ok = httpx.post(f"{served_graph}/agent/invoke", timeout=120, json={
        "input": {"question": "What does the Zephyr Kettle cost?"},
        "config": {"configurable": {"sources": ["my_docs"]}}})
    assert ok.status_code == 200 and "EUR 49" in ok.json()["output"]["answer"]
    for route in ("invoke", "stream"):
        bad = httpx.post(f"{served_graph}/agent/{route}", timeout=60, json={
            "input": {"question": "What does the Zephyr Kettle cost?"},
            "config": {"configurable": {"sources": ["intranet"]}}})
        assert bad.status_code == 400, bad.text
        assert "unknown source(s): 'intranet'" in bad.json()["detail"]


@pytest.mark.parametrize("content", [None, '[[keys]]\nprincipal = "alice"\nsha256 = "my-key"\n'])
def test_serve_with_a_keys_file_it_cannot_use_says_why(content: str | None, tmp_path: Path) -> None:
    keys = tmp_path / "keys.toml"
    if content is not None:
        keys.write_text(content, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "grounded_agent.cli", "serve", "--keys", str(keys),
         "--port", str(free_port())],
        env=_env(tmp_path), cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.startswith("grounded-agent: serve: ")
    assert ("No such file" in done.stderr) if content is None else ("64 hex digits" in done.stderr)
    assert "my-key" not in done.stderr.replace("sha256 must", "")  # the value is never echoed
