"""The whole agent offline on the sample knowledge base: real embedded PostgreSQL, real
embeddings, no model. What a new user sees for each kind of question."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from grounded_agent import aask, build_graph
from grounded_agent.context import Context
from grounded_agent.sample import SAMPLE_KB
from grounded_agent.store import KnowledgeStore, StoreSettings, ingest_paths, open_store

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
CTX = Context(sources=["knowledge_base"])


@pytest.fixture(scope="module")
async def sample_store(pg_home: Path) -> AsyncIterator[KnowledgeStore]:
    settings = StoreSettings(home=pg_home, database_url=None, embeddings="local", table_name=None)
    store = open_store(settings, table_name=f"kb_sample_{uuid.uuid4().hex[:8]}")
    report = await _ingest(store)
    assert report.documents >= 6 and not report.errors
    yield store
    await store.adrop()
    await store.aclose()


async def _ingest(store: KnowledgeStore):  # type: ignore[no-untyped-def]
    import asyncio

    return await asyncio.to_thread(ingest_paths, [SAMPLE_KB], store)


@pytest.fixture(scope="module")
def graph(sample_store: KnowledgeStore):  # type: ignore[no-untyped-def]
    return build_graph(chat_model=None, store=sample_store)


async def test_answer_in_the_knowledge_base_cites_the_right_document(graph) -> None:  # type: ignore[no-untyped-def]
    result = await aask(
        "How much does the Pro plan cost per user per month?", graph=graph, context=CTX
    )
    assert result.status == "answered"
    assert result.citations[0].source_id == "lumenary-pricing"
    assert "29 euros" in result.answer
    assert result.sources[0].status == "found" and result.sources[0].finding_count


async def test_an_answer_from_the_sample_pdf_cites_its_page(graph) -> None:  # type: ignore[no-untyped-def]
    result = await aask(
        "How many IP address ranges can an Enterprise workspace allow-list?",
        graph=graph,
        context=CTX,
    )
    assert result.status == "answered"
    assert [(c.source_id, c.page) for c in result.citations] == [("lumenary-admin-guide", 3)]
    assert "50" in result.answer


async def test_an_answer_from_the_sample_word_file_cites_its_section(graph) -> None:  # type: ignore[no-untyped-def]
    result = await aask(
        "How much does the Guided rollout onboarding package cost?", graph=graph, context=CTX
    )
    assert result.status == "answered"
    cited = result.citations[0]
    assert (cited.source_id, cited.page) == ("lumenary-onboarding-services", None)
    assert cited.section is not None and cited.section.endswith("Guided rollout")
    assert "6,000 euros" in result.answer


async def test_newer_version_is_cited_never_the_superseded_one(graph) -> None:  # type: ignore[no-untyped-def]
    result = await aask("What is the price of the Starter plan?", graph=graph, context=CTX)
    assert result.status in ("answered", "answered_with_caveat")
    assert {c.version for c in result.citations} == {"2026.2"}
    assert "12 euros" in result.answer
    assert "9 euros" not in result.answer


async def test_similar_but_different_entity_is_not_found(graph) -> None:  # type: ignore[no-untyped-def]
    result = await aask(
        "What is the annual fee in the Contoso Retail contract?", graph=graph, context=CTX
    )
    assert result.status == "not_found"
    assert result.citations == []
    assert "Northwind" not in result.answer and "Bluefin" not in result.answer


async def test_off_topic_is_not_found_and_says_what_was_searched(graph) -> None:  # type: ignore[no-untyped-def]
    result = await aask("Who won the 2014 football World Cup?", graph=graph, context=CTX)
    assert result.status == "not_found"
    assert "knowledge base" in result.answer
    assert result.sources[0].coverage == "complete"


async def test_old_document_gets_a_stale_source_warning(graph) -> None:  # type: ignore[no-untyped-def]
    result = await aask("How long are backups kept?", graph=graph, context=CTX)
    assert result.status in ("answered", "answered_with_caveat")
    assert any(w.kind == "stale_source" for w in result.warnings)
    assert "out of date" in result.answer


async def test_stopped_database_is_unavailable_not_empty(tmp_path: Path) -> None:
    dead = StoreSettings(
        home=tmp_path,
        database_url=f"postgresql://postgres@/postgres?host={tmp_path}/nosock",
        embeddings="local",
        table_name=None,
        connect_timeout_s=2.0,
    )
    graph = build_graph(chat_model=None, store=open_store(dead, table_name="kb_dead"))
    result = await aask(
        "How much does the Pro plan cost per user per month?", graph=graph, context=CTX
    )
    assert result.status == "unavailable"
    assert result.status != "not_found"  # negative control: a failure is never an absence
    assert result.sources[0].status == "error"
    assert result.sources[0].finding_count is None
    assert result.citations == [] and "29" not in result.answer
    assert "Traceback" not in result.answer and "psycopg" not in result.answer.lower()


def test_cli_reports_each_source_and_answers_partially(pg_home: Path) -> None:
    """Issue 4's user check: no internet, no Tavily key; the knowledge base still answers."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("OPENAI_API_KEY", "TAVILY_API_KEY", "DATABASE_URL")
    }
    env.update(GROUNDED_AGENT_HOME=str(pg_home), HF_HUB_OFFLINE="1")
    cli = [sys.executable, "-m", "grounded_agent.cli"]
    ingest = subprocess.run(
        [*cli, "ingest", str(SAMPLE_KB), "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert ingest.returncode == 0, ingest.stderr[-2000:]
    started = time.monotonic()
    ask = subprocess.run(
        [
            *cli,
            "ask",
            "How much does the Pro plan cost per user per month?",
            "--sources",
            "knowledge_base,wikipedia,web",
            "--json",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    elapsed = time.monotonic() - started
    assert ask.returncode == 0, ask.stderr[-2000:]
    out = json.loads(ask.stdout)
    by_source = {s["source"]: s for s in out["sources"]}
    assert out["status"] == "partial"
    assert by_source["knowledge_base"]["status"] == "found"
    assert by_source["wikipedia"]["status"] == "error"
    assert by_source["wikipedia"]["error_kind"] in ("unavailable", "timeout")
    assert by_source["web"] == {
        "source": "web",
        "status": "error",
        "coverage": "unavailable",
        "error_kind": "config",
        "finding_count": None,
    }
    assert out["citations"] and out["citations"][0]["source"] == "knowledge_base"
    assert "Wikipedia" in out["answer"] and "web search" in out["answer"]
    assert elapsed < Context().time_budget_s + 30  # the budget plus process start-up
