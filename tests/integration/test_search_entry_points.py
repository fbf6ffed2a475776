"""Finding documents through the CLI (a new user's commands, on the sample knowledge base) and
the endpoint (page requests over real HTTP): no model is involved in either."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from grounded_agent.graph.builder import build_graph
from grounded_agent.sample import SAMPLE_KB
from grounded_agent.serve.app import ServeSettings, create_app
from grounded_agent.store import KnowledgeStore, StoreSettings, aingest_paths, open_store
from tests.support.serving import serving

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "grounded_agent.cli", *args], env=env,
                          capture_output=True, text=True, timeout=300)


def test_a_new_user_lists_documents_on_the_sample_knowledge_base(pg_home: Path) -> None:
    table = f"t_{uuid.uuid4().hex[:16]}"
    env = {k: v for k, v in os.environ.items()
           if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "DATABASE_URL")}
    env.update(GROUNDED_AGENT_HOME=str(pg_home), GROUNDED_AGENT_KB_TABLE=table,
               HF_HUB_OFFLINE="1", PYTHONPATH=str(ROOT / "src"))
    try:
        ingest = _cli(env, "ingest", str(SAMPLE_KB), "--json")
        assert ingest.returncode == 0, ingest.stderr[-2000:]
        run = _cli(env, "search", "contract", "--from", "2025-01-01", "--json")
        assert run.returncode == 0, run.stderr[-2000:]
        out = json.loads(run.stdout)
        assert out["result_type"] == "search" and out["usage"]["llm_calls"] == 0
        docs = out["documents"]
        assert {"items", "total_items", "page", "page_size", "total_pages"} <= set(docs)
        assert docs["total_items"] == len(docs["items"]) >= 1
        assert all(i["document_date"] >= "2025-01-01" for i in docs["items"])
        # the superseded 2025 price list shares its id with the current one: listed once, current
        pricing = [i for i in docs["items"] if i["doc_id"] == "lumenary-pricing"]
        assert [p["version"] for p in pricing] in ([], ["2026.2"])
        assert out["search"] == {"text": "contract", "language": None, "date_from": "2025-01-01",
                                 "date_to": None, "sort": "relevance", "page": 1,
                                 "page_size": 20}
        # the two client contracts call themselves "subscription agreement"
        agreements = json.loads(_cli(env, "search", "agreement", "--sort", "newest",
                                     "--page-size", "1", "--page", "2", "--json").stdout)
        assert agreements["documents"]["page"] == 2
        assert agreements["documents"]["total_items"] >= 2
        human = _cli(env, "search", "agreement", "--page-size", "1")
        assert "Next page: grounded-agent search agreement" in human.stdout
        bad = _cli(env, "search", "contract", "--page", "0")
        assert bad.returncode == 2 and "page: must be at least 1" in bad.stderr
        bad_date = _cli(env, "search", "--from", "2025-13-01")
        assert bad_date.returncode == 2 and "date_from must be a date" in bad_date.stderr
    finally:
        store = open_store(StoreSettings(home=pg_home, database_url=None), table_name=table)
        store.run_sync(store.adrop())


@pytest.fixture
async def docs_store(fake_store: KnowledgeStore, tmp_path: Path) -> KnowledgeStore:
    for n in range(5):
        (tmp_path / f"c{n}.md").write_text(
            f"---\nid: contract-{n}\ntitle: Contract {n}\ndocument_date: 2026-0{n + 1}-01\n"
            f"language: en\n---\n# Contract {n}\n\nThis contract number {n} renews yearly.\n",
            encoding="utf-8",
        )
    await aingest_paths([tmp_path], fake_store)
    return fake_store


@pytest.fixture
def base_url(docs_store: KnowledgeStore) -> Iterator[str]:
    app = create_app(build_graph(chat_model=None, tools={}), store=docs_store,
                     settings=ServeSettings(), threads=False)
    with serving(app) as base:
        yield base


def _invoke(base: str, payload: dict[str, Any]) -> httpx.Response:
    return httpx.post(f"{base}/agent/invoke", json={"input": payload}, timeout=60)


def test_the_endpoint_pages_with_the_normalised_parameters(base_url: str) -> None:
    first = _invoke(base_url, {"search": {"text": "contract", "page_size": 2, "sort": "oldest"}})
    assert first.status_code == 200, first.text
    out = first.json()["output"]
    assert out["result_type"] == "search" and out["usage"]["llm_calls"] == 0
    assert [i["doc_id"] for i in out["documents"]["items"]] == ["contract-0", "contract-1"]
    assert out["documents"]["total_pages"] == 3
    nxt = _invoke(base_url, {"search": {**out["search"], "page": 2}}).json()["output"]
    assert [i["doc_id"] for i in nxt["documents"]["items"]] == ["contract-2", "contract-3"]
    assert nxt["usage"]["llm_calls"] == 0


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ({"search": {"page": 0}}, "page"),
        ({"search": {"page_size": 51}}, "page_size"),
        ({"search": {"sort": "popular"}}, "sort must be one of"),
        ({"search": {"date_from": "2026-02-01", "date_to": "2026-01-01"}}, "is after date_to"),
        ({"search": {"date_to": "tomorrow"}}, "date_to must be a date"),
        ({"question": "What is it?", "search": {"text": "x"}}, "either a question or search"),
    ],
)
def test_invalid_page_requests_are_422_with_the_reason(
    base_url: str, payload: dict[str, Any], message: str
) -> None:
    r = _invoke(base_url, payload)
    assert r.status_code == 422, r.text
    assert message in r.text
