"""PDF, Word and HTML files into a real embedded PostgreSQL: pages in the store and in findings,
bad files reported while the rest go in, versions, the `docs` commands and `ingest --sync`."""

from __future__ import annotations

import json
import re
import shutil
from datetime import datetime
from pathlib import Path

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding
from sqlalchemy import text

from grounded_agent.cli import main
from grounded_agent.store import (
    KnowledgeStore,
    SearchFilters,
    StoreSettings,
    aingest_paths,
    open_store,
)
from tests.support.documents import docx_bytes, pdf_bytes, write

pytestmark = pytest.mark.integration


def _guide(path: Path, export_days: str = "seven") -> Path:
    pages = [
        [("title", "Admin guide"), ("p", "This guide is for the owners of a Beacon workspace.")],
        [("h1", "Single sign-on"), ("p", "Beacon supports SAML 2.0 and OpenID Connect.")],
        [("h1", "Data export"), ("p", f"Exports stay available for download for {export_days} days.")],
    ]
    return write(path, pdf_bytes(pages, info={"/Title": "Beacon admin guide"}))


def _onboarding(path: Path) -> Path:
    blocks = [
        ("title", "Onboarding services"),
        ("h1", "Guided rollout"),
        ("p", "The Guided rollout package costs 6,000 euros and lasts six weeks."),
    ]
    return write(path, docx_bytes(blocks, core={"modified": datetime(2026, 8, 20)}))


def _status(path: Path) -> Path:
    path.write_text(
        "<html><head><title>Status page help</title></head><body><nav>Home</nav>"
        "<h1>Status page</h1><p>Incidents are kept on the status page for 90 days.</p>"
        "</body></html>",
        encoding="utf-8",
    )
    return path


async def _rows(store: KnowledgeStore, where: str = "true") -> list[tuple[object, ...]]:
    async def q() -> list[tuple[object, ...]]:
        engine = await store._aengine()
        async with engine.connect() as conn:
            res = await conn.execute(
                text(
                    f"SELECT doc_id, version, chunk_index, page, section, is_active "
                    f'FROM "{store.table_name}" WHERE {where} ORDER BY doc_id, version, chunk_index'
                )
            )
            return [tuple(r) for r in res.all()]

    return await store._call(q(), "test query", None)


async def _searched(store: KnowledgeStore, query: str) -> set[str]:
    return {f.source_id for f in await store.asearch(query, k=20)}


async def test_formats_go_in_with_pages_and_each_bad_file_is_reported(
    fake_store: KnowledgeStore, tmp_path: Path
) -> None:
    _guide(tmp_path / "guide.pdf")
    _onboarding(tmp_path / "onboarding.docx")
    _status(tmp_path / "status.html")
    write(tmp_path / "scan.pdf", pdf_bytes([[("p", "x")]], image_only=True))
    write(tmp_path / "locked.pdf", pdf_bytes([[("p", "Secret.")]], user_password="pw"))
    write(tmp_path / "cut.pdf", pdf_bytes([[("p", "Text " * 40)]])[:300])
    write(tmp_path / "empty.docx", b"")
    report = await aingest_paths([tmp_path], fake_store)
    reasons = {Path(e.file).name: e.reason for e in report.errors}
    assert (report.files, report.documents, report.added) == (7, 3, 3)
    assert reasons["scan.pdf"].startswith("no text layer (scanned PDF?)")
    assert reasons["locked.pdf"].startswith("encrypted PDF")
    assert reasons["cut.pdf"].startswith("corrupt PDF")
    assert reasons["empty.docx"] == "empty file (0 bytes)"
    assert len(set(reasons.values())) == 4  # four faults, four different reasons

    rows = await _rows(fake_store)
    assert {r[0] for r in rows} == {"guide", "onboarding", "status"}  # nothing of the bad files
    assert [(r[3], r[4]) for r in rows if r[0] == "guide"] == [
        (1, "Admin guide"),
        (2, "Admin guide > Single sign-on"),
        (3, "Admin guide > Data export"),
    ]
    assert {r[3] for r in rows if r[0] != "guide"} == {None}

    [hit] = [
        f
        for f in await fake_store.asearch(
            "download exports days", k=5, filters=SearchFilters(doc_ids=["guide"])
        )
        if "download" in f.text
    ]
    assert (hit.page, hit.section, hit.title) == (3, "Admin guide > Data export", "Beacon admin guide")
    assert hit.extra["format"] == "pdf" and hit.extra["source_path"] == str(tmp_path / "guide.pdf")


async def test_binary_files_version_like_markdown(
    fake_store: KnowledgeStore, tmp_path: Path
) -> None:
    old = _guide(tmp_path / "guide.pdf")
    (tmp_path / "guide.pdf.meta.yaml").write_text(
        "id: admin-guide\nversion: 2026.1\ndocument_date: 2026-01-10\n"
    )
    first = await aingest_paths([old], fake_store)
    assert (first.added, first.errors) == (1, [])
    again = await aingest_paths([old], fake_store)
    assert (again.skipped, again.added, again.chunks) == (1, 0, 0)  # unchanged: skipped

    _guide(old, export_days="fourteen")  # same version, new text: replaced
    changed = await aingest_paths([old], fake_store)
    assert (changed.replaced, changed.skipped) == (1, 0)
    (tmp_path / "guide.pdf.meta.yaml").write_text(  # only the sidecar changes: replaced too
        "id: admin-guide\nversion: 2026.1\ndocument_date: 2026-01-10\ntitle: Admin handbook\n"
    )
    retitled = await aingest_paths([old], fake_store)
    assert retitled.replaced == 1

    new = _guide(tmp_path / "guide_2027.pdf", export_days="thirty")
    (tmp_path / "guide_2027.pdf.meta.yaml").write_text(
        "id: admin-guide\nversion: 2027.1\ndocument_date: 2027-01-05\n"
    )
    newer = await aingest_paths([new], fake_store)
    assert (newer.added, newer.deactivated) == (1, 1)
    active = {(r[1], r[5]) for r in await _rows(fake_store)}
    assert active == {("2026.1", False), ("2027.1", True)}
    found = await fake_store.asearch("Exports stay available for download", k=10)
    assert {(f.source_id, f.version) for f in found} == {("admin-guide", "2027.1")}


async def test_docs_list_show_remove_and_bring_back(
    fake_store: KnowledgeStore, tmp_path: Path
) -> None:
    _guide(tmp_path / "guide.pdf")
    _onboarding(tmp_path / "onboarding.docx")
    (tmp_path / "price.md").write_text("---\nid: price\nversion: '2'\ndocument_date: 2026-09-01\n---\n# Price\n\nPro costs 29 euros.\n")
    (tmp_path / "price_old.md").write_text("---\nid: price\nversion: '1'\ndocument_date: 2025-01-01\n---\n# Price\n\nPro costs 24 euros.\n")
    await aingest_paths([tmp_path], fake_store)

    listed = await fake_store.alist_documents()
    assert [(d.doc_id, d.version, d.status) for d in listed] == [
        ("guide", None, "active"),
        ("onboarding", None, "active"),
        ("price", "2", "active"),
    ]
    guide = listed[0]
    assert (guide.format, guide.chunks, guide.pages, guide.title) == ("pdf", 3, 3, "Beacon admin guide")
    assert guide.source_path == str(tmp_path / "guide.pdf")
    every = await fake_store.alist_documents(all_versions=True)
    assert [(d.doc_id, d.version, d.status) for d in every][-2:] == [
        ("price", "2", "active"),
        ("price", "1", "superseded"),
    ]

    detail = await fake_store.aget_document("guide")
    assert detail is not None
    assert [(c.chunk_index, c.page, c.section) for c in detail.chunks] == [
        (0, 1, "Admin guide"),
        (1, 2, "Admin guide > Single sign-on"),
        (2, 3, "Admin guide > Data export"),
    ]
    assert await fake_store.aget_document("no-such-doc") is None

    assert "guide" in await _searched(fake_store, "Beacon supports SAML 2.0 and OpenID Connect")
    removal = await fake_store.aremove_document("guide")
    assert removal is not None and (removal.versions, removal.chunks) == (1, 3)
    # at once: the very next search no longer finds it
    assert "guide" not in await _searched(fake_store, "Beacon supports SAML 2.0 and OpenID Connect")
    assert "guide" not in {d.doc_id for d in await fake_store.alist_documents()}
    assert ("guide", "removed") in {(d.doc_id, d.status) for d in await fake_store.alist_documents(all_versions=True)}
    assert await fake_store.aremove_document("no-such-doc") is None

    removed_price = await fake_store.aremove_document("price")  # both versions
    assert removed_price is not None and removed_price.versions == 2
    assert "price" not in await _searched(fake_store, "Pro costs euros")

    back = await aingest_paths([tmp_path / "guide.pdf"], fake_store)
    assert (back.skipped, back.restored, back.chunks) == (1, 1, 0)  # no re-embedding
    assert "guide" in await _searched(fake_store, "Beacon supports SAML 2.0 and OpenID Connect")
    old_only = await aingest_paths([tmp_path / "price_old.md"], fake_store)
    assert old_only.restored == 1  # the old version comes back; the removed newer one stays out
    assert {(d.version, d.status) for d in await fake_store.alist_documents(all_versions=True) if d.doc_id == "price"} == {
        ("1", "active"),
        ("2", "removed"),
    }


async def test_sync_removes_documents_whose_files_are_gone(
    fake_store: KnowledgeStore, tmp_path: Path
) -> None:
    kb, other = tmp_path / "kb", tmp_path / "other"
    (kb / "sub").mkdir(parents=True)
    other.mkdir()
    (kb / "a.md").write_text("# A\n\nAlpha text about otters.\n")
    _guide(kb / "guide.pdf")
    _onboarding(kb / "sub" / "onboarding.docx")
    _status(kb / "status.html")
    (other / "e.md").write_text("# E\n\nEpsilon text about beavers.\n")
    await aingest_paths([kb, other], fake_store)
    assert {d.doc_id for d in await fake_store.alist_documents()} == {
        "a", "guide", "onboarding", "status", "e",
    }

    (kb / "guide.pdf").unlink()
    plain = await aingest_paths([kb], fake_store)  # without --sync nothing is removed
    assert plain.removed == 0 and "guide" in {d.doc_id for d in await fake_store.alist_documents()}

    (kb / "a.md").rename(kb / "sub" / "a.md")  # moved, not gone
    write(kb / "status.html", bytes(range(256)) * 4)  # unreadable this time: kept, not removed
    report = await aingest_paths([kb], fake_store, sync=True)
    assert report.removed == 1
    assert [Path(e.file).name for e in report.errors] == ["status.html"]
    listed = {d.doc_id: d for d in await fake_store.alist_documents()}
    assert set(listed) == {"a", "onboarding", "status", "e"}  # e: another directory
    assert listed["a"].source_path == str(kb / "sub" / "a.md")
    assert "guide" not in await _searched(fake_store, "Beacon supports SAML 2.0 and OpenID Connect")

    again = await aingest_paths([kb], fake_store, sync=True)
    assert again.removed == 0  # idempotent
    _guide(kb / "guide.pdf")
    back = await aingest_paths([kb], fake_store, sync=True)
    assert (back.restored, back.removed) == (1, 0)
    assert "guide" in {d.doc_id for d in await fake_store.alist_documents()}


def test_cli_docs_commands_and_sync(
    store_settings: StoreSettings,
    table_name: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("GROUNDED_AGENT_KB_TABLE", table_name)
    store = open_store(store_settings, embeddings=DeterministicFakeEmbedding(size=384), table_name=table_name)
    try:
        kb = tmp_path / "kb"
        kb.mkdir()
        _guide(kb / "guide.pdf")
        _onboarding(kb / "onboarding.docx")
        from grounded_agent.store import ingest_paths

        ingest_paths([kb], store)
        capsys.readouterr()

        assert main(["docs", "list", "--json"]) == 0
        rows = json.loads(capsys.readouterr().out)
        assert [(r["doc_id"], r["status"], r["pages"]) for r in rows] == [
            ("guide", "active", 3),
            ("onboarding", "active", None),
        ]
        assert main(["docs", "show", "guide"]) == 0
        shown = capsys.readouterr().out
        assert "p. 3  Admin guide > Data export" in shown and str(kb / "guide.pdf") in shown
        assert main(["docs", "show", "nope"]) == 1
        assert "no document with id 'nope'" in capsys.readouterr().err

        assert main(["docs", "remove", "onboarding"]) == 0
        assert "removed onboarding: 1 version, 1 chunk no longer searched" in capsys.readouterr().out
        assert main(["docs", "list"]) == 0
        header, *listed = capsys.readouterr().out.splitlines()
        assert header.split() == ["DOCUMENT", "VERSION", "STATUS", "DATE", "CHUNKS", "PAGES",
                                  "FORMAT", "TITLE"]
        assert [line.split()[0] for line in listed] == ["guide"]
        assert "active" in listed[0] and "3 pages" in listed[0] and "pdf" in listed[0]
        assert main(["docs", "list", "--all-versions"]) == 0
        assert re.search(r"onboarding +- +removed", capsys.readouterr().out)

        shutil.move(kb / "guide.pdf", tmp_path / "guide.pdf")
        assert main(["ingest", str(kb), "--sync", "--json"]) == 0
        out = json.loads(capsys.readouterr().out)
        assert (out["removed"], out["restored"], out["errors"]) == (1, 1, [])  # docx came back
        assert main(["docs", "list", "--json"]) == 0
        assert [r["doc_id"] for r in json.loads(capsys.readouterr().out)] == ["onboarding"]
        assert main(["ingest", str(kb / "onboarding.docx"), "--sync"]) == 2
        assert "--sync needs a directory" in capsys.readouterr().err

        # every document at once, and a named set: one line each, plurals right
        assert main(["docs", "remove"]) == 2
        assert main(["docs", "remove", "onboarding", "--all"]) == 2
        assert "document ids or --all" in capsys.readouterr().err
        assert main(["docs", "remove", "--all"]) == 0
        assert "removed onboarding: 1 version, 1 chunk no longer searched" in capsys.readouterr().out
        assert main(["docs", "list"]) == 0
        assert capsys.readouterr().out.startswith("no documents")
        assert main(["docs", "remove", "--all"]) == 0
        assert "no documents to remove" in capsys.readouterr().out
        assert main(["docs", "remove", "onboarding", "nope"]) == 1  # known: removed; unknown: named
        assert "no document with id 'nope'" in capsys.readouterr().err
    finally:
        store.run_sync(store.adrop())
        store.run_sync(store.aclose())
