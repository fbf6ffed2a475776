"""Who may read what (issue 43): document access set at ingest, changed in place, and enforced in
the store's query (both halves, before ranking) with row-level security as the second wall; a
cross-principal suite over every way a caller reads. Real PostgreSQL, the real embedding model,
real HTTP; no model (offline)."""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from grounded_agent import api, search_api
from grounded_agent.graph.builder import build_graph
from grounded_agent.loaders.base import IngestError
from grounded_agent.principals import EVERYONE, Viewer, digest
from grounded_agent.schemas import InvalidQuestion
from grounded_agent.serve.app import ServeSettings, create_app
from grounded_agent.store import KnowledgeStore
from grounded_agent.store.access import READER_ROLE
from grounded_agent.store.ingest import aingest_paths
from tests.support.serving import serving

pytestmark = pytest.mark.integration

ALICE, BOB = "alice-key-a7c31e", "bob-key-b9d40f"
LEGAL, SALES = Viewer(("legal",)), Viewer(("sales",))

# What only legal (alice) may read, and what nobody but a principal who sees everything may read.
# Bob's probes aim at these without ever sending them (except where a probe quotes the code, whose
# echo of the question is taken out before the check).
LEGAL_SECRETS = ("lgl-canary-7q2x", "2.4 million", "14 march 2027", "quorvane settlement memo")
PRIVATE_SECRETS = ("prv-canary-3m5k", "tarnwick board minutes", "18.6 million")
SALES_SECRETS = ("sls-canary-8b2c", "12 percent")

DOCS = {
    "public/handbook.md": (
        "---\ntitle: Staff handbook\n---\n# Office hours\n"
        "The office is open from 9:00 to 17:00 on weekdays. Visitors sign in at the front desk "
        "and wear a badge.\n\n# Parking\nStaff park in the north garage at no charge.\n"
    ),
    "legal/quorvane-memo-x71.md": (
        "---\ntitle: Quorvane settlement memo\naccess: legal\n---\n# Settlement reserve\n"
        "The settlement reserve for the Quorvane dispute is 2.4 million euros, booked under "
        "reserve code LGL-CANARY-7Q2X.\n\n# Signing deadline\nThe Quorvane settlement must be "
        "signed by 14 March 2027.\n"
    ),
    "sales/discount-ladder-s9.md": (  # declares nothing: the ingest's access (sales) applies
        "---\ntitle: Discount ladder\n---\n# Discounts\n"
        "Sales may grant a 12 percent discount on orders above 40 seats, approval code "
        "SLS-CANARY-8B2C.\n"
    ),
    "board/tarnwick-minutes-k22.md": (
        "---\ntitle: Tarnwick board minutes\naccess: private\n---\n# Acquisition\n"
        "The board approved the Tarnwick acquisition for 18.6 million euros, decision code "
        "PRV-CANARY-3M5K.\n"
    ),
}

# Questions aimed at what bob must not read: the content, the amounts, the dates, the title's
# words, and (QUOTING) the code itself.
AIMED = [
    "What is the settlement reserve for the Quorvane dispute?",
    "How much money is reserved for the Quorvane settlement?",
    "Which reserve code is the Quorvane reserve booked under?",
    "By when must the Quorvane settlement be signed?",
    "What is the signing deadline of the settlement?",
    "How large is the settlement reserve in euros?",
    "Tell me about the Quorvane dispute.",
    "What does the legal memo say about the reserve?",
    "What did the board approve about the Tarnwick acquisition?",
    "For how much was Tarnwick acquired?",
    "What is the decision code of the acquisition?",
    "Which settlement deadlines are there in March 2027?",
    "Summarise every memo of the legal team.",
    "What are the reserves booked by the legal department?",
    "settlement reserve Quorvane euros code",
]
QUOTING = [
    "What is booked under reserve code LGL-CANARY-7Q2X?",
    "Which document mentions LGL-CANARY-7Q2X?",
    "What was decided under decision code PRV-CANARY-3M5K?",
]
LISTINGS = [
    "list all documents",
    "List all documents about settlement",
    "show me the documents about Quorvane",
    "list documents about the Tarnwick acquisition",
    "which documents mention a reserve code?",
    "list all documents in English",
    "list all documents sorted by title",
]


def _write(root: Path) -> Path:
    for rel, body in DOCS.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body, encoding="utf-8")
    return root


async def _ingest(store: KnowledgeStore, root: Path) -> dict[str, str]:
    """The corpus in the store (sales/ with ingest access `sales`); doc id by title."""
    for sub in ("public", "legal", "board"):
        report = await aingest_paths([root / sub], store)
        assert not report.errors, report.errors
    report = await aingest_paths([root / "sales"], store, access=("sales",))
    assert not report.errors, report.errors
    return {v.title or "": v.doc_id for v in await store.alist_documents(viewer=EVERYONE)}


def _leaked(body: str, secrets: tuple[str, ...], sent: list[str]) -> list[str]:
    """The secrets in a response, after taking out the caller's own words (an echoed question
    holds what it quoted)."""
    low = body.lower()
    for s in sorted(sent, key=len, reverse=True):
        low = low.replace(s.lower(), " ")
    return [s for s in secrets if s in low]


class Tally:
    """Requests sent and what came back that the caller may not read."""

    def __init__(self, secrets: tuple[str, ...]) -> None:
        self.secrets = secrets
        self.requests: Counter[str] = Counter()
        self.leaks: list[tuple[str, str, list[str]]] = []

    def check(self, route: str, body: str, sent: list[str]) -> str:
        self.requests[route] += 1
        found = _leaked(body, self.secrets, sent)
        if found:
            self.leaks.append((route, " | ".join(sent)[:120], found))
        return body

    @property
    def total(self) -> int:
        return sum(self.requests.values())


async def test_access_from_front_matter_ingest_argument_and_default(
    real_store: KnowledgeStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = await _ingest(real_store, _write(tmp_path / "kb"))
    access = {v.title: v.access for v in await real_store.alist_documents(viewer=EVERYONE)}
    assert access == {"Staff handbook": None, "Quorvane settlement memo": ["legal"],
                      "Discount ladder": ["sales"], "Tarnwick board minutes": []}
    # a document's own declaration wins over the ingest's argument
    (tmp_path / "more").mkdir()
    (tmp_path / "more" / "nda.md").write_text(
        "---\ntitle: NDA template\naccess: legal, sales\n---\nAn NDA lasts three years.\n", "utf-8")
    (tmp_path / "more" / "faq.jsonl").write_text(json.dumps(
        {"id": "faq-1", "title": "Returns FAQ", "text": "Returns are accepted for 30 days.",
         "access": ["support"]}) + "\n", "utf-8")
    await aingest_paths([tmp_path / "more"], real_store, access=("hr",))
    # the setting makes documents that declare nothing private
    monkeypatch.setenv("GROUNDED_AGENT_DEFAULT_ACCESS", "private")
    (tmp_path / "later").mkdir()
    (tmp_path / "later" / "plan.md").write_text("# Plan\nThe plan is due in May.\n", "utf-8")
    await aingest_paths([tmp_path / "later"], real_store)
    access = {v.title: v.access for v in await real_store.alist_documents(viewer=EVERYONE)}
    assert access["NDA template"] == ["legal", "sales"]
    assert access["Returns FAQ"] == ["support"]
    assert access["Plan"] == []
    # who sees which titles, by group
    seen = {
        name: sorted(v.title or "" for v in await real_store.alist_documents(viewer=viewer))
        for name, viewer in [("legal", LEGAL), ("sales", SALES), ("none", Viewer(()))]
    }
    assert seen["legal"] == ["NDA template", "Quorvane settlement memo", "Staff handbook"]
    assert seen["sales"] == ["Discount ladder", "NDA template", "Staff handbook"]
    assert seen["none"] == ["Staff handbook"]
    assert await real_store.aget_document(ids["Quorvane settlement memo"], viewer=SALES) is None
    assert await real_store.aget_document(ids["Quorvane settlement memo"], viewer=LEGAL)


async def test_an_invalid_access_is_refused_with_the_rule_and_nothing_is_lost(
    real_store: KnowledgeStore, tmp_path: Path
) -> None:
    (tmp_path / "bad.md").write_text("---\naccess: 'legal; drop table'\n---\nText.\n", "utf-8")
    (tmp_path / "good.md").write_text("# Good\nA good document.\n", "utf-8")
    report = await aingest_paths([tmp_path], real_store)
    assert [e.file for e in report.errors] == [str(tmp_path / "bad.md")]
    assert "access" in report.errors[0].reason and "drop" not in report.errors[0].reason
    assert [v.title for v in await real_store.alist_documents(viewer=EVERYONE)] == ["Good"]
    with pytest.raises(InvalidQuestion, match="a group must be a name"):
        api.set_access("good", "a b c", store=real_store)
    with pytest.raises(IngestError):
        from grounded_agent.loaders.base import parse_access

        parse_access(42)


async def test_access_changes_in_place_without_embedding_again(
    real_store: KnowledgeStore, tmp_path: Path
) -> None:
    ids = await _ingest(real_store, _write(tmp_path / "kb"))
    memo = ids["Quorvane settlement memo"]
    before = await _vectors(real_store, memo)
    question = "What is the settlement reserve for the Quorvane dispute?"
    assert "LGL-CANARY-7Q2X" not in _codes(await real_store.asearch(question, viewer=SALES))
    changed = await real_store.aset_access(memo, ["legal", "sales"])
    assert changed == len(before) > 0
    assert "LGL-CANARY-7Q2X" in _codes(await real_store.asearch(question, viewer=SALES))
    assert await _vectors(real_store, memo) == before  # the same vectors: nothing re-embedded
    # back to legal only, and re-ingesting the unchanged file with another access updates it
    await real_store.aset_access(memo, ["legal"])
    assert "LGL-CANARY-7Q2X" not in _codes(await real_store.asearch(question, viewer=SALES))
    report = await aingest_paths([tmp_path / "kb" / "sales"], real_store, access=("support",))
    assert report.access_changed == 1
    assert await _vectors(real_store, memo) == before
    pricing = ids["Discount ladder"]
    assert (await real_store.aget_document(pricing, viewer=SALES)) is None
    assert (await real_store.aget_document(pricing, viewer=Viewer(("support",)))) is not None
    assert await real_store.aset_access("no-such-doc", ["legal"]) == 0


async def _vectors(store: KnowledgeStore, doc_id: str) -> list[str]:
    engine = await store._ready()
    async with engine.connect() as conn:
        rows = (await conn.execute(text(
            f'SELECT embedding::text FROM "{store.table_name}" WHERE doc_id = :d '
            "ORDER BY chunk_index"), {"d": doc_id})).all()
    return [str(r[0]) for r in rows]


def _codes(findings: list[Any]) -> str:
    return " ".join(f.text for f in findings)


async def test_the_filter_runs_before_ranking(real_store: KnowledgeStore, tmp_path: Path) -> None:
    """Sixty legal passages are closer to the question than the three sales ones: sales still gets
    k=3 results, all its own. Ranked first and filtered after (the control), sales would get none:
    the nearest-neighbour and full-text halves each fetch fewer candidates than there are legal
    passages ahead of the sales ones."""
    legal, sales = tmp_path / "legal", tmp_path / "sales"
    legal.mkdir()
    sales.mkdir()
    for i in range(60):
        (legal / f"refund-{i:02d}.md").write_text(
            f"# Refund policy {i}\nThe refund policy for enterprise customers allows a refund "
            f"within {i + 10} days of purchase, case {i}.\n", "utf-8")
    for i in range(3):
        (sales / f"pitch-{i}.md").write_text(
            f"# Pitch {i}\nWhen a customer asks about refunds, point to the trial period of "
            f"{i + 20} days first.\n", "utf-8")
    await aingest_paths([legal], real_store, access=("legal",))
    await aingest_paths([sales], real_store, access=("sales",))
    question = "What is the refund policy for enterprise customers?"
    mine = await real_store.asearch(question, k=3, viewer=SALES)
    assert len(mine) == 3 and all(f.title.startswith("Pitch") for f in mine), mine
    # the control: everything ranked, then filtered (what a post-filter would do) finds nothing
    ranked = await real_store.asearch(question, k=20, viewer=EVERYONE)
    assert len(ranked) == 20
    assert [f for f in ranked if f.title.startswith("Pitch")] == []


async def test_row_level_security_holds_for_the_agents_role(
    real_store: KnowledgeStore, tmp_path: Path
) -> None:
    """As the reader role the agent reads with, a query with no WHERE clause of its own sees only
    the rows of the groups in the session's setting; the role cannot bypass the policy. The
    control: as the table's owner the same query counts the hidden rows."""
    await _ingest(real_store, _write(tmp_path / "kb"))
    assert real_store.row_security is True
    table = real_store.table_name
    engine = await real_store._ready()
    count = f'SELECT count(*) FROM "{table}" WHERE NOT (access IS NULL OR access && :g)'

    async def hidden(groups: str, see_all: str, role: str | None) -> int:
        async with engine.connect() as conn, conn.begin():
            if role:
                await conn.execute(text(f'SET LOCAL ROLE "{role}"'))
            await conn.execute(text(
                "SELECT set_config('grounded_agent.see_all', :a, true), "
                "set_config('grounded_agent.groups', :g, true)"), {"a": see_all, "g": groups})
            n = (await conn.execute(text(count), {"g": groups.split(",")})).scalar_one()
            return int(n)

    assert await hidden("sales", "off", READER_ROLE) == 0
    assert await hidden("", "off", READER_ROLE) == 0
    assert await hidden("sales", "off", None) >= 3  # the owner: memo (2 chunks) and minutes
    assert await hidden("sales", "on", READER_ROLE) >= 3  # a principal who sees everything
    async with engine.connect() as conn:
        row = (await conn.execute(text(
            "SELECT rolsuper, rolbypassrls, rolcanlogin FROM pg_roles WHERE rolname = :r"),
            {"r": READER_ROLE})).one()
        policies = (await conn.execute(text(
            "SELECT count(*) FROM pg_policies WHERE tablename = :t"), {"t": table})).scalar_one()
        forced = (await conn.execute(text(
            "SELECT relrowsecurity FROM pg_class WHERE relname = :t"), {"t": table})).scalar_one()
    assert tuple(row) == (False, False, False)
    assert policies >= 1 and forced is True
    # the role reads; it cannot write
    async with engine.connect() as conn, conn.begin():
        await conn.execute(text(f'SET LOCAL ROLE "{READER_ROLE}"'))
        with pytest.raises(Exception, match="permission denied"):
            await conn.execute(text(f'UPDATE "{table}" SET access = NULL'))


async def test_no_principal_reads_what_another_may_not(
    real_store: KnowledgeStore, tmp_path: Path
) -> None:
    """The cross-principal suite: bob (sales) probes alice's (legal) memo and the private board
    minutes through every way a caller reads, at least 2,000 requests; none returns a trace of
    them. Alice probes the sales document and the minutes the same way. The controls: alice's own
    questions return her memo's code (so the probes can find it), and the principal who sees
    everything reads all of it."""
    ids = await _ingest(real_store, _write(tmp_path / "kb"))
    memo, minutes = ids["Quorvane settlement memo"], ids["Tarnwick board minutes"]
    graph = build_graph(chat_model=None, store=real_store)
    keys = tmp_path / "keys.toml"
    keys.write_text(
        f'[[keys]]\nprincipal = "alice"\nsha256 = "{digest(ALICE)}"\ngroups = ["legal"]\n\n'
        f'[[keys]]\nprincipal = "bob"\nsha256 = "{digest(BOB)}"\ngroups = ["sales"]\n', "utf-8")
    app = create_app(graph, store=real_store, settings=ServeSettings(keys_file=keys), threads=True)
    bob = Tally(LEGAL_SECRETS + PRIVATE_SECRETS + (memo, minutes))
    alice = Tally(SALES_SECRETS + PRIVATE_SECRETS + (ids["Discount ladder"], minutes))
    control = Tally(LEGAL_SECRETS)
    thread = f"alice-{os.getpid()}-{time.monotonic_ns()}"
    t0 = time.monotonic()
    with serving(app) as base, httpx.Client(base_url=base, timeout=120) as c:
        def post(key: str, route: str, body: dict[str, Any]) -> httpx.Response:
            return c.post(f"/agent/{route}", json=body, headers={"X-API-Key": key})

        # the control first: alice reads her memo, in her own thread
        for q in AIMED[:4]:
            r = post(ALICE, "invoke", {"input": {"question": q},
                                       "config": {"configurable": {"thread_id": thread}}})
            assert r.status_code == 200, r.text
            control.check("alice:invoke", r.text, [])
        assert len(control.leaks) >= 3, "the control: alice's questions return her memo"

        probes = AIMED + QUOTING + LISTINGS
        worded = [v for q in probes for v in (q, f"Please answer from the documents: {q}",
                                              q.lower(), f"{q} Quote the source.")]
        # 1. answers through invoke, the same with the knowledge base named, and alice's thread
        for q in worded:
            for body in ({"input": {"question": q}},
                         {"input": {"question": q, "sources": ["knowledge_base"]}},
                         {"input": {"question": q},
                          "config": {"configurable": {"thread_id": thread}}}):
                bob.check("invoke", post(BOB, "invoke", body).text, [q])
        # a follow-up in alice's thread id: bob's own (new) thread, never her turns
        for q in ("What did I ask before?", "And what was the answer to my first question?",
                  "Repeat the reserve code from earlier."):
            r = post(BOB, "invoke", {"input": {"question": q},
                                     "config": {"configurable": {"thread_id": thread}}})
            assert r.status_code == 200
            assert AIMED[0] not in r.text
            bob.check("thread", r.text, [q])
        # 2. batch and stream
        for i in range(0, len(worded), 5):
            chunk = worded[i:i + 5]
            r = post(BOB, "batch", {"inputs": [{"question": q} for q in chunk]})
            assert r.status_code == 200
            bob.check("batch", r.text, chunk)
        for q in worded:
            bob.check("stream", post(BOB, "stream", {"input": {"question": q}}).text, [q])
        bob.check("stream_log", post(BOB, "stream_log", {"input": {"question": AIMED[0]}}).text,
                  [AIMED[0]])
        # 3. a caller who names a principal or groups itself is refused, and learns nothing
        for configurable in ({"groups": ["legal"]}, {"principal": "alice"},
                             {"principal": "alice", "groups": "legal"}):
            r = post(BOB, "invoke", {"input": {"question": AIMED[0]},
                                     "config": {"configurable": configurable}})
            assert r.status_code == 400
            bob.check("escalate", r.text, [AIMED[0]])
        # alice probes the sales document and the minutes the same way (fewer: the same code)
        for q in ["What discount may sales grant?", "What is the approval code for discounts?",
                  "For how much was Tarnwick acquired?", "list all documents",
                  "Which document mentions SLS-CANARY-8B2C?"]:
            alice.check("invoke", post(ALICE, "invoke", {"input": {"question": q}}).text, [q])
        endpoint_seconds = time.monotonic() - t0

    # 4. the Python API: questions, document search with filters and paging, management calls
    for q in probes:
        result = await api.aask(q, principal="bob", groups=["sales"], graph=graph)
        bob.check("python:ask", result.model_dump_json(), [q])
    for q in ("", "settlement", "Quorvane", "reserve code", "Tarnwick", "memo", "board"):
        for page in (1, 2, 3):
            for extra in ({}, {"language": "en"}, {"sort": "oldest"}, {"date_from": "2000-01-01"}):
                result = await search_api.asearch(
                    q, principal="bob", groups="sales", store=real_store, page=page,
                    page_size=1, **extra)
                bob.check("python:search", result.model_dump_json(), [q])
    for doc_id in (memo, minutes):
        for _ in range(20):
            shown = await real_store.aget_document(doc_id, viewer=SALES)
            bob.check("store:get", json.dumps(shown and shown.model_dump(mode="json")), [])
            removed = await real_store.aremove_document(doc_id, viewer=SALES)
            bob.check("store:remove", json.dumps(removed and removed.model_dump(mode="json")),
                      [])
    for all_versions in (False, True):
        for _ in range(25):
            listed = await real_store.alist_documents(all_versions=all_versions, viewer=SALES)
            bob.check("store:list", json.dumps([v.model_dump(mode="json") for v in listed]), [])
    # 5. the store itself, for the volume: every probe, k from 1 to 20, with and without filters
    for q in probes:
        for k in (1, 5, 10, 20):
            found = await real_store.asearch(q, k=k, viewer=SALES)
            bob.check("store:search", json.dumps([f.model_dump(mode="json") for f in found]), [q])
    while bob.total < 2000:
        q = probes[bob.total % len(probes)]
        found = await real_store.asearch(q, k=10, viewer=SALES)
        bob.check("store:search", json.dumps([f.model_dump(mode="json") for f in found]), [q])

    # what bob could not read is still there for those who may: nothing was removed
    assert await real_store.aget_document(memo, viewer=LEGAL) is not None
    assert await real_store.aget_document(minutes, viewer=EVERYONE) is not None
    everything = json.dumps([f.model_dump(mode="json") for f in await real_store.asearch(
        "Which acquisition did the board approve?", k=10, viewer=EVERYONE)])
    assert "PRV-CANARY-3M5K" in everything  # the control for the private document

    print(f"\ncross-principal: bob {bob.total} requests {dict(bob.requests)}, "
          f"alice {alice.total}; endpoint part {endpoint_seconds:.0f} s")
    assert bob.total >= 2000
    assert bob.leaks == [] and alice.leaks == []


def _cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    from grounded_agent import cli

    code = cli.main(argv)
    out = capsys.readouterr()
    return code, out.out + out.err


def test_the_cli_sets_shows_and_changes_access(
    store_settings: Any, table_name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("GROUNDED_AGENT_KB_TABLE", table_name)
    kb = _write(tmp_path / "kb")
    run: Callable[[list[str]], tuple[int, str]] = lambda argv: _cli(argv, capsys)  # noqa: E731
    try:
        assert run(["ingest", str(kb / "sales"), "--access", "sales"])[0] == 0
        assert run(["ingest", str(kb / "legal"), str(kb / "public")])[0] == 0
        code, out = run(["ingest", str(kb / "board"), "--access", "a b"])
        assert code == 2 and "--access" in out
        code, out = run(["docs", "list", "--json"])
        by_title = {d["title"]: d for d in json.loads(out)}
        assert by_title["Discount ladder"]["access"] == ["sales"]
        assert by_title["Staff handbook"]["access"] is None
        memo = by_title["Quorvane settlement memo"]["doc_id"]
        code, out = run(["docs", "list", "--as-groups", "sales"])
        assert code == 0 and "Discount ladder" in out and "Quorvane" not in out
        code, out = run(["docs", "show", memo, "--as-groups", "sales"])
        assert code == 1 and "no document" in out and "Quorvane" not in out
        code, out = run(["docs", "show", memo])
        assert code == 0 and "access: legal" in out
        code, out = run(["search", "settlement", "--as-groups", "sales", "--json"])
        assert code == 0 and "Quorvane" not in out
        code, out = run(["docs", "access", memo, "legal,sales"])
        assert code == 0 and "legal,sales" in out
        code, out = run(["search", "settlement", "--as-groups", "sales", "--json"])
        assert code == 0 and "Quorvane" in out
        code, out = run(["ask", "What is the settlement reserve for the Quorvane dispute?",
                         "--as-groups", "sales"])
        assert code == 0 and "LGL-CANARY-7Q2X" in out
        code, out = run(["docs", "access", memo, "private"])
        code, out = run(["ask", "What is the settlement reserve for the Quorvane dispute?",
                         "--as-groups", "legal"])
        assert "LGL-CANARY-7Q2X" not in out
        code, out = run(["docs", "remove", memo, "--as-groups", "legal"])
        assert code == 1
        code, out = run(["docs", "access", "no-such-doc", "legal"])
        assert code == 1 and "no document" in out
    finally:
        from grounded_agent.store import open_store

        store = open_store(store_settings, table_name=table_name)
        store.run_sync(store.adrop())
        store.close()
