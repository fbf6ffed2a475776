"""LangGraph Server with the project's keys (`langgraph.json`'s `auth` entry, serve/langgraph_auth.py):
no or a wrong key is 401, and a thread is its creator's: for another principal it does not exist
(404, never its state, never continued, not listed). The server is `langgraph dev` on the real
langgraph.json, plus a probe graph that reports what the graph receives as the caller."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import ROOT, child_env, langgraph_dev

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

KEYS = {"alice": "alice-key-3f9c1e", "bob": "bob-key-77d2a0", "carol": "carol-key-5b41"}
SHARED = "shared-key-0c8e2d"
QUESTION = "How much does the Pro plan cost per user per month?"
SECOND = "What is the uptime commitment in the SLA?"


def _entry(name: str, groups: list[str]) -> str:
    digest = hashlib.sha256(KEYS[name].encode()).hexdigest()
    return f'[[keys]]\nprincipal = "{name}"\nsha256 = "{digest}"\ngroups = {json.dumps(groups)}\n'


@dataclass(frozen=True)
class Server:
    url: str
    keys_file: Path

    def client(self, key: str | None) -> httpx.Client:
        headers = {"X-API-Key": key} if key is not None else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=120)


@pytest.fixture(scope="module")
def server(ingested_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """langgraph.json as shipped (its paths made absolute) with a probe graph beside the agent;
    alice (legal) and bob (sales) in the keys file, and the shared key who sees everything."""
    tmp = tmp_path_factory.mktemp("langgraph_auth")
    keys_file = tmp / "keys.toml"
    keys_file.write_text(_entry("alice", ["legal"]) + "\n" + _entry("bob", ["sales"]), "utf-8")
    config = json.loads((ROOT / "langgraph.json").read_text("utf-8"))
    assert config["auth"]["path"] == "./src/grounded_agent/serve/langgraph_auth.py:auth"
    assert config["auth"]["disable_studio_auth"] is True
    config["dependencies"] = [str(ROOT)]
    config["graphs"] = {name: str(ROOT / path) for name, path in config["graphs"].items()}
    config["graphs"]["probe"] = str(ROOT / "tests/e2e/langgraph_probe.py:probe")
    config["auth"]["path"] = str(ROOT / config["auth"]["path"])
    config.pop("env", None)
    (tmp / "langgraph.json").write_text(json.dumps(config), "utf-8")
    env = child_env(ingested_home) | {"GROUNDED_AGENT_KEYS_FILE": str(keys_file),
                                      "GROUNDED_AGENT_API_KEY": SHARED}
    memo = tmp / "memos" / "kestrel-memo-q4.md"
    memo.parent.mkdir()
    memo.write_text(MEMO, encoding="utf-8")
    _cli(ingested_home, "ingest", str(memo.parent), "--access", "legal")
    try:
        with langgraph_dev(tmp / "langgraph.json", env, tmp / "server.log") as url:
            yield Server(url, keys_file)
    finally:  # the session's other tests see the knowledge base as it was
        _cli(ingested_home, "docs", "remove", "kestrel-memo-q4")


MEMO = ("---\ntitle: Kestrel arbitration memo\naccess: legal\n---\n# Arbitration fee\n"
        "The arbitration fee for the Kestrel case is 86,000 euros, cost code KST-CANARY-5V1.\n")
KESTREL = "What is the arbitration fee for the Kestrel case?"


def _cli(home: Path, *argv: str) -> None:
    done = subprocess.run([sys.executable, "-m", "grounded_agent.cli", *argv],
                          env=child_env(home), cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]


@pytest.fixture(scope="module")
def alices_thread(server: Server) -> dict[str, Any]:
    """Alice's thread after one answered question (she claims it for bob: the claim is ignored)."""
    with server.client(KEYS["alice"]) as alice:
        thread = alice.post("/threads", json={"metadata": {"owner": "bob"}}).json()
        tid = thread["thread_id"]
        run = alice.post(f"/threads/{tid}/runs", json={"assistant_id": "agent",
                                                       "input": {"question": QUESTION}}).json()
        out = alice.get(f"/threads/{tid}/runs/{run['run_id']}/join").json()
    assert out["status"] in ("answered", "answered_with_caveat"), out
    assert "29" in out["answer"]
    return {"thread_id": tid, "run_id": run["run_id"], "owner": thread["metadata"]["owner"]}


@pytest.mark.parametrize("key", [None, "", "wrong", hashlib.sha256(KEYS["alice"].encode()).hexdigest()],
                         ids=["no key", "empty", "wrong key", "the digest"])
def test_no_or_a_wrong_key_is_401(server: Server, key: str | None) -> None:
    with server.client(key) as client:
        for method, path, body in [("POST", "/threads/search", {}), ("POST", "/threads", {}),
                                   ("POST", "/assistants/search", {}),
                                   ("POST", "/runs/wait", {"assistant_id": "agent",
                                                           "input": {"question": QUESTION}})]:
            response = client.request(method, path, json=body)
            assert response.status_code == 401, (path, response.text)
    # saying it comes from Studio lets nobody in: Studio's own login is off (disable_studio_auth)
    with httpx.Client(base_url=server.url, headers={"x-auth-scheme": "langsmith"}) as client:
        assert client.post("/threads/search", json={}).status_code == 401


def test_the_graph_receives_the_caller_with_its_groups(server: Server) -> None:
    """What a graph reads from config["configurable"]["langgraph_auth_user"]: the server's user
    object (no dict), whose groups and sees_all read by key, `.get` and attribute alike."""
    seen = {}
    for name, key in [("alice", KEYS["alice"]), ("bob", KEYS["bob"]), ("shared-key", SHARED)]:
        with server.client(key) as client:
            response = client.post("/runs/wait", json={"assistant_id": "probe", "input": {}})
        assert response.status_code == 200, response.text
        seen[name] = response.json()["seen"]
    alice = seen["alice"]
    assert alice["type"] == "ProxyUser" and not alice["is_dict"] and not alice["is_mapping"]
    assert alice["identity"] == "alice"
    assert alice["item_groups"] == alice["get_groups"] == alice["attr_groups"] == ["legal"]
    assert alice["item_sees_all"] is alice["get_sees_all"] is alice["attr_sees_all"] is False
    assert seen["bob"]["item_groups"] == ["sales"] and seen["bob"]["item_sees_all"] is False
    assert seen["shared-key"]["identity"] == "shared-key"
    assert seen["shared-key"]["item_groups"] == [] and seen["shared-key"]["item_sees_all"] is True


def test_alice_reads_her_thread(server: Server, alices_thread: dict[str, Any]) -> None:
    tid = alices_thread["thread_id"]
    assert alices_thread["owner"] == "alice"
    with server.client(KEYS["alice"]) as alice:
        assert alice.get(f"/threads/{tid}").status_code == 200
        assert alice.get(f"/threads/{tid}/state").json()["values"]["question"] == QUESTION
        assert tid in [t["thread_id"] for t in alice.post("/threads/search", json={}).json()]
        again = alice.post(f"/threads/{tid}/runs/wait", json={
            "assistant_id": "agent", "input": {"question": SECOND}})
        assert again.status_code == 200 and again.json()["question"] == SECOND


def test_for_bob_alices_thread_does_not_exist(server: Server, alices_thread: dict[str, Any]) -> None:
    tid, run_id = alices_thread["thread_id"], alices_thread["run_id"]
    run = {"assistant_id": "agent", "input": {"question": "What did alice ask?"}}
    with server.client(KEYS["bob"]) as bob:
        for method, path, body in [
            ("GET", f"/threads/{tid}", None),
            ("GET", f"/threads/{tid}/state", None),
            ("GET", f"/threads/{tid}/history", None),
            ("POST", f"/threads/{tid}/history", {}),
            ("GET", f"/threads/{tid}/runs", None),
            ("GET", f"/threads/{tid}/runs/{run_id}", None),
            ("GET", f"/threads/{tid}/runs/{run_id}/join", None),
            ("POST", f"/threads/{tid}/runs/wait", run),
            ("POST", f"/threads/{tid}/runs", run),
            ("POST", f"/threads/{tid}/runs/stream", run),
            ("POST", f"/threads/{tid}/state", {"values": {"question": "overwritten"}}),
            ("PATCH", f"/threads/{tid}", {"metadata": {"owner": "bob"}}),
            ("DELETE", f"/threads/{tid}", None),
        ]:
            response = bob.request(method, path, json=body)
            assert response.status_code == 404, (method, path, response.status_code, response.text)
            assert "Pro plan" not in response.text
        listed = bob.post("/threads/search", json={}).json()
        assert tid not in [t["thread_id"] for t in listed]
        assert bob.post("/threads/search", json={"ids": [tid]}).json() == []
        # asking to create it again does not hand it over (the server says it exists: 409)
        taken = bob.post("/threads", json={"thread_id": tid, "if_exists": "do_nothing"})
        assert taken.status_code == 409 and "Pro plan" not in taken.text
    with server.client(KEYS["alice"]) as alice:  # and it is still hers, unchanged
        state = alice.get(f"/threads/{tid}/state").json()
        assert state["values"]["question"] != "overwritten"
        assert alice.get(f"/threads/{tid}").json()["metadata"]["owner"] == "alice"


def test_bob_has_threads_of_his_own(server: Server, alices_thread: dict[str, Any]) -> None:
    with server.client(KEYS["bob"]) as bob:
        tid = bob.post("/threads", json={}).json()["thread_id"]
        assert bob.post(f"/threads/{tid}/runs/wait", json={
            "assistant_id": "probe", "input": {}}).json()["seen"]["identity"] == "bob"
        listed = bob.post("/threads/search", json={}).json()
        assert tid in [t["thread_id"] for t in listed]
        assert {t["metadata"]["owner"] for t in listed} == {"bob"}  # his stateless runs' too
    with server.client(KEYS["alice"]) as alice:
        assert alice.get(f"/threads/{tid}").status_code == 404


def test_the_shared_key_sees_every_thread(server: Server, alices_thread: dict[str, Any]) -> None:
    with server.client(SHARED) as shared:
        state = shared.get(f"/threads/{alices_thread['thread_id']}/state").json()
        assert state["values"]["question"] in (QUESTION, SECOND)
        assert alices_thread["thread_id"] in [
            t["thread_id"] for t in shared.post("/threads/search", json={}).json()]


def test_a_key_added_to_the_file_works_without_a_restart(server: Server) -> None:
    with server.client(KEYS["carol"]) as carol:
        assert carol.post("/threads/search", json={}).status_code == 401
        time.sleep(0.01)  # a new modification time even on coarse clocks
        with server.keys_file.open("a", encoding="utf-8") as f:
            f.write("\n" + _entry("carol", ["support"]))
        assert carol.post("/threads/search", json={}).status_code == 200


def test_documents_follow_the_callers_groups(server: Server) -> None:
    """Alice (legal) reads the legal memo; bob (sales) gets no trace of it, asked directly, asked
    for a list of documents, or through a thread of his own; the shared key reads it."""
    def answers(key: str, question: str, thread: bool = False) -> str:
        with server.client(key) as client:
            if thread:
                tid = client.post("/threads", json={}).json()["thread_id"]
                response = client.post(f"/threads/{tid}/runs/wait", json={
                    "assistant_id": "agent", "input": {"question": question}})
            else:
                response = client.post("/runs/wait", json={
                    "assistant_id": "agent", "input": {"question": question}})
        assert response.status_code == 200, response.text
        return response.text

    assert "KST-CANARY-5V1" in answers(KEYS["alice"], KESTREL)
    assert "KST-CANARY-5V1" in answers(SHARED, KESTREL)
    for question, thread in [(KESTREL, False), (KESTREL, True),
                             ("What is cost code KST-CANARY-5V1 for?", False),
                             ("list all documents", False), ("list documents about arbitration", True)]:
        body = answers(KEYS["bob"], question, thread).replace(question, " ")
        assert "KST-CANARY-5V1" not in body and "86,000" not in body
        assert "Kestrel arbitration memo" not in body and "kestrel-memo-q4" not in body
    listed = answers(KEYS["alice"], "list documents about arbitration")
    assert "Kestrel arbitration memo" in listed  # the control for the listing
