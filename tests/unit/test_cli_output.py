"""What the CLI prints agrees with itself: the headline with the per-source lines, counts with
their plurals, and `docs list` has a header over aligned columns."""

from __future__ import annotations

from datetime import date

from grounded_agent.cli import _plural, _version_table, render
from grounded_agent.schemas import AgentResult, SourceReport
from grounded_agent.store.catalog import DocumentVersion


def _result(status: str, *sources: SourceReport) -> AgentResult:
    return AgentResult(question="q?", status=status, answer="...",  # type: ignore[arg-type]
                       sources=list(sources))


def test_passages_found_that_do_not_answer_are_said_so_in_the_headline_and_the_source_line() -> None:
    out = render(_result("not_found", SourceReport(source="knowledge_base", status="found",
                                                   coverage="complete", finding_count=5)))
    assert out.splitlines()[0] == "[Not found: 5 passages found, none answers the question]"
    assert "knowledge_base: 5 passages found, none answers the question (coverage complete)" in out


def test_each_source_state_in_words() -> None:
    out = render(_result(
        "partial",
        SourceReport(source="knowledge_base", status="found", coverage="complete", finding_count=1),
        SourceReport(source="wikipedia", status="error", coverage="unavailable", error_kind="timeout"),
        SourceReport(source="web", status="not_found", coverage="complete", finding_count=0),
    ))
    assert "knowledge_base: 1 passage found (coverage complete)" in out
    assert "wikipedia: could not be searched (error: timeout) (coverage unavailable)" in out
    assert "web: nothing found (coverage complete)" in out
    assert out.splitlines()[0].startswith("[Partial answer")


def test_passages_below_the_low_threshold_are_counted_in_the_source_line_as_in_the_headline() -> None:
    """A knowledge base returns its closest passages even for an off-topic question; all below
    the low threshold, the source is not_found with a count. Its line said "nothing found" under
    "[Not found: 5 passages found, none answers the question]"."""
    out = render(_result("not_found", SourceReport(source="knowledge_base", status="not_found",
                                                   coverage="complete", finding_count=5)))
    assert out.splitlines()[0] == "[Not found: 5 passages found, none answers the question]"
    assert "knowledge_base: 5 passages found, none relevant (coverage complete)" in out


def test_nothing_found_anywhere_keeps_a_plain_headline() -> None:
    out = render(_result("not_found", SourceReport(source="knowledge_base", status="not_found",
                                                   coverage="complete", finding_count=0)))
    assert out.splitlines()[0] == "[Not found]"


def test_plurals() -> None:
    assert [_plural(n, "chunk") for n in (0, 1, 2)] == ["0 chunks", "1 chunk", "2 chunks"]


def test_docs_list_has_a_header_over_aligned_columns() -> None:
    versions = [
        DocumentVersion(doc_id="handbook", version="2", status="active", chunks=1, pages=None,
                        format="markdown", title="Employee handbook", document_date=date(2026, 2, 1)),
        DocumentVersion(doc_id="guide", version=None, status="active", chunks=12, pages=3,
                        format="pdf", title="Admin guide"),
    ]
    header, first, second = _version_table(versions)
    assert header.split() == ["DOCUMENT", "VERSION", "STATUS", "DATE", "CHUNKS", "PAGES",
                              "FORMAT", "TITLE"]
    assert "1 chunk " in first and "12 chunks" in second and "3 pages" in second
    # each column starts at the same place on every line
    for column in ("CHUNKS", "TITLE"):
        at = header.index(column)
        assert first[at - 2 : at] == "  " and second[at - 2 : at] == "  "
    assert first.endswith("Employee handbook") and second.endswith("Admin guide")


def test_http_clients_retry_notes_are_for_verbose_runs_only() -> None:
    """A source outage is reported once, in the answer; urllib3's "Retrying ... after connection
    broken by ..." lines (one per retry, ~400 characters each) only show with -v."""
    import logging

    from grounded_agent.cli import _setup_logging

    logger = logging.getLogger("urllib3")
    saved = logger.level
    try:
        _setup_logging(verbose=False)
        assert not logger.isEnabledFor(logging.WARNING)
        assert logger.isEnabledFor(logging.ERROR)
        _setup_logging(verbose=True)
        assert logger.isEnabledFor(logging.WARNING)
    finally:
        logger.setLevel(saved)


def test_help_lists_every_command_with_what_it_does() -> None:
    """`grounded-agent --help` names every command, each with a line of its own saying what it
    does, and its description lists them all (a command added later is not left out)."""
    import argparse
    import re

    from grounded_agent.cli import build_parser

    parser = build_parser()
    [commands] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    text = parser.format_help()
    described = set(re.findall(r"[a-z]+", (parser.description or "").split(":", 1)[-1]))
    assert set(commands.choices) <= described, set(commands.choices) - described
    for name in commands.choices:
        assert re.search(rf"^ {{4}}{name} +\S", text, re.MULTILINE), f"{name} has no help line"
