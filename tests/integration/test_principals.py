"""Principals at the endpoint (issue 43, its first part): API keys held as SHA-256 digests in a
keys file, read again when it changes, and conversation threads that belong to the principal
that started them. Real HTTP, a real database for the threads; a scripted source."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from grounded_agent.graph.builder import build_graph
from grounded_agent.principals import KeyRing, KeysFileError, digest, parse_keys
from grounded_agent.serve.app import ServeSettings, create_app
from grounded_agent.store import KnowledgeStore
from tests.fakes import ScriptedSource, finding, found
from tests.support.serving import serving

pytestmark = pytest.mark.integration

QUESTION = "What does the Pro plan cost?"
ALICE, BOB, CAROL = "alice-key-7f3a9c", "bob-key-2d81e0", "carol-key-55b0aa"


def _graph() -> Any:
    return build_graph(chat_model=None, tools={"knowledge_base": _kb_tool()})


def _keys_file(path: Path, *entries: tuple[str, str, list[str]]) -> Path:
    body = "".join(
        f'[[keys]]\nprincipal = "{name}"\nsha256 = "{digest(key)}"\ngroups = {groups!r}\n\n'
        .replace("'", '"')
        for name, key, groups in entries
    )
    path.write_text(body, encoding="utf-8")
    return path


def _ask(client: httpx.Client, key: str | None, thread: str | None = None) -> httpx.Response:
    body: dict[str, Any] = {"input": {"question": QUESTION}}
    if thread:
        body["config"] = {"configurable": {"thread_id": thread}}
    return client.post("/agent/invoke", json=body, headers={"X-API-Key": key} if key else {})


def test_keys_file_principals_and_a_change_without_restart(tmp_path: Path) -> None:
    keys = _keys_file(tmp_path / "keys.toml", ("alice", ALICE, ["legal"]), ("bob", BOB, ["sales"]))
    app = create_app(_graph(), store=_DummyStore(), settings=ServeSettings(keys_file=keys),
                     threads=False)
    with serving(app) as base, httpx.Client(base_url=base, timeout=30) as c:
        assert _ask(c, None).status_code == 401
        assert _ask(c, "not-a-key").status_code == 401
        assert _ask(c, digest(ALICE)).status_code == 401  # the digest is not the key
        assert _ask(c, ALICE).status_code == 200 and _ask(c, BOB).status_code == 200
        assert _ask(c, CAROL).status_code == 401
        # carol added, bob removed: read again on the next request, no restart
        time.sleep(0.01)
        _keys_file(keys, ("alice", ALICE, ["legal"]), ("carol", CAROL, ["legal", "sales"]))
        os.utime(keys, None)
        assert _ask(c, CAROL).status_code == 200
        assert _ask(c, BOB).status_code == 401
        # a broken edit keeps the keys read before: nobody is let in, nobody locked out
        keys.write_text("[[keys]\nprincipal = ", encoding="utf-8")
        assert _ask(c, CAROL).status_code == 200 and _ask(c, "not-a-key").status_code == 401


def test_the_shared_key_stands_beside_the_keys_file(tmp_path: Path) -> None:
    keys = _keys_file(tmp_path / "keys.toml", ("alice", ALICE, ["legal"]))
    settings = ServeSettings(keys_file=keys, api_key="shared-key-0042")
    app = create_app(_graph(), store=_DummyStore(), settings=settings, threads=False)
    with serving(app) as base, httpx.Client(base_url=base, timeout=30) as c:
        assert _ask(c, "shared-key-0042").status_code == 200
        assert _ask(c, ALICE).status_code == 200
        assert _ask(c, "shared-key-0043").status_code == 401


async def test_threads_belong_to_the_principal_that_started_them(
    tmp_path: Path, fake_store: KnowledgeStore
) -> None:
    """Alice and Bob send the same thread id: two threads, each stored under its principal, and
    no thread stored under the id as sent. The control: without a keys file the id is stored as
    sent (so the check would fail if threads were not kept apart)."""
    keys = _keys_file(tmp_path / "keys.toml", ("alice", ALICE, ["legal"]), ("bob", BOB, ["sales"]))
    thread = f"t-{os.getpid()}-{time.monotonic_ns()}"
    app = create_app(_graph(), store=fake_store, settings=ServeSettings(keys_file=keys), threads=True)
    with serving(app) as base, httpx.Client(base_url=base, timeout=60) as c:
        assert _ask(c, ALICE, thread).status_code == 200
        assert _ask(c, BOB, thread).status_code == 200
    stored = await _thread_ids(fake_store, thread)
    assert len(stored) == 2 and thread not in stored
    assert all(s.endswith(f":{thread}") and s.startswith("p-") for s in stored)

    open_app = create_app(_graph(), store=fake_store, settings=ServeSettings(), threads=True)
    with serving(open_app) as base, httpx.Client(base_url=base, timeout=60) as c:
        assert _ask(c, None, thread).status_code == 200
    assert thread in await _thread_ids(fake_store, thread)


async def _thread_ids(store: KnowledgeStore, thread: str) -> set[str]:
    engine = await store._ready()
    async with engine.connect() as conn:
        rows = (await conn.execute(
            text("SELECT DISTINCT thread_id FROM checkpoints WHERE thread_id LIKE :t"),
            {"t": f"%{thread}"},
        )).all()
    return {str(r[0]) for r in rows}


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ("", "no [[keys]] entries"),
        ('[[keys]]\nprincipal = "a"\nsha256 = "plain-text-key"\n', "64 hex digits"),
        ('[[keys]]\nprincipal = "a b"\nsha256 = "' + "0" * 64 + '"\n', "principal must be a name"),
        ('[[keys]]\nprincipal = "a"\nsha256 = "' + "0" * 64 + '"\nkey = "x"\n', "unknown field"),
        ('[[keys]]\nprincipal = "a"\nsha256 = "' + "0" * 64 + '"\n[[keys]]\nprincipal = "b"\n'
         'sha256 = "' + "0" * 64 + '"\n', "listed twice"),
        ('[[keys]]\nprincipal = "a"\nsha256 = "' + "0" * 64 + '"\ngroups = "legal"\n', "groups"),
    ],
)
def test_a_keys_file_that_cannot_be_used_says_why(body: str, needle: str, tmp_path: Path) -> None:
    with pytest.raises(KeysFileError, match=re.escape(needle)):
        parse_keys(body)
    path = tmp_path / "keys.toml"
    path.write_text(body, encoding="utf-8")
    with pytest.raises(KeysFileError):
        KeyRing(path)


class _DummyStore:
    """/healthz's store for apps whose tests never call it."""

    settings = type("S", (), {"embedded": False})()

    async def ahealthcheck(self) -> Any:  # pragma: no cover - not called
        raise AssertionError("not called")


async def test_python_api_threads_belong_to_the_principal_the_application_names(
    fake_store: KnowledgeStore,
) -> None:
    """ask(..., principal=...): Alice's turn is in her thread; Bob's run with the same id sees an
    empty history (his own thread), Alice's second turn sees her first. The control: without a
    principal the id is the thread as given."""
    from grounded_agent import InvalidQuestion, aask
    from grounded_agent.checkpoint import open_checkpointer
    from grounded_agent.principals import principal_named

    thread = f"t-{time.monotonic_ns()}"
    async with open_checkpointer(store=fake_store) as saver:
        graph = build_graph(chat_model=None, tools={"knowledge_base": _kb_tool()},
                            checkpointer=saver)
        await aask(QUESTION, graph=graph, thread_id=thread, principal="alice")
        await aask(QUESTION, graph=graph, thread_id=thread, principal="bob")
        await aask(QUESTION, graph=graph, thread_id=thread, principal="alice")

        async def history(thread_id: str) -> list[str]:
            state = await graph.aget_state({"configurable": {"thread_id": thread_id}})
            return [h["question"] for h in state.values.get("history") or []]

        assert await history(principal_named("alice").thread(thread)) == [QUESTION, QUESTION]
        assert await history(principal_named("bob").thread(thread)) == [QUESTION]
        assert await history(thread) == []  # nothing under the id as sent
        await aask(QUESTION, graph=graph, thread_id=thread)  # control: no principal
        assert await history(thread) == [QUESTION]
        with pytest.raises(InvalidQuestion, match="principal must be a name"):
            await aask(QUESTION, graph=graph, thread_id=thread, principal="alice\nbob")


def _kb_tool() -> Any:
    return ScriptedSource("knowledge_base", [found("knowledge_base", finding(
        text="The Pro plan costs 49 EUR per user per month.", title="Pricing", score=0.9))]).tool()
