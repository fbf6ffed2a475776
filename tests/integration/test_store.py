"""The store against a real embedded PostgreSQL: search, filters, failures, shared start-up."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
import threading
from datetime import date
from pathlib import Path

import pytest
from sqlalchemy import text

from grounded_agent.sample import SAMPLE_KB
from grounded_agent.store import (
    KnowledgeStore,
    SearchFilters,
    StoreSettings,
    StoreTimeout,
    StoreUnavailable,
    aingest_paths,
    open_store,
)
from tests.integration.conftest import server_home

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def _write(path: Path, doc_id: str, body: str, **meta: str) -> None:
    front = "".join(f"{k}: {v}\n" for k, v in {"id": doc_id, **meta}.items())
    path.write_text(f"---\n{front}---\n{body}\n")


async def test_search_returns_citable_findings_and_filters_in_sql(
    fake_store: KnowledgeStore, tmp_path: Path
) -> None:
    _write(
        tmp_path / "en.md",
        "en-doc",
        "# Guide\n\n## Setup\n\nInstall it.",
        language="en",
        document_date="2026-05-01",
        version='"1"',
        source_url="https://x.example/en",
    )
    _write(
        tmp_path / "de.md",
        "de-doc",
        "# Anleitung\n\nInstallieren.",
        language="de",
        document_date="2024-05-01",
    )
    await aingest_paths([tmp_path], fake_store)
    found = await fake_store.asearch("install", k=5)
    assert {f.source_id for f in found} == {"en-doc", "de-doc"}
    en = next(f for f in found if f.source_id == "en-doc")
    assert (en.source, en.title, en.section, en.version, en.url) == (
        "knowledge_base",
        "Guide",
        "Guide > Setup",
        "1",
        "https://x.example/en",
    )
    assert en.document_date == date(2026, 5, 1) and en.indexed_at is not None
    assert 0.0 <= en.score <= 1.0 and en.raw_score is not None and en.chunk_index == 0

    async def ids(f: SearchFilters) -> set[str]:
        return {x.source_id for x in await fake_store.asearch("install", k=5, filters=f)}

    assert await ids(SearchFilters(language="de")) == {"de-doc"}
    assert await ids(SearchFilters(doc_ids=["en-doc"])) == {"en-doc"}
    assert await ids(SearchFilters(date_from=date(2025, 1, 1))) == {"en-doc"}
    assert await ids(SearchFilters(date_to=date(2025, 1, 1))) == {"de-doc"}
    assert await ids(SearchFilters(language="fr")) == set()
    assert SearchFilters(language="de").to_filter() == {
        "$and": [{"is_active": True}, {"language": "de"}]
    }


async def test_sync_api_and_healthcheck(fake_store: KnowledgeStore, tmp_path: Path) -> None:
    _write(tmp_path / "a.md", "a", "# A\n\nSome text.")
    await aingest_paths([tmp_path], fake_store)
    found = await asyncio.to_thread(fake_store.search, "text", 1)
    assert [f.source_id for f in found] == ["a"]
    health = await asyncio.to_thread(fake_store.healthcheck)
    assert health.ok and (health.chunks, health.documents) == (1, 1)
    assert fake_store.database_url().startswith("postgresql://")
    assert fake_store.sqlalchemy_url().startswith("postgresql+psycopg://")


def _unreachable(tmp_path: Path) -> KnowledgeStore:
    from langchain_core.embeddings import DeterministicFakeEmbedding

    url = f"postgresql://postgres@/postgres?host={tmp_path / 'no-such-socket-dir'}"
    settings = StoreSettings(home=tmp_path, database_url=url, connect_timeout_s=2)
    return open_store(settings, embeddings=DeterministicFakeEmbedding(size=384), table_name="kb_x")


async def test_unreachable_database_raises_never_returns_empty(tmp_path: Path) -> None:
    store = _unreachable(tmp_path)
    with pytest.raises(StoreUnavailable):
        await store.asearch("anything")
    health = await store.ahealthcheck()
    assert not health.ok and health.backend == "external" and health.detail


async def test_a_locked_table_times_out(fake_store: KnowledgeStore, tmp_path: Path) -> None:
    _write(tmp_path / "a.md", "a", "# A\n\nSome text.")
    await aingest_paths([tmp_path], fake_store)
    fast = open_store(
        StoreSettings(home=fake_store.settings.home, database_url=None, query_timeout_s=1.0),
        embeddings=fake_store.embeddings,
        table_name=fake_store.table_name,
    )
    await fast.aensure_schema()
    hold = threading.Event()  # set and read across the test's loop and the process loop
    release = threading.Event()

    async def lock_table() -> None:
        engine = await fake_store._aengine()
        async with engine.begin() as conn:
            await conn.execute(
                text(f'LOCK TABLE "{fake_store.table_name}" IN ACCESS EXCLUSIVE MODE')
            )
            hold.set()
            while not release.is_set():  # noqa: ASYNC110 - the lock lives on the process loop
                await asyncio.sleep(0.05)

    locker = asyncio.ensure_future(fake_store._call(lock_table(), "lock", None))
    while not hold.is_set():  # noqa: ASYNC110
        await asyncio.sleep(0.05)
    try:
        with pytest.raises(StoreTimeout):
            await fast.asearch("text")
    finally:
        release.set()
        await locker
        await fast.aclose()


def test_two_processes_start_one_server_and_it_outlives_them() -> None:
    with server_home("ga-race-") as home:
        _race(home)


def _race(home: Path) -> None:
    script = textwrap.dedent(
        f"""
        import json, sys
        from langchain_core.embeddings import DeterministicFakeEmbedding
        from grounded_agent.store import StoreSettings, open_store
        s = open_store(StoreSettings(home=__import__("pathlib").Path({str(home)!r}), database_url=None),
                       embeddings=DeterministicFakeEmbedding(size=384), table_name="kb_race")
        s.ensure_schema()
        print(json.dumps({{"url": s.database_url(), "health": s.healthcheck().ok}}))
        """
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=ROOT,
            text=True,
        )
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [o[1][-2000:] for o in outs]
    results = [json.loads(o[0].strip().splitlines()[-1]) for o in outs]
    assert results[0]["url"] == results[1]["url"] and all(r["health"] for r in results)
    # both processes exited: a third run reuses the still-running server
    again = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert again.returncode == 0, again.stderr[-2000:]
    assert json.loads(again.stdout.strip().splitlines()[-1])["url"] == results[0]["url"]
    assert "Initializing pgdata" not in again.stderr


async def test_real_model_ranks_the_sample_kb(real_store: KnowledgeStore) -> None:
    report = await aingest_paths([SAMPLE_KB], real_store)
    assert (report.documents, report.errors) == (8, [])  # six Markdown, a PDF, a Word file
    pro = await real_store.asearch("How much does the Pro plan cost per user per month?", k=3)
    assert (pro[0].source_id, pro[0].version) == ("lumenary-pricing", "2026.2")
    assert pro[0].score >= 0.75 and "29 euros" in pro[0].text
    off = await real_store.asearch("What is the boiling point of nitrogen?", k=3)
    assert off[0].score < 0.55
    anything = await real_store.asearch("Starter plan price per user", k=10)
    assert all(f.version != "2025.1" for f in anything)
    # the scorer puts outside passages on the same scale
    outside = await real_store.relevance.ascore(
        "How much does the Pro plan cost?", ["Nitrogen boils at minus 196 degrees Celsius."]
    )
    assert outside[0] < 0.55


async def test_full_text_half_finds_what_fake_vectors_miss(
    fake_store: KnowledgeStore, tmp_path: Path
) -> None:
    # fake embeddings are random: only the full-text half of the hybrid search can rank by words
    for i in range(30):
        _write(tmp_path / f"filler{i}.md", f"filler-{i}", f"# Note {i}\n\nNothing of use {i}.")
    _write(tmp_path / "tariff.md", "tariff", "# Water tariffs\n\n## Base charge\n\n"
           "Every residential connection pays EUR 12.40 per month.", language="en")
    _write(tmp_path / "de.md", "de-tarif", "# Wassertarife\n\nDie Grundgebühren steigen.",
           language="de")
    await aingest_paths([tmp_path], fake_store)
    found = await fake_store.asearch("monthly water base charge", k=3)
    assert found[0].source_id == "tariff"
    # the German document is indexed with the German configuration: its stemmed word matches
    german = await fake_store.asearch("Grundgebühr", k=3)
    assert german[0].source_id == "de-tarif"
    # filters hold in the full-text half too
    none = await fake_store.asearch("monthly water base charge", k=3,
                                    filters=SearchFilters(language="de"))
    assert all(f.source_id != "tariff" for f in none)


async def test_a_schema_1_table_is_upgraded_in_place(
    store_settings: StoreSettings, table_name: str, tmp_path: Path
) -> None:
    from langchain_core.embeddings import DeterministicFakeEmbedding

    def fresh() -> KnowledgeStore:
        return open_store(store_settings, embeddings=DeterministicFakeEmbedding(size=384),
                          table_name=table_name)

    old = fresh()
    for i in range(20):
        _write(tmp_path / f"f{i}.md", f"f-{i}", f"# Filler {i}\n\nPlain words {i}.")
    _write(tmp_path / "a.md", "a", "# Prices\n\nThe hardness is 14 degrees.")
    await aingest_paths([tmp_path], old)
    engine = await old._aengine()
    async with engine.begin() as conn:  # what a table written before schema 2 looks like
        await conn.execute(text(f'ALTER TABLE "{table_name}" DROP COLUMN fts'))
        await conn.execute(text(f'DELETE FROM "{table_name}_terms"'))
    await old.aclose()
    new = fresh()
    try:
        found = await new.asearch("water hardness", k=2)
        assert found[0].source_id == "a"
        n, dfs = await new.adocument_frequencies({"hard"})
        assert n == 21 and dfs == {"hard": 1}
    finally:
        await new.adrop()
        await new.aclose()
