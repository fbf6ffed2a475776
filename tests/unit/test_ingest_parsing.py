"""Front matter, JSON Lines and chunking, without a database."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from grounded_agent.store.ingest import (
    IngestError,
    SourceDocument,
    chunk_document,
    content_hash,
    iter_files,
    load_file,
    parse_front_matter,
    split_sections,
    split_text,
)
from grounded_agent.store.settings import libpq_url, redact_url, sqlalchemy_url


def test_front_matter_keeps_versions_verbatim() -> None:
    meta, body = parse_front_matter("---\nid: a\nversion: 2026.10\n---\n# T\n\nText.\n")
    assert meta == {"id": "a", "version": "2026.10"}
    assert body.startswith("# T")


def test_no_front_matter_is_all_body() -> None:
    assert parse_front_matter("# Title\n\nText") == ({}, "# Title\n\nText")


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("---\nid: [unclosed\n---\nText\n", "invalid YAML"),
        ("---\nid: a\nText without a closing line\n", "no closing"),
        ("---\n- a list\n---\nText\n", "mapping"),
    ],
)
def test_bad_front_matter(raw: str, reason: str) -> None:
    with pytest.raises(IngestError, match=reason):
        parse_front_matter(raw)


def test_markdown_defaults_and_metadata(tmp_path: Path) -> None:
    p = tmp_path / "refund-policy.md"
    p.write_text(
        "---\ndocument_date: 2026-01-31\nis_active: false\nowner: legal\n---\n"
        "# Refunds\n\nWe refund within 14 days.\n"
    )
    [doc], errors = load_file(p)
    assert errors == []
    assert doc.doc_id == "refund-policy"
    assert doc.title == "Refunds"
    assert doc.document_date == date(2026, 1, 31)
    assert doc.declared_active is False
    assert doc.extra == {"owner": "legal"}


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ("---\ndocument_date: 2026-13-45\n---\nText\n", "invalid document_date"),
        ("---\nis_active: maybe\n---\nText\n", "invalid is_active"),
        ("---\nid: x\n---\n\n   \n", "empty document"),
        ("", "empty file"),
    ],
)
def test_bad_documents(tmp_path: Path, content: str, reason: str) -> None:
    p = tmp_path / "bad.md"
    p.write_text(content)
    with pytest.raises(IngestError, match=reason):
        load_file(p)


def test_unreadable_and_binary_files(tmp_path: Path) -> None:
    missing = tmp_path / "gone.md"
    missing.symlink_to(tmp_path / "nowhere.md")
    with pytest.raises(IngestError, match="unreadable"):
        load_file(missing)
    binary = tmp_path / "bin.txt"
    binary.write_bytes(b"\xff\xfe\x00bad")
    with pytest.raises(IngestError, match="UTF-8"):
        load_file(binary)


def test_jsonl_ids_metadata_and_bad_lines(tmp_path: Path) -> None:
    p = tmp_path / "kb.jsonl"
    p.write_text(
        '{"doc_id": "A#0", "title": "A", "text": "Alpha text.", "article": "A", "paragraph_index": 0}\n'
        '{"id": "b", "text": "Beta text.", "document_date": "2025-02-03"}\n'
        "not json\n"
        '{"id": "c"}\n'
        '{"text": "No id at all."}\n'
    )
    docs, errors = load_file(p)
    assert [d.doc_id for d in docs] == ["A#0", "b", "kb#5"]
    assert docs[0].extra == {"article": "A", "paragraph_index": 0}
    assert docs[1].title == "b" and docs[1].document_date == date(2025, 2, 3)
    assert [e.file for e in errors] == [f"{p}:3", f"{p}:4"]


def test_iter_files_recurses_and_reports(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a.md").write_text("x")
    (tmp_path / "b.markdown").write_text("x")
    (tmp_path / "c.xlsx").write_text("x")
    (tmp_path / "d.pdf").write_text("x")
    (tmp_path / "d.pdf.meta.yaml").write_text("title: D")
    found = list(iter_files([tmp_path, tmp_path / "c.xlsx", tmp_path / "none.md"]))
    assert [(p.name, r is None) for p, r in found] == [
        ("b.markdown", True),
        ("d.pdf", True),  # a sidecar is not a document of its own
        ("a.md", True),
        ("c.xlsx", False),
        ("none.md", False),
    ]
    [(_, reason)] = iter_files([tmp_path / "d.pdf.meta.yaml"])
    assert reason is not None and "sidecar" in reason


def test_sections_follow_heading_path_and_skip_code() -> None:
    body = "# Pricing\n\nIntro.\n\n## Pro plan\n\nPro text.\n\n```\n# not a heading\n```\n\n## Starter\n\nS.\n"
    sections = split_sections(body)
    assert [(" > ".join(p), t.splitlines()[0]) for p, t in sections] == [
        ("Pricing", "Intro."),
        ("Pricing > Pro plan", "Pro text."),
        ("Pricing > Starter", "S."),
    ]
    assert "# not a heading" in sections[1][1]


def test_chunks_are_bounded_and_never_cut_words() -> None:
    sentence = "The quick brown fox jumps over the lazy dog near the riverbank. "
    text = "\n\n".join(sentence * 6 for _ in range(8)) + "\n\n" + "x" * 30 + " " + "word " * 400
    chunks = split_text(text, max_chars=1100)
    assert all(len(c) <= 1100 + 250 for c in chunks)
    assert all(len(c) >= 200 for c in chunks[:-1])
    words = set(text.split())
    assert all(set(c.split()) <= words for c in chunks)
    assert "".join(c.replace("\n", " ").replace(" ", "") for c in chunks) == text.replace(
        "\n", ""
    ).replace(" ", "")


def test_chunk_document_sections_pages_and_hash() -> None:
    doc = SourceDocument(
        doc_id="d", title="D", text="# D\n\n## A\n\nOne.\f## B\n\nTwo.", origin="mem"
    )
    chunks = chunk_document(doc)
    # the heading path goes on across a page break
    assert [(c.section, c.page, c.chunk_index) for c in chunks] == [
        ("D > A", 1, 0),
        ("D > B", 2, 1),
    ]
    other = SourceDocument(doc_id="d", title="D", text=doc.text, origin="elsewhere")
    assert content_hash(doc) == content_hash(other)
    other.version = "2"
    assert content_hash(doc) != content_hash(other)


def test_database_urls() -> None:
    assert sqlalchemy_url("postgresql://u:p@h:5432/db") == "postgresql+psycopg://u:p@h:5432/db"
    assert sqlalchemy_url("postgres://u@h/db") == "postgresql+psycopg://u@h/db"
    assert libpq_url("postgresql+psycopg://u@/db?host=/s") == "postgresql://u@/db?host=/s"
    assert redact_url("postgresql://u:secret@h/db") == "postgresql://u:***@h/db"
    with pytest.raises(ValueError):
        sqlalchemy_url("mysql://u@h/db")
