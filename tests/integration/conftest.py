"""Integration fixtures: one embedded PostgreSQL per test session, one table per test."""

from __future__ import annotations

import shutil
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

from grounded_agent.store import KnowledgeStore, StoreSettings, open_store
from grounded_agent.store.server import ensure_embedded_server, stop_embedded_server


@contextmanager
def server_home(prefix: str) -> Iterator[Path]:
    """A fresh GROUNDED_AGENT_HOME, its server stopped and its files removed afterwards.

    Not under pytest's basetemp: as root, PostgreSQL runs as the `pgserver` user, and every
    pytest session re-tightens /tmp/pytest-of-<user> to 0700, which locks that user out.
    """
    home = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield home
    finally:
        stop_embedded_server(home)
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture(scope="session")
def pg_home() -> Iterator[Path]:
    """The session's embedded server, started once and stopped at the end."""
    with server_home("ga-test-") as home:
        ensure_embedded_server(home)
        yield home


@pytest.fixture
def store_settings(pg_home: Path, monkeypatch: pytest.MonkeyPatch) -> StoreSettings:
    monkeypatch.setenv("GROUNDED_AGENT_HOME", str(pg_home))
    monkeypatch.delenv("DATABASE_URL", raising=False)
    return StoreSettings(home=pg_home, database_url=None, embeddings="local", table_name=None)


@pytest.fixture
def table_name() -> str:
    return f"t_{uuid.uuid4().hex[:16]}"


@pytest.fixture
async def fake_store(
    store_settings: StoreSettings, table_name: str
) -> AsyncIterator[KnowledgeStore]:
    """A store with deterministic fake embeddings (384 dims) in a table owned by this test."""
    store = open_store(
        store_settings, embeddings=DeterministicFakeEmbedding(size=384), table_name=table_name
    )
    yield store
    await store.adrop()
    await store.aclose()


@pytest.fixture
async def real_store(
    store_settings: StoreSettings, table_name: str
) -> AsyncIterator[KnowledgeStore]:
    """A store with the bundled all-MiniLM-L6-v2, in a table owned by this test."""
    store = open_store(store_settings, table_name=table_name)
    yield store
    await store.adrop()
    await store.aclose()
