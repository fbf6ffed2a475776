"""The knowledge_base tool: outcomes for found, not found, unavailable and bad arguments."""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

from grounded_agent.sample import SAMPLE_KB
from grounded_agent.store import KnowledgeStore, StoreSettings, aingest_paths, open_store
from grounded_agent.tools.knowledge_base import (
    KnowledgeBaseArgs,
    make_knowledge_base_tool,
    search_knowledge_base,
)

pytestmark = pytest.mark.integration



def _unreachable(tmp_path: Path) -> KnowledgeStore:
    url = f"postgresql://postgres@/postgres?host={tmp_path / 'no-such-socket-dir'}"
    settings = StoreSettings(home=tmp_path, database_url=url, connect_timeout_s=2)
    return open_store(settings, embeddings=DeterministicFakeEmbedding(size=384), table_name="kb_x")


async def test_unreachable_database_is_an_error_outcome(tmp_path: Path) -> None:
    outcome = await make_knowledge_base_tool(_unreachable(tmp_path)).run(
        {"query": "Pro plan price"}
    )
    assert (outcome.status, outcome.error_kind, outcome.coverage) == (
        "error",
        "unavailable",
        "unavailable",
    )
    assert outcome.finding_count is None and outcome.items == []


async def test_negative_control_an_empty_reachable_store_is_not_found(
    fake_store: KnowledgeStore,
) -> None:
    """The same call on a store that answers with nothing: not_found with a count of 0. If the
    unavailable case above were turned into an empty result, it would look exactly like this."""
    outcome = await search_knowledge_base(fake_store, "Pro plan price")
    assert (outcome.status, outcome.coverage, outcome.finding_count) == ("not_found", "complete", 0)


async def test_found_and_not_found_with_the_real_model(real_store: KnowledgeStore) -> None:
    await aingest_paths([SAMPLE_KB], real_store)
    tool = make_knowledge_base_tool(real_store)
    found = await tool.run({"query": "annual fee in the Northwind Logistics contract", "k": 3})
    assert found.status == "found" and found.finding_count == 3
    assert found.items[0].source_id == "contract-northwind-logistics"
    assert found.items[0].score >= found.items[-1].score
    off = await tool.run({"query": "Who won the 2014 football World Cup?"})
    assert off.status == "not_found" and off.finding_count is not None
    filtered = await tool.run({"query": "uptime commitment", "doc_ids": ["lumenary-sla"]})
    assert {i.source_id for i in filtered.items} == {"lumenary-sla"}


async def test_arguments_outside_the_schema_are_rejected(fake_store: KnowledgeStore) -> None:
    tool = make_knowledge_base_tool(fake_store)
    for bad in (
        {"query": ""},
        {"query": "x", "k": 11},
        {"query": "x" * 501},
        {"query": "x", "sql": 1},
    ):
        outcome = await tool.run(bad)
        assert (outcome.status, outcome.error_kind) == ("error", "config")
    assert KnowledgeBaseArgs(query="q", date_from="2026-01-01").filters() is not None  # type: ignore[arg-type]
    schema = tool.as_openai_tool()
    assert schema["function"]["name"] == "knowledge_base"
    assert "knowledge base" in schema["function"]["description"]
