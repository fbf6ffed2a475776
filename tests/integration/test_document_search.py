"""The document search against a real embedded PostgreSQL: matching, filters, order, paging."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from grounded_agent import InvalidQuestion
from grounded_agent.documents import DocumentQuery, parse_query
from grounded_agent.store import KnowledgeStore, SearchFilters, StoreUnavailable, aingest_paths

pytestmark = pytest.mark.integration


def _write(path: Path, doc_id: str, body: str, **meta: str) -> None:
    front = "".join(f"{k}: {v}\n" for k, v in {"id": doc_id, **meta}.items())
    path.write_text(f"---\n{front}---\n{body}\n", encoding="utf-8")


async def _corpus(store: KnowledgeStore, root: Path) -> None:
    """Seven documents: contracts in two languages and years, a superseded version, an undated one."""
    docs = {
        "c-acme": ("Contract with Acme", "2026-03-10", "en", "The contract term is 24 months."),
        "c-beta": ("Contract with Beta", "2026-03-10", "en", "This contract renews yearly."),
        "c-gamma": ("Supply contract Gamma", "2025-12-31", "en", "Gamma delivers parts."),
        "c-old": ("Contract with Delta", "2024-06-01", "en", "An old contract for Delta."),
        "v-de": ("Vertrag mit Nordwind", "2026-01-05", "de",
                 "Dieser Vertrag regelt die Kündigung der Verträge."),
        "memo": ("Office memo", "2026-02-01", "en", "Lunch is at noon; no contracts here."),
        "undated": ("Contract template", "", "en", "A blank contract to copy."),
    }
    for doc_id, (title, day, lang, body) in docs.items():
        meta = {"title": title, "language": lang}
        if day:
            meta["document_date"] = day
        _write(root / f"{doc_id}.md", doc_id, f"# {title}\n\n{body}", **meta)
    # a superseded version of c-acme: its old words must never be listed
    old = root / "old"
    old.mkdir()
    _write(old / "c-acme-v1.md", "c-acme", "# Contract with Acme\n\nObsolete zebra clause.",
           title="Contract with Acme", language="en", document_date="2025-01-01",
           version='"1"')
    report = await aingest_paths([root], store)
    assert not report.errors


async def _ids(store: KnowledgeStore, **kw: object) -> list[str]:
    page = await store.asearch_documents(parse_query(None, **kw))
    return [i.doc_id for i in page.items]


async def test_text_filters_and_inclusive_dates(fake_store: KnowledgeStore, tmp_path: Path) -> None:
    await _corpus(fake_store, tmp_path)
    # full-text: "contract" also matches "contracts" (English stems); the memo mentions
    # "contracts" in its text, so it matches too
    assert set(await _ids(fake_store, text="contract")) == {
        "c-acme", "c-beta", "c-gamma", "c-old", "memo", "undated"
    }
    # all words must occur (in one chunk)
    assert await _ids(fake_store, text="contract renews") == ["c-beta"]
    # the superseded version's words are not searched
    assert await _ids(fake_store, text="zebra") == []
    # date_to is inclusive: a document dated on that very day is listed
    assert await _ids(fake_store, text="contract", date_to="2025-12-31", sort="newest") == [
        "c-gamma", "c-old"
    ]
    assert await _ids(fake_store, text="contract", date_from="2026-01-01", sort="oldest") == [
        "memo", "c-acme", "c-beta"
    ]
    # undated documents never pass a date filter
    assert "undated" not in await _ids(fake_store, date_from="1900-01-01")
    # language filter with the German configuration: "Verträge" and "Vertrag" meet
    assert await _ids(fake_store, text="Verträge", language="de") == ["v-de"]
    assert await _ids(fake_store, text="contract", language="de") == []
    assert await _ids(fake_store, language="DE") == ["v-de"]


async def test_order_is_total_and_pages_neither_overlap_nor_skip(
    fake_store: KnowledgeStore, tmp_path: Path
) -> None:
    await _corpus(fake_store, tmp_path)
    everything = await _ids(fake_store, sort="newest", page_size=50)
    # newest first, equal dates by doc id, undated last
    assert everything == ["c-acme", "c-beta", "memo", "v-de", "c-gamma", "c-old", "undated"]
    assert await _ids(fake_store, sort="oldest", page_size=50) == [
        "c-old", "c-gamma", "v-de", "memo", "c-acme", "c-beta", "undated"
    ]
    pages = [await fake_store.asearch_documents(parse_query(None, page=n, page_size=2))
             for n in (1, 2, 3, 4, 5)]
    seen = [i.doc_id for p in pages for i in p.items]
    assert seen == everything  # no overlap, no gap
    assert [p.total_items for p in pages] == [7] * 5
    assert [p.total_pages for p in pages] == [4] * 5
    assert pages[3].items and pages[4].items == []  # past the last page: empty, totals kept
    # relevance: the title match ranks first; ties are broken by doc id, the same every time
    ranked = await _ids(fake_store, text="contract", sort="relevance", page_size=50)
    assert ranked == await _ids(fake_store, text="contract", sort="relevance", page_size=50)
    assert ranked.index("memo") > max(ranked.index(d) for d in ("c-acme", "c-beta", "c-gamma"))
    paged = [d for n in (1, 2, 3) for d in
             await _ids(fake_store, text="contract", sort="relevance", page=n, page_size=2)]
    assert paged == ranked


async def test_result_fields_and_snippet(fake_store: KnowledgeStore, tmp_path: Path) -> None:
    await _corpus(fake_store, tmp_path)
    page = await fake_store.asearch_documents(parse_query(None, text="renews"))
    [item] = page.items
    assert (item.doc_id, item.title, item.language, item.document_date) == (
        "c-beta", "Contract with Beta", "en", date(2026, 3, 10)
    )
    assert "renews yearly" in item.snippet and len(item.snippet) <= 240
    assert (page.total_items, page.page, page.page_size, page.total_pages) == (1, 1, 20, 1)
    # a version is reported as ingested; the active Acme is the undated-version file
    acme = (await fake_store.asearch_documents(parse_query(None, text="Acme"))).items
    assert [a.doc_id for a in acme] == ["c-acme"] and "24 months" in acme[0].snippet


async def test_doc_id_scope_applies_before_top_k(
    fake_store: KnowledgeStore, tmp_path: Path
) -> None:
    """The combined intent's scope: a vector search limited to a selection returns k passages
    from inside it, not the global top k filtered down afterwards."""
    await _corpus(fake_store, tmp_path)
    everything = await fake_store.asearch("contract", k=3)
    outside = {f.source_id for f in everything}
    scope = [d for d in ("c-old", "undated", "v-de") if d not in outside][:2] or ["c-old"]
    scoped = await fake_store.asearch("contract", k=3, filters=SearchFilters(doc_ids=scope))
    assert scoped and {f.source_id for f in scoped} <= set(scope)
    assert len(scoped) == len(scope)  # one chunk per document here: all of the scope came back


def test_invalid_parameters_are_refused_with_a_clear_error() -> None:
    cases = {
        "page: must be at least 1": {"page": 0},
        "page_size: must be at most 50": {"page_size": 51},
        "date_from 2026-02-01 is after date_to 2026-01-01": {
            "date_from": "2026-02-01", "date_to": "2026-01-01"
        },
        "date_from must be a date written YYYY-MM-DD": {"date_from": "01/02/2026"},
    }
    for expected, raw in cases.items():
        with pytest.raises(InvalidQuestion) as err:
            parse_query(raw)
        assert expected in str(err.value)
    with pytest.raises(InvalidQuestion, match="sort must be one of newest, oldest, relevance"):
        parse_query({"sort": "popular"})
    with pytest.raises(InvalidQuestion, match="date_to must be a date"):
        parse_query({"date_to": "2026-02-30"})
    with pytest.raises(InvalidQuestion, match="date_from must be a date"):
        parse_query({"date_from": 2025})  # not seconds since 1970
    assert DocumentQuery(text="  a   b ").text == "a b"
    assert DocumentQuery().normalised().sort == "newest"
    assert DocumentQuery(text="x").normalised().sort == "relevance"


async def test_an_unreachable_database_raises_never_an_empty_page(tmp_path: Path) -> None:
    from langchain_core.embeddings import DeterministicFakeEmbedding

    from grounded_agent.store import StoreSettings, open_store

    url = f"postgresql://postgres@/postgres?host={tmp_path / 'no-such-socket-dir'}"
    settings = StoreSettings(home=tmp_path, database_url=url, connect_timeout_s=2)
    store = open_store(settings, embeddings=DeterministicFakeEmbedding(size=384), table_name="kb_x")
    with pytest.raises(StoreUnavailable):
        await store.asearch_documents(DocumentQuery(text="contract"))


async def test_a_document_is_found_by_the_words_of_its_id(
    fake_store: KnowledgeStore, tmp_path: Path
) -> None:
    """A contract titled "Subscription agreement" whose id says "contract" is what a user means
    by "contract"; a document that says neither is not listed."""
    _write(tmp_path / "a.md", "contract-zeta-logistics",
           "# Subscription agreement with Zeta\n\nZeta pays monthly.",
           title="Subscription agreement with Zeta", language="en")
    _write(tmp_path / "b.md", "memo-lunch", "# Lunch\n\nLunch is at noon.",
           title="Lunch", language="en")
    report = await aingest_paths([tmp_path], fake_store)
    assert not report.errors
    page = await fake_store.asearch_documents(parse_query(None, text="contracts"))
    assert [i.doc_id for i in page.items] == ["contract-zeta-logistics"]
    assert page.items[0].snippet  # the first chunk stands in when only the id matched
    assert await _ids(fake_store, text="zeta contract") == ["contract-zeta-logistics"]
    assert await _ids(fake_store, text="invoice") == []
