"""The page a passage starts on reaches the citation, the CLI's source list and the prompt."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from grounded_agent import aask, build_graph
from grounded_agent.cli import render
from grounded_agent.context import Context
from grounded_agent.grounding.citations import check_answer
from grounded_agent.loaders import load_file
from grounded_agent.prompts.sources import render_sources
from grounded_agent.schemas import AgentResult, Citation
from grounded_agent.store.ingest import MAX_CHARS, chunk_document
from tests.fakes import ScriptedSource, finding, found
from tests.support.documents import pdf_bytes, write

SSO = finding(
    source_id="admin-guide",
    title="Admin guide",
    section="Admin guide > Single sign-on",
    text="Beacon supports single sign-on with SAML 2.0 and OpenID Connect.",
    page=4,
)
PLAIN = finding(source_id="faq", title="FAQ", text="Invoices are sent on the first of the month.")


def test_the_citation_carries_the_page() -> None:
    checked = check_answer(
        "Beacon supports single sign-on with SAML 2.0 and OpenID Connect [1]. "
        "Invoices are sent on the first of the month [2].",
        [SSO, PLAIN],
    )
    assert [(c.source_id, c.page) for c in checked.citations] == [("admin-guide", 4), ("faq", None)]


def test_the_cli_source_list_shows_the_page() -> None:
    result = AgentResult(
        question="q",
        status="answered",
        answer="Beacon supports SAML [1]. Invoices go out monthly [2].",
        citations=[
            Citation(n=1, source="knowledge_base", source_id="admin-guide", title="Admin guide",
                     section="Admin guide > Single sign-on", page=4, score=0.9),
            Citation(n=2, source="knowledge_base", source_id="faq", title="FAQ", score=0.8),
        ],
    )
    lines = render(result).splitlines()
    assert "  [1] Admin guide > Single sign-on, p. 4 (knowledge_base; id admin-guide, relevance 0.90)" in lines
    faq = next(line for line in lines if line.startswith("  [2]"))
    assert "p." not in faq  # no page, no "p. None"


def test_the_sources_block_names_the_page() -> None:
    root = ET.fromstring(f"<sources>{render_sources([SSO, PLAIN])}</sources>")
    assert [e.get("page") for e in root] == ["4", None]


async def test_an_answer_from_a_pdf_passage_cites_its_page() -> None:
    graph = build_graph(
        chat_model=None,
        tools={
            "knowledge_base": ScriptedSource(
                "knowledge_base", [found("knowledge_base", SSO)]
            ).tool()
        },
    )
    result = await aask(
        "Which single sign-on protocols does Beacon support?",
        graph=graph,
        context=Context(sources=["knowledge_base"]),
    )
    assert result.status == "answered"
    assert [(c.source_id, c.page) for c in result.citations] == [("admin-guide", 4)]
    assert result.model_dump(mode="json")["citations"][0]["page"] == 4


def test_the_cli_lists_the_closest_documents_apart_from_any_source() -> None:
    from grounded_agent.schemas import Pointer

    result = AgentResult(
        question="q", status="not_found", answer="I could not find an answer.",
        closest=[Pointer(source="knowledge_base", source_id="admin-guide", title="Admin guide",
                         section="Admin guide > Single sign-on", page=4, score=0.52)],
    )
    text = render(result)
    assert "Closest passages (none was judged to answer" in text
    assert "  - Admin guide > Single sign-on, p. 4 (knowledge_base; id admin-guide, relevance 0.52)" \
        in text
    assert "Sources:" not in text  # a pointer is never listed as a source
    assert "Closest" not in render(result.model_copy(update={"closest": []}))


async def test_a_fact_on_page_two_of_a_short_pdf_is_cited_as_page_two(tmp_path: Path) -> None:
    """Both pages would fit in one chunk; a chunk ends at the page boundary all the same, so
    the fact printed only on page 2 is not cited as page 1 (the page its chunk would start on)."""
    pages = [
        [("title", "Ferry guide"), ("p", "Ferries leave the north pier every hour.")],
        [("p", "Refunds for cancelled crossings are paid within 14 days.")],
    ]
    [doc], errors = load_file(write(tmp_path / "ferry.pdf", pdf_bytes(pages)))  # type: ignore[arg-type]
    assert errors == []
    chunks = chunk_document(doc)
    assert len(doc.text) < MAX_CHARS  # one chunk would have held both pages
    assert [c.page for c in chunks] == [1, 2]
    refund = next(c for c in chunks if "Refunds" in c.content)
    assert "north pier" not in refund.content
    findings = [finding(source_id="ferry", title=doc.title, text=c.content, page=c.page,
                        section=c.section, score=0.95 if c is refund else 0.6) for c in chunks]
    graph = build_graph(chat_model=None, tools={"knowledge_base": ScriptedSource(
        "knowledge_base", [found("knowledge_base", *findings)]).tool()})
    result = await aask("Within how many days are refunds for cancelled crossings paid?", graph=graph,
                        context=Context(sources=["knowledge_base"]))
    assert result.status in ("answered", "answered_with_caveat"), result.trail
    assert "14 days" in result.answer
    assert [c.page for c in result.citations] == [2]
