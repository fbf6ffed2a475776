"""LangGraph Server's auth handlers without a server (serve/langgraph_auth.py): who a key names,
and what each principal may see of threads, runs, assistants, crons and store items."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from langgraph_sdk import Auth

from grounded_agent.serve import langgraph_auth
from grounded_agent.serve.callers import Callers
from grounded_agent.serve.langgraph_auth import (
    authenticator,
    build_auth,
    own_assistants,
    own_crons,
    own_store,
    own_threads,
    refuse,
)

ROOT = Path(__file__).resolve().parents[2]


class User(dict[str, Any]):
    """Stands in for the server's user object: the returned dict, read by key and attribute."""

    @property
    def identity(self) -> str:
        return str(self["identity"])


def ctx(user: Any, resource: str, action: str) -> Auth.types.AuthContext:
    return Auth.types.AuthContext(user=user, permissions=[], resource=resource,  # type: ignore[arg-type]
                                  action=action)  # type: ignore[arg-type]


ALICE = User(identity="alice", groups=["legal"], sees_all=False)
BOB = User(identity="bob", groups=["sales"], sees_all=False)
SHARED = User(identity="shared-key", groups=[], sees_all=True)


@pytest.fixture
def keys_file(tmp_path: Path) -> Path:
    path = tmp_path / "keys.toml"
    path.write_text(
        f'[[keys]]\nprincipal = "alice"\nsha256 = "{hashlib.sha256(b"a-key").hexdigest()}"\n'
        'groups = ["legal"]\n', "utf-8")
    return path


async def test_a_key_names_its_principal_and_groups(keys_file: Path) -> None:
    authenticate = authenticator(Callers("the-shared-key", keys_file))
    assert await authenticate({b"x-api-key": b"a-key"}) == {
        "identity": "alice", "display_name": "alice", "groups": ["legal"], "sees_all": False}
    shared = await authenticate({b"x-api-key": b"the-shared-key"})
    assert shared["identity"] == "shared-key" and shared["sees_all"] is True  # type: ignore[typeddict-item]


@pytest.mark.parametrize("headers", [{}, {b"x-api-key": b""}, {b"x-api-key": b"wrong"},
                                     {b"x-api-key": hashlib.sha256(b"a-key").hexdigest().encode()},
                                     {b"authorization": b"Bearer a-key"}])
async def test_no_or_a_wrong_key_is_401(keys_file: Path, headers: dict[bytes, bytes]) -> None:
    for callers in (Callers(None, keys_file), Callers("the-shared-key", None)):
        with pytest.raises(Auth.exceptions.HTTPException) as refused:
            await authenticator(callers)(headers)
        assert refused.value.status_code == 401


async def test_without_keys_everyone_is_one_user_who_sees_everything() -> None:
    user = await authenticator(Callers(None, None))({})
    assert user == {"identity": "anyone", "display_name": "anyone", "groups": [], "sees_all": True}


async def test_a_new_thread_or_run_belongs_to_its_caller_whatever_it_claims() -> None:
    for action in ("create", "create_run"):
        value: dict[str, Any] = {"metadata": {"owner": "bob"}}
        assert await own_threads(ctx(ALICE, "threads", action), value) == {"owner": "alice"}
        assert value["metadata"]["owner"] == "alice"
    value = {"metadata": None}
    await own_threads(ctx(ALICE, "threads", "create"), value)
    assert value["metadata"] == {"owner": "alice"}


async def test_a_thread_is_read_searched_changed_and_run_on_by_its_owner_only() -> None:
    for action in ("read", "search", "update", "delete", "create_run"):
        assert await own_threads(ctx(BOB, "threads", action), {}) == {"owner": "bob"}
        assert await own_threads(ctx(SHARED, "threads", action), {}) is None  # sees all
    update: dict[str, Any] = {"metadata": {"owner": "bob", "topic": "x"}}
    await own_threads(ctx(ALICE, "threads", "update"), update)
    assert update["metadata"] == {"topic": "x"}  # not given away by a metadata update


async def test_crons_are_their_creators() -> None:
    value: dict[str, Any] = {"metadata": {}}
    assert await own_crons(ctx(ALICE, "crons", "create"), value) == {"owner": "alice"}
    assert value["metadata"] == {"owner": "alice"}
    assert await own_crons(ctx(BOB, "crons", "search"), {}) == {"owner": "bob"}
    assert await own_crons(ctx(SHARED, "crons", "read"), {}) is None


async def test_the_servers_assistants_are_everyones_to_read_and_nobodys_to_change() -> None:
    read = await own_assistants(ctx(BOB, "assistants", "search"), {})
    assert read == {"$or": [{"owner": "bob"}, {"created_by": "system"}]}
    assert await own_assistants(ctx(BOB, "assistants", "update"), {}) == {"owner": "bob"}
    assert await own_assistants(ctx(BOB, "assistants", "delete"), {}) == {"owner": "bob"}
    made: dict[str, Any] = {"metadata": {"owner": "alice"}}
    assert await own_assistants(ctx(BOB, "assistants", "create"), made) == {"owner": "bob"}
    assert made["metadata"]["owner"] == "bob"
    assert await own_assistants(ctx(SHARED, "assistants", "update"), {}) is None


async def test_store_items_live_under_their_callers_name() -> None:
    for asked, scoped in [((), ("bob",)), (None, ("bob",)), (("notes",), ("bob", "notes")),
                          (("alice", "notes"), ("bob", "alice", "notes")),
                          (("bob", "notes"), ("bob", "notes"))]:
        value: dict[str, Any] = {"namespace": asked}
        await own_store(ctx(BOB, "store", "search"), value)
        assert value["namespace"] == scoped
    value = {"namespace": ("alice", "notes")}
    await own_store(ctx(SHARED, "store", "get"), value)
    assert value["namespace"] == ("alice", "notes")


async def test_a_studio_user_is_a_principal_of_its_own() -> None:
    """Studio's login is off in langgraph.json; a Studio user that arrives anyway sees only what
    it made, never everything."""
    studio = Auth.types.StudioUser("langgraph-studio-user")
    assert await own_threads(ctx(studio, "threads", "read"), {}) == {
        "owner": "langgraph-studio-user"}
    assert langgraph_auth.sees_all(studio) is False


async def test_anything_not_named_is_refused() -> None:
    assert await refuse(ctx(ALICE, "threads", "read"), {}) is False


def test_every_resource_has_its_handler_and_the_rest_is_refused() -> None:
    built = build_auth(Callers(None, None))
    assert built._authenticate_handler is not None
    assert built._global_handlers == [refuse]
    assert {key: handlers[-1] for key, handlers in built._handlers.items()} == {
        ("threads", "*"): own_threads, ("crons", "*"): own_crons,
        ("assistants", "*"): own_assistants, ("store", "*"): own_store}


def test_langgraph_json_names_this_auth_and_turns_studios_login_off() -> None:
    config = json.loads((ROOT / "langgraph.json").read_text("utf-8"))
    assert config["auth"] == {"path": "./src/grounded_agent/serve/langgraph_auth.py:auth",
                              "disable_studio_auth": True}
    assert isinstance(langgraph_auth.auth, Auth)
