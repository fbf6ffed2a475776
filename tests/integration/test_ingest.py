"""Ingestion into a real embedded PostgreSQL: bad files, idempotency, replacement, versions."""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding
from sqlalchemy import text

from grounded_agent.store import KnowledgeStore, SearchFilters, aingest_paths, open_store
from tests.conftest import squad_path

pytestmark = pytest.mark.integration


def _md(path: Path, doc_id: str, body: str, **meta: str) -> Path:
    front = "".join(f"{k}: {v}\n" for k, v in {"id": doc_id, **meta}.items())
    path.write_text(f"---\n{front}---\n{body}\n")
    return path


async def _rows(store: KnowledgeStore, where: str = "true") -> list[tuple[object, ...]]:
    async def q() -> list[tuple[object, ...]]:
        engine = await store._aengine()
        async with engine.connect() as conn:
            res = await conn.execute(
                text(
                    f'SELECT doc_id, version, chunk_index, is_active, content FROM "{store.table_name}" '
                    f"WHERE {where} ORDER BY doc_id, version, chunk_index"
                )
            )
            return [tuple(r) for r in res.all()]

    return await store._call(q(), "test query", None)


async def test_bad_files_are_reported_and_the_rest_ingested(
    fake_store: KnowledgeStore, tmp_path: Path
) -> None:
    _md(tmp_path / "good.md", "good", "# Good\n\nA fine document about otters.")
    (tmp_path / "bad_yaml.md").write_text("---\nid: [oops\n---\nText\n")
    (tmp_path / "bad_date.md").write_text("---\ndocument_date: 31/12/2025\n---\nText\n")
    (tmp_path / "empty.md").write_text("")
    (tmp_path / "broken.md").symlink_to(tmp_path / "missing-target.md")
    report = await aingest_paths([tmp_path], fake_store)
    assert (report.documents, report.added, report.files) == (1, 1, 4)  # the link is not read
    reasons = {Path(e.file).name: e.reason for e in report.errors}
    assert set(reasons) == {"bad_yaml.md", "bad_date.md", "empty.md", "broken.md"}
    assert "YAML" in reasons["bad_yaml.md"] and "document_date" in reasons["bad_date.md"]
    assert "link to nothing" in reasons["broken.md"]
    assert [r[0] for r in await _rows(fake_store)] == ["good"]


async def test_rerun_skips_and_change_replaces(fake_store: KnowledgeStore, tmp_path: Path) -> None:
    doc = _md(tmp_path / "a.md", "a", "# A\n\nFirst text.\n\n## Part\n\nSecond part.")
    first = await aingest_paths([doc], fake_store)
    assert (first.added, first.chunks, first.skipped) == (1, 2, 0)
    again = await aingest_paths([doc], fake_store)
    assert (again.documents, again.added, again.chunks, again.skipped) == (1, 0, 0, 1)
    _md(doc, "a", "# A\n\nRewritten text only.")
    changed = await aingest_paths([doc], fake_store)
    assert (changed.replaced, changed.chunks) == (1, 1)
    rows = await _rows(fake_store)
    assert [(r[2], r[4]) for r in rows] == [(0, "Rewritten text only.")]
    n, dfs = await fake_store.adocument_frequencies({"rewritten", "second"})
    assert n == 1 and dfs == {"rewritten": 1}  # term statistics follow the replacement


async def test_only_the_latest_version_is_searched(
    fake_store: KnowledgeStore, tmp_path: Path
) -> None:
    new = _md(
        tmp_path / "new.md",
        "price",
        "# Price\n\nPro costs 29 euros.",
        version='"2026.2"',
        document_date="2026-09-01",
    )
    old = _md(
        tmp_path / "old.md",
        "price",
        "# Price\n\nPro costs 24 euros.",
        version='"2025.1"',
        document_date="2025-03-01",
    )
    first = await aingest_paths([new], fake_store)
    second = await aingest_paths([old], fake_store)  # older arrives later: stays inactive
    assert (first.deactivated, second.deactivated, second.added) == (0, 0, 1)
    rows = await _rows(fake_store)
    assert {(r[1], r[3]) for r in rows} == {("2026.2", True), ("2025.1", False)}
    found = await fake_store.asearch("Pro costs 24 euros.", k=10)
    assert {f.version for f in found} == {"2026.2"}
    newer = _md(
        tmp_path / "newer.md",
        "price",
        "# Price\n\nPro costs 31 euros.",
        version='"2027.1"',
        document_date="2027-01-01",
    )
    third = await aingest_paths([newer], fake_store)
    assert third.deactivated == 1
    assert {f.version for f in await fake_store.asearch("Pro costs", k=10)} == {"2027.1"}


async def test_jsonl_ids_and_extra_fields(fake_store: KnowledgeStore, tmp_path: Path) -> None:
    p = tmp_path / "kb.jsonl"
    p.write_text(
        '{"doc_id": "Otters#0", "title": "Otters", "text": "Otters eat fish.", "article": "Otters"}\n'
        '{"id": "beavers", "text": "Beavers build dams.", "language": "en"}\n'
    )
    report = await aingest_paths([p], fake_store)
    assert (report.documents, report.added, report.errors) == (2, 2, [])
    by_id = {f.source_id: f for f in await fake_store.asearch("animals", k=5)}
    assert set(by_id) == {"Otters#0", "beavers"}
    assert by_id["Otters#0"].extra["article"] == "Otters"
    assert by_id["beavers"].title == "beavers" and by_id["beavers"].language == "en"


class _PoisonEmbedding(DeterministicFakeEmbedding):
    """Returns a vector of the wrong size for texts containing POISON, so the insert fails."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        out = super().embed_documents(texts)
        return [v[:-1] if "POISON" in t else v for v, t in zip(out, texts, strict=True)]


async def test_a_failed_write_leaves_the_old_document_whole(
    store_settings: object, table_name: str, tmp_path: Path
) -> None:
    store = open_store(store_settings, embeddings=_PoisonEmbedding(size=384), table_name=table_name)  # type: ignore[arg-type]
    try:
        doc = _md(tmp_path / "a.md", "a", "# A\n\nOne.\n\n## B\n\nTwo.")
        other = _md(tmp_path / "b.md", "b", "# B\n\nFine.")
        await aingest_paths([doc, other], store)
        before = await _rows(store)
        _md(doc, "a", "# A\n\nOne changed.\n\n## B\n\nTwo POISON.\n\n## C\n\nThree.")
        _md(other, "b", "# B\n\nFine, changed.")
        report = await aingest_paths([doc, other], store)
        assert [Path(e.file).name for e in report.errors] == ["a.md"]
        assert report.replaced == 1  # b still went in
        after = await _rows(store)
        assert [r for r in after if r[0] == "a"] == [r for r in before if r[0] == "a"]
    finally:
        await store.adrop()
        await store.aclose()


async def test_squad_corpus_ingests_once(fake_store: KnowledgeStore) -> None:
    corpus = squad_path("kb_corpus.jsonl")
    first = await aingest_paths([corpus], fake_store)
    assert (first.documents, first.added, first.errors) == (1204, 1204, [])
    second = await aingest_paths([corpus], fake_store)
    assert (second.documents, second.skipped, second.chunks, second.added) == (1204, 1204, 0, 0)
    dupes = await _rows(fake_store, "false")
    assert dupes == []
    chunks, active, docs = await fake_store.acounts()
    assert docs == 1204 and chunks == active == first.chunks
    hits = await fake_store.asearch("Normans", k=3, filters=SearchFilters(doc_ids=["Normans#0"]))
    assert [h.source_id for h in hits] == ["Normans#0"]


class CountingEmbedding(DeterministicFakeEmbedding):
    """Fake embeddings that count the passages embedded."""

    embedded: int = 0

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.embedded += len(texts)
        return super().embed_documents(texts)


async def test_a_document_postgresql_cannot_store_is_refused_before_embedding(
    store_settings: object, table_name: str, tmp_path: Path
) -> None:
    embeddings = CountingEmbedding(size=384)
    store = open_store(store_settings, embeddings=embeddings, table_name=table_name)  # type: ignore[arg-type]
    try:
        _md(tmp_path / "good.md", "good", "# Good\n\nThe Pro plan costs 49 EUR.")
        _md(tmp_path / "nul.md", "nul", "# Nul\n\nA NUL \x00 byte in the text.")
        (tmp_path / "lone.jsonl").write_text('{"id": "lone", "text": "half a pair \\ud800 here"}\n')
        report = await aingest_paths([tmp_path], store)
        # a NUL is a control character: the entry normalisation (inputs.clean_text) drops it
        assert report.documents == 2 and report.added == 2
        reasons = {Path(e.file).name.split(":")[0]: e.reason for e in report.errors}
        assert set(reasons) == {"lone.jsonl"}
        assert "lone surrogate" in reasons["lone.jsonl"]
        assert embeddings.embedded == 2  # the refused document was never embedded
        rows = await _rows(store)
        assert [r[0] for r in rows] == ["good", "nul"]
        assert all("\x00" not in str(r[4]) for r in rows)
    finally:
        await store.adrop()
        await store.aclose()


async def test_a_concurrent_ingestion_waits_then_skips_instead_of_embedding_again(
    store_settings: object, table_name: str, tmp_path: Path
) -> None:
    import asyncio

    from grounded_agent.store import ingest_paths

    for i in range(6):
        _md(tmp_path / f"d{i}.md", f"d{i}", f"# Doc {i}\n\nClause {i} says {i * 7} days.")
    first = CountingEmbedding(size=384)
    second = CountingEmbedding(size=384)
    a = open_store(store_settings, embeddings=first, table_name=table_name)  # type: ignore[arg-type]
    b = open_store(store_settings, embeddings=second, table_name=table_name)  # type: ignore[arg-type]
    try:
        await a.aensure_schema()
        ra, rb = await asyncio.gather(
            asyncio.to_thread(ingest_paths, [tmp_path], a),
            asyncio.to_thread(ingest_paths, [tmp_path], b),
        )
        # one wrote everything, the other waited for it and skipped everything
        assert sorted([ra.added, rb.added]) == [0, 6]
        assert sorted([ra.skipped, rb.skipped]) == [0, 6]
        assert sorted([first.embedded, second.embedded]) == [0, 6]
        assert len(await _rows(a)) == 6
    finally:
        await a.adrop()
        await a.aclose()
        await b.aclose()
