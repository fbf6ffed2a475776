"""Conversation threads: a PostgreSQL checkpointer on the knowledge store's own database.

Why the same database: one embedded server (or one DATABASE_URL) holds everything a user has, so
a thread survives a restart of the CLI, the notebook kernel or the endpoint without more setup.
The saver and its psycopg pool belong to the event loop that opened them, so each caller opens
one with `open_checkpointer()` inside its own loop; `setup()` (the migrations) runs once per
database per process.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from grounded_agent.store.errors import StoreUnavailable
from grounded_agent.store.settings import libpq_url, redact_url

if TYPE_CHECKING:
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

    from grounded_agent.store import KnowledgeStore

log = logging.getLogger(__name__)

_set_up: set[str] = set()
_setup_locks: dict[tuple[str, int], asyncio.Lock] = {}

POOL_MAX_SIZE = 10
CONNECT_TIMEOUT_S = 10.0
POOL_WAIT_S = 5.0
"""How long a checkpoint read or write waits for a pooled connection before the database counts
as unavailable (a database that went away leaves the pool nothing to hand out)."""


async def checkpoint_database_url(store: KnowledgeStore | None = None) -> str:
    """The store's database (DATABASE_URL, else the embedded server, started if need be)."""
    if store is None:
        from grounded_agent.store import open_store

        store = open_store()
    return await asyncio.to_thread(store.database_url)


def state_serializer() -> Any:
    """LangGraph's serializer, reviving only its own safe types and this package's state models
    (a checkpoint row never instantiates an arbitrary class)."""
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    from grounded_agent.schemas import (
        Citation,
        Confidence,
        Finding,
        Pointer,
        SourceReport,
        ToolCallRecord,
    )

    models = (ToolCallRecord, Finding, Confidence, Citation, SourceReport, Pointer)
    return JsonPlusSerializer(allowed_msgpack_modules=[(m.__module__, m.__name__) for m in models])


@asynccontextmanager
async def open_checkpointer(
    database_url: str | None = None,
    *,
    store: KnowledgeStore | None = None,
    max_size: int = POOL_MAX_SIZE,
) -> AsyncIterator[AsyncPostgresSaver]:
    """An AsyncPostgresSaver over a psycopg pool, tables created on first use; closed on exit.

    Raises StoreUnavailable (a message safe to show) when the database cannot be reached.
    """
    import psycopg
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from psycopg.rows import dict_row
    from psycopg_pool import AsyncConnectionPool

    url = libpq_url(database_url or await checkpoint_database_url(store))
    kwargs: dict[str, Any] = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
    # `check` tests each connection as it leaves the pool: after the database restarted, a
    # connection of the old server is replaced by a new one instead of failing the request
    pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
        url,
        kwargs=kwargs,
        min_size=1,
        max_size=max_size,
        open=False,
        name="grounded-agent-threads",
        check=AsyncConnectionPool.check_connection,
        timeout=POOL_WAIT_S,
    )
    try:
        # one direct connection first: a refused connection fails at once, while the pool
        # would retry until its timeout
        probe = await psycopg.AsyncConnection.connect(url, connect_timeout=int(CONNECT_TIMEOUT_S))
        await probe.close()
        await pool.open(wait=True, timeout=CONNECT_TIMEOUT_S)
    except Exception as exc:  # OperationalError, PoolTimeout: the database is not there
        await pool.close()
        raise StoreUnavailable(
            f"thread storage: database {redact_url(url)} unreachable ({type(exc).__name__})"
        ) from exc
    try:
        saver = AsyncPostgresSaver(pool, serde=state_serializer())
        await _setup_once(saver, url)
        yield saver
    finally:
        await pool.close()


async def _setup_once(saver: AsyncPostgresSaver, url: str) -> None:
    """Runs the checkpointer migrations once per database and process (they are idempotent,
    but concurrent first runs would race on the migrations table)."""
    if url in _set_up:
        return
    lock = _setup_locks.setdefault((url, id(asyncio.get_running_loop())), asyncio.Lock())
    async with lock:
        if url not in _set_up:
            await saver.setup()
            _set_up.add(url)
            log.info("thread checkpoints ready in %s", redact_url(url))
