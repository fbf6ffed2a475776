"""PDF, Word and HTML loaders on files built in the test: text, sections, pages, metadata, the
sidecar override and a reason for each kind of bad file. No database, no sockets."""

from __future__ import annotations

from datetime import date, datetime
from pathlib import Path

import pytest

from grounded_agent.loaders import IngestError, load_file
from grounded_agent.loaders.base import table_text
from grounded_agent.store.ingest import chunk_document, content_hash, split_paged_text
from tests.support.documents import docx_bytes, pdf_bytes, write

LONG = (
    "Beacon supports single sign-on with SAML 2.0 and OpenID Connect on the Pro and "
    "Enterprise plans, and every login is written to the audit log. "
) * 6


def _guide(tmp_path: Path, **kw: object) -> Path:
    pages = [
        [
            ("title", "Admin guide"),
            ("p", "This guide is for workspace owners."),
            ("h1", "Workspaces"),
            ("p", "A workspace holds dashboards, reports and their data sources."),
            ("p", "A paragraph that starts here and does not end on this page but"),
        ],
        [
            ("p", "goes on at the top of the next page until this sentence ends."),
            ("h1", "Single sign-on"),
            ("h2", "SAML"),
            ("p", LONG),
            ("li", "Okta"),
            ("li", "Microsoft Entra ID"),
        ],
        [("h1", "Data export"), ("p", "Exports stay available for download for seven days.")],
    ]
    return write(tmp_path / "guide.pdf", pdf_bytes(pages, **kw))  # type: ignore[arg-type]


def test_pdf_text_sections_and_pages(tmp_path: Path) -> None:
    [doc], errors = load_file(_guide(tmp_path, footer="Admin guide, page {page} of {pages}"))
    assert errors == []
    assert doc.fmt == "pdf" and doc.title == "Admin guide"  # no /Title: the first heading
    by_path = {" > ".join(s.path): s for s in doc.sections or []}
    assert list(by_path) == [
        "Admin guide",
        "Admin guide > Workspaces",
        "Admin guide > Single sign-on > SAML",
        "Admin guide > Data export",
    ]
    assert [s.page for s in by_path.values()] == [1, 1, 2, 3]
    work = by_path["Admin guide > Workspaces"].text
    # a paragraph broken by the page end is one paragraph, the page turn marked inside it
    assert "does not end on this page but\fgoes on at the top" in work
    assert "A workspace holds dashboards" in work and "\n\n" in work
    saml = by_path["Admin guide > Single sign-on > SAML"].text
    assert saml.endswith("• Okta\n• Microsoft Entra ID")
    everything = "\n".join(s.text for s in doc.sections or [])
    assert "page 2 of 3" not in everything  # the running footer is dropped

    chunks = chunk_document(doc)
    assert all(c.page is not None for c in chunks)
    assert [c.page for c in chunks] == sorted(c.page for c in chunks)  # type: ignore[type-var]
    export = next(c for c in chunks if "seven days" in c.content)
    assert (export.page, export.section) == (3, "Admin guide > Data export")
    saml_chunks = [c for c in chunks if c.section == "Admin guide > Single sign-on > SAML"]
    assert len(saml_chunks) >= 1 and saml_chunks[0].page == 2


def test_a_chunk_carries_the_page_its_text_starts_on() -> None:
    text = "First page, long enough.\fSecond page opens.\n\nA paragraph.\f\fFourth."
    assert split_paged_text(text, 1, max_chars=35, min_chars=0) == [
        ("First page, long enough.", 1),
        ("Second page opens.\n\nA paragraph.", 2),
        ("Fourth.", 4),
    ]
    assert split_paged_text(text, None, max_chars=2000)[0][1] is None  # no pages: none


def test_pdf_metadata_and_sidecar_override(tmp_path: Path) -> None:
    info = {
        "/Title": "Lumenary Admin Guide",
        "/ModDate": "D:20261005120000Z",
        "/CreationDate": "D:20250101000000Z",
        "/Author": "Docs team",
    }
    path = _guide(tmp_path, info=info, lang="en-GB")
    [doc], _ = load_file(path)
    assert (doc.title, doc.document_date, doc.language) == (
        "Lumenary Admin Guide",
        date(2026, 10, 5),  # the modification date wins over the creation date
        "en",
    )
    assert doc.extra == {"author": "Docs team"} and doc.doc_id == "guide"
    assert doc.source_path == str(path.absolute())
    before = content_hash(doc)

    (tmp_path / "guide.pdf.meta.yaml").write_text(
        "id: admin-guide\ntitle: Beacon administration\nversion: 2026.10\n"
        "document_date: 2026-11-01\nsource_url: https://lumenary.example/admin.pdf\n"
        "is_active: false\nlanguage: de\n"
    )
    [side], _ = load_file(path)
    assert (side.doc_id, side.title, side.version, side.document_date) == (
        "admin-guide",
        "Beacon administration",
        "2026.10",  # kept as written, not read as a number
        date(2026, 11, 1),
    )
    assert (side.source_url, side.declared_active, side.language) == (
        "https://lumenary.example/admin.pdf",
        False,
        "de",
    )
    assert side.extra == {"author": "Docs team"}  # keys the sidecar does not name stay
    assert content_hash(side) != before


def test_a_bad_sidecar_is_reported(tmp_path: Path) -> None:
    path = _guide(tmp_path)
    (tmp_path / "guide.pdf.meta.yaml").write_text("title: [unclosed\n")
    with pytest.raises(IngestError, match=r"invalid YAML in sidecar guide\.pdf\.meta\.yaml"):
        load_file(path)
    (tmp_path / "guide.pdf.meta.yaml").write_text("document_date: next week\n")
    with pytest.raises(IngestError, match="invalid document_date"):
        load_file(path)


def test_docx_headings_lists_tables_and_core_properties(tmp_path: Path) -> None:
    path = write(
        tmp_path / "onboarding.docx",
        docx_bytes(
            [
                ("title", "Onboarding services"),
                ("p", "Lumenary helps new customers start."),
                ("h1", "Packages"),
                ("h2", "Quick start"),
                ("p", "The Quick start package costs 1,500 euros."),
                ("li", "Two remote sessions"),
                ("li", "One admin workshop"),
                ("h2", "Guided rollout"),
                ("table", [["Item", "Price"], ["Guided rollout", "6,000 euros"]]),
                ("h1", "Training"),
                ("p", "Live training costs 450 euros a session."),
            ],
            core={
                "title": "Lumenary onboarding",
                "version": "2026.1",
                "language": "en-US",
                "author": "Services team",
                "modified": datetime(2026, 8, 20, 9, 30),
            },
        ),
    )
    [doc], errors = load_file(path)
    assert errors == [] and doc.fmt == "docx"
    assert (doc.title, doc.version, doc.document_date, doc.language) == (
        "Lumenary onboarding",
        "2026.1",
        date(2026, 8, 20),
        "en",
    )
    assert doc.extra == {"author": "Services team"}
    got = [(" > ".join(s.path), s.text, s.page) for s in doc.sections or []]
    assert got == [
        ("Onboarding services", "Lumenary helps new customers start.", None),
        (
            "Onboarding services > Packages > Quick start",
            "The Quick start package costs 1,500 euros.\n\n"
            "- Two remote sessions\n- One admin workshop",
            None,
        ),
        (
            "Onboarding services > Packages > Guided rollout",
            "Item: Guided rollout; Price: 6,000 euros.",  # a row reads as a statement
            None,
        ),
        ("Onboarding services > Training", "Live training costs 450 euros a session.", None),
    ]
    assert all(c.page is None for c in chunk_document(doc))  # a .docx has no fixed pages

    (tmp_path / "onboarding.docx.meta.yaml").write_text("version: 2026.2\ntitle: Onboarding\n")
    [side], _ = load_file(path)
    assert (side.version, side.title, side.document_date) == ("2026.2", "Onboarding", date(2026, 8, 20))


def test_html_title_sections_and_dropped_chrome(tmp_path: Path) -> None:
    path = tmp_path / "status.html"
    path.write_text(
        """<!doctype html><html lang="en-US"><head><title>Status page help</title>
        <meta property="article:modified_time" content="2026-10-02T10:00:00Z">
        <link rel="canonical" href="https://lumenary.example/help/status">
        <style>body { color: red }</style><script>var tracking = "SCRIPTTEXT";</script></head>
        <body><header>SITEHEADER</header><nav><ul><li>NAVLINK</li></ul></nav>
        <div role="navigation">BREADCRUMB</div>
        <article><h1>Status page</h1><p>The status page shows <b>incidents</b> and
        maintenance.</p><h2>Subscriptions</h2><p>Subscribe by email<br>or by RSS.</p>
        <ul><li>Email</li><li>RSS feed</li></ul>
        <table><tr><th>Channel</th><th>Delay</th></tr><tr><td>Email</td><td>1 minute</td></tr>
        <tr><td>RSS</td><td>15 minutes</td></tr></table><h3>Webhooks</h3><p>Webhooks post JSON.</p><h2>History</h2>
        <p>Incidents are kept for 90 days.</p><!-- COMMENT --></article>
        <aside>SIDEBAR</aside><footer>FOOTERTEXT</footer>
        <noscript>NOSCRIPT</noscript></body></html>""",
        encoding="utf-8",
    )
    [doc], _ = load_file(path)
    assert (doc.title, doc.language, doc.document_date, doc.source_url) == (
        "Status page help",
        "en",
        date(2026, 10, 2),
        "https://lumenary.example/help/status",
    )
    got = [(" > ".join(s.path), s.text) for s in doc.sections or []]
    assert got == [
        ("Status page", "The status page shows incidents and maintenance."),
        (
            "Status page > Subscriptions",
            "Subscribe by email\nor by RSS.\n\n- Email\n\n- RSS feed\n\n"
            "Channel: Email; Delay: 1 minute.\nChannel: RSS; Delay: 15 minutes.",
        ),
        ("Status page > Subscriptions > Webhooks", "Webhooks post JSON."),
        ("Status page > History", "Incidents are kept for 90 days."),
    ]
    for noise in ("SCRIPTTEXT", "SITEHEADER", "NAVLINK", "BREADCRUMB", "SIDEBAR", "FOOTERTEXT",
                  "NOSCRIPT", "COMMENT", "color: red"):
        assert noise not in doc.text


def test_tables_without_a_header_row_keep_their_cells() -> None:
    assert table_text([["Plan", "Pro"]]) == "Plan | Pro"
    assert table_text([["", "Q1"], ["Revenue", "10"]]) == "Q1\nRevenue | 10"  # no header name
    assert table_text([["A", "B"], ["1", "2"], ["3", ""]]) == "A: 1; B: 2.\nA: 3."


def test_html_without_title_uses_the_first_heading(tmp_path: Path) -> None:
    path = tmp_path / "faq.htm"
    path.write_text("<h1>Billing FAQ</h1><p>Invoices are sent monthly.</p>", encoding="utf-8")
    [doc], _ = load_file(path)
    assert (doc.title, doc.doc_id, doc.document_date) == ("Billing FAQ", "faq", None)


@pytest.mark.parametrize(
    ("name", "build", "reason"),
    [
        ("empty.pdf", lambda: b"", r"^empty file \(0 bytes\)$"),
        ("empty.docx", lambda: b"", r"^empty file \(0 bytes\)$"),
        ("empty.html", lambda: b"", r"^empty file \(0 bytes\)$"),
        (
            "scan.pdf",
            lambda: pdf_bytes([[("p", "x")], [("p", "y")]], image_only=True),
            r"^no text layer \(scanned PDF\?\)",
        ),
        (
            "locked.pdf",
            lambda: pdf_bytes([[("p", "Secret.")]], user_password="pw", owner_password="o"),
            r"^encrypted PDF: it needs a password",
        ),
        (
            "cut.pdf",
            lambda: pdf_bytes([[("p", "Text " * 50)]])[:300],
            r"^corrupt PDF: ",
        ),
        ("fake.pdf", lambda: b"<html>not a pdf</html>", r"^corrupt PDF: no PDF header"),
        ("cut.docx", lambda: docx_bytes([("p", "Text.")])[:500], r"^corrupt Word file"),
        ("fake.docx", lambda: b"plain text", r"^corrupt Word file: not a ZIP package"),
        (
            "locked.docx",
            lambda: b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\0" * 512,
            r"password-protected document or an old \.doc",
        ),
        ("blob.html", lambda: bytes(range(256)) * 8, r"^corrupt HTML: binary data"),
        (
            "chrome.html",
            lambda: b"<title>T</title><nav>Home</nav><script>x()</script>",
            r"^empty document: no text",
        ),
    ],
)
def test_each_bad_file_has_its_own_reason(
    tmp_path: Path, name: str, build: object, reason: str
) -> None:
    path = write(tmp_path / name, build())  # type: ignore[operator]
    with pytest.raises(IngestError, match=reason):
        load_file(path)


def test_an_owner_password_alone_does_not_stop_reading(tmp_path: Path) -> None:
    """Negative control for the encrypted case: restrictions without a user password open."""
    path = write(tmp_path / "open.pdf", pdf_bytes([[("p", "Readable text.")]], owner_password="o"))
    [doc], _ = load_file(path)
    assert doc.text == "Readable text."


def test_pdf_contents_entries_are_not_headings(tmp_path: Path) -> None:
    pages = [
        [("title", "Manual"), ("h2", "1 Introduction . . . . . . . . . . 2"), ("p", "Read on.")],
        [("h1", "1 Introduction"), ("p", "The body of the introduction.")],
    ]
    [doc], _ = load_file(write(tmp_path / "manual.pdf", pdf_bytes(pages)))
    got = [(" > ".join(s.path), s.page) for s in doc.sections or []]
    assert got == [("Manual", 1), ("Manual > 1 Introduction", 2)]
    assert "1 Introduction . . ." in (doc.sections or [])[0].text


def test_a_one_page_scan_says_so(tmp_path: Path) -> None:
    path = write(tmp_path / "scan.pdf", pdf_bytes([[("p", "x")]], image_only=True))
    with pytest.raises(IngestError, match=r"^no text layer \(scanned PDF\?\): its page has no"):
        load_file(path)
