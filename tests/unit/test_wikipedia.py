"""The Wikipedia tool against MediaWiki API fixtures served by `responses` (no sockets)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from datetime import date
from urllib.parse import parse_qsl, urlsplit

import pytest
import requests
import responses
from pydantic import ValidationError

from grounded_agent.schemas import ToolOutcome
from grounded_agent.tools.wikipedia import (
    WikipediaArgs,
    make_wikipedia_tool,
    search_wikipedia,
    split_sections,
)
from tests.tool_fakes import KeywordScorer, register_wiki_cassette

EN_API = "https://en.wikipedia.org/w/api.php"
QUERY = "tidal locking moon"
SCORER_RULES = {"same face": 0.9, "tidal": 0.6, "moon": 0.5}


@pytest.fixture
def rsps() -> Iterator[responses.RequestsMock]:
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        yield mock


def _params(call: responses.Call) -> dict[str, str]:
    return dict(parse_qsl(urlsplit(call.request.url or "").query))


def assert_unavailable(outcome: ToolOutcome, kind: str) -> None:
    """The read did not complete: an error of `kind`, never mistakable for "nothing found"."""
    assert outcome.status == "error"
    assert outcome.error_kind == kind
    assert outcome.finding_count is None
    assert outcome.status != "not_found"
    assert outcome.coverage != "complete"
    assert outcome.items == []


# --- completed reads -------------------------------------------------------------------------


async def test_found_returns_cited_passages(rsps: responses.RequestsMock) -> None:
    register_wiki_cassette(rsps, "search_tidal_locking.json")
    outcome = await search_wikipedia(QUERY, scorer=KeywordScorer(SCORER_RULES))

    assert outcome.status == "found"
    assert outcome.coverage == "complete"
    assert outcome.finding_count == len(outcome.items) > 0
    best = outcome.items[0]
    assert best.source == "wikipedia"
    assert best.title == "Tidal locking"
    assert best.url == best.source_id == "https://en.wikipedia.org/wiki/Tidal_locking"
    assert best.extra["pageid"] == 9001
    assert best.document_date == date(2026, 1, 15)
    assert best.version == "1200001"
    assert best.language == "en"
    assert best.score == 0.9
    # the two best-scored pages were read (max_pages=2), the third hit was not fetched
    assert {i.title for i in outcome.items} == {"Tidal locking", "Moon"}
    fetched = [_params(c).get("pageids") for c in rsps.calls]
    assert "9003" not in fetched
    # passages are split by heading; reference-like sections never become passages
    sections = {i.section for i in outcome.items if i.title == "Tidal locking"}
    assert sections <= {None, "Mechanism", "Mechanism / Timescale", "Examples"}
    assert "Examples" in sections
    # keys are unique, so the graph can deduplicate across attempts
    assert len({i.key for i in outcome.items}) == len(outcome.items)


async def test_requests_use_https_with_a_user_agent_and_a_timeout(
    rsps: responses.RequestsMock,
) -> None:
    register_wiki_cassette(rsps, "search_tidal_locking.json")
    await search_wikipedia(QUERY, scorer=KeywordScorer(SCORER_RULES), max_pages=1)
    first = rsps.calls[0].request
    assert (first.url or "").startswith(EN_API)
    assert "grounded-agent" in first.headers["User-Agent"]
    assert first.req_kwargs["timeout"] is not None


async def test_low_relevance_when_best_passage_is_between_thresholds(
    rsps: responses.RequestsMock,
) -> None:
    register_wiki_cassette(rsps, "search_tidal_locking.json")
    outcome = await search_wikipedia(QUERY, scorer=KeywordScorer({"moon": 0.6}))
    assert outcome.status == "low_relevance"
    assert outcome.coverage == "complete" and outcome.finding_count == len(outcome.items)


async def test_no_hits_is_not_found_with_count_zero(rsps: responses.RequestsMock) -> None:
    register_wiki_cassette(rsps, "search_no_hits.json")
    outcome = await search_wikipedia("qwxzvbn flurble", scorer=KeywordScorer())
    assert outcome.status == "not_found"
    assert outcome.coverage == "complete"
    assert outcome.finding_count == 0
    assert outcome.error_kind is None


async def test_missing_page_is_not_found_with_count_zero(rsps: responses.RequestsMock) -> None:
    register_wiki_cassette(rsps, "page_missing.json")
    outcome = await search_wikipedia("zorblax treaty", scorer=KeywordScorer({"zorblax": 0.9}))
    assert outcome.status == "not_found"
    assert outcome.coverage == "complete"
    assert outcome.finding_count == 0
    assert outcome.status != "error"


async def test_disambiguation_follows_the_clearly_best_option(
    rsps: responses.RequestsMock,
) -> None:
    register_wiki_cassette(rsps, "disambiguation.json")
    scorer = KeywordScorer({"orbit": 0.9, "planet": 0.8, "element": 0.3})
    outcome = await search_wikipedia("mercury orbit", scorer=scorer)

    assert outcome.status == "found"
    assert {i.title for i in outcome.items} == {"Mercury (planet)"}
    best = outcome.items[0]
    assert best.extra["via_disambiguation"] == "Mercury"
    assert best.extra["pageid"] == 9201
    assert best.document_date == date(2026, 3, 3)
    # the options were scored against the query
    assert any(
        texts == ["Mercury (planet)", "Mercury (element)", "Mercury (mythology)"]
        for _, texts in scorer.calls
    )


async def test_ambiguous_disambiguation_is_low_relevance_never_found(
    rsps: responses.RequestsMock,
) -> None:
    register_wiki_cassette(rsps, "disambiguation.json")
    # every option scores the same: no option is the likely one
    outcome = await search_wikipedia("mercury orbit", scorer=KeywordScorer({"mercury": 0.95}))

    assert outcome.status == "low_relevance"
    assert outcome.coverage == "complete" and outcome.finding_count == 1
    item = outcome.items[0]
    assert item.extra["disambiguation"] is True
    assert item.extra["options"] == ["Mercury (planet)", "Mercury (element)", "Mercury (mythology)"]
    assert item.score < 0.75 and item.raw_score == 0.95
    assert not any(_params(c).get("titles") == "Mercury (planet)" for c in rsps.calls)


async def test_paging_reads_every_result_page(rsps: responses.RequestsMock) -> None:
    register_wiki_cassette(rsps, "paging_ok.json")
    scorer = KeywordScorer({"same face": 0.9})
    outcome = await search_wikipedia(
        QUERY, scorer=scorer, max_pages=1, search_results=4, search_page_size=2
    )
    assert outcome.status == "found"
    searches = [_params(c) for c in rsps.calls if _params(c).get("list") == "search"]
    assert [s.get("sroffset") for s in searches] == [None, "2"]
    assert searches[1]["continue"] == "-||"  # the API's continue token is sent back
    assert len(scorer.calls[0][1]) == 4  # all four hits from both pages were ranked


async def test_source_language_is_per_call_and_independent(
    rsps: responses.RequestsMock,
) -> None:
    de_api = "https://de.wikipedia.org/w/api.php"
    empty = {"batchcomplete": "", "query": {"searchinfo": {"totalhits": 0}, "search": []}}
    rsps.add(responses.GET, de_api, json=empty)
    rsps.add(responses.GET, EN_API, json=empty)
    de, en = await asyncio.gather(
        search_wikipedia("Gezeitenkopplung", scorer=KeywordScorer(), language="de"),
        search_wikipedia("tidal locking", scorer=KeywordScorer(), language="en"),
    )
    assert de.status == en.status == "not_found"
    hosts = {(urlsplit(c.request.url or "").netloc, _params(c)["srsearch"]) for c in rsps.calls}
    assert hosts == {
        ("de.wikipedia.org", "Gezeitenkopplung"),
        ("en.wikipedia.org", "tidal locking"),
    }


async def test_invalid_language_is_config_error_without_request(
    rsps: responses.RequestsMock,
) -> None:
    outcome = await search_wikipedia(QUERY, scorer=KeywordScorer(), language="evil.com/x?")
    assert_unavailable(outcome, "config")
    assert len(rsps.calls) == 0


# --- failures: each is an error of its kind, never "nothing found" ----------------------------


@pytest.mark.parametrize(
    ("cassette", "kind"),
    [
        ("http_429.json", "rate_limit"),
        ("http_503.json", "unavailable"),
        ("timeout.json", "timeout"),
        ("connection_error.json", "unavailable"),
        ("malformed_json.json", "bad_response"),
        ("search_not_a_list.json", "bad_response"),
        ("api_error.json", "unavailable"),
        ("api_error_bad_request.json", "unknown"),
    ],
)
async def test_search_failures_are_errors_of_their_kind(
    rsps: responses.RequestsMock, cassette: str, kind: str
) -> None:
    register_wiki_cassette(rsps, cassette)
    # a short budget: the 429's Retry-After (5 s) does not fit it, and retries back off briefly
    outcome = await search_wikipedia(
        QUERY, scorer=KeywordScorer(SCORER_RULES), timeout_s=2.0, backoff_s=0.01
    )
    assert_unavailable(outcome, kind)
    assert outcome.detail


async def test_mediawiki_ratelimited_error_body_is_rate_limit(rsps: responses.RequestsMock) -> None:
    rsps.add(responses.GET, EN_API, json={"error": {"code": "ratelimited", "info": "slow down"}})
    outcome = await search_wikipedia(QUERY, scorer=KeywordScorer())
    assert_unavailable(outcome, "rate_limit")


async def test_page_fetch_failure_after_search_is_an_error(rsps: responses.RequestsMock) -> None:
    # search succeeds, the first page read fails with 502
    ok_search = {
        "batchcomplete": "",
        "query": {
            "searchinfo": {"totalhits": 1},
            "search": [{"ns": 0, "title": "Tidal locking", "pageid": 9001, "snippet": ""}],
        },
    }
    rsps.add(
        responses.GET,
        EN_API,
        json=ok_search,
        match=[responses.matchers.query_param_matcher({"list": "search"}, strict_match=False)],
    )
    rsps.add(
        responses.GET,
        EN_API,
        body="<html>502 Bad Gateway</html>",
        status=502,
        match=[responses.matchers.query_param_matcher({"pageids": "9001"}, strict_match=False)],
    )
    outcome = await search_wikipedia(QUERY, scorer=KeywordScorer(SCORER_RULES))
    assert_unavailable(outcome, "unavailable")


async def test_slow_api_is_a_timeout(rsps: responses.RequestsMock) -> None:
    def slow(request: requests.PreparedRequest) -> tuple[int, dict[str, str], str]:
        time.sleep(0.6)
        return 200, {}, '{"query": {"search": []}}'

    rsps.add_callback(responses.GET, EN_API, callback=slow)
    started = time.perf_counter()
    outcome = await search_wikipedia(QUERY, scorer=KeywordScorer(), timeout_s=0.15)
    assert_unavailable(outcome, "timeout")
    assert time.perf_counter() - started < 0.5  # the caller is not held for the slow reply


# --- paging rule: coverage is all or nothing --------------------------------------------------


@pytest.mark.parametrize(
    ("cassette", "kind", "detail"),
    [
        ("paging_second_page_fails.json", "unavailable", "page 2"),
        ("paging_duplicate_ids.json", "bad_response", "repeated"),
        ("paging_totalhits_changes.json", "bad_response", "totalhits changed"),
    ],
)
async def test_a_bad_later_result_page_fails_the_whole_read(
    rsps: responses.RequestsMock, cassette: str, kind: str, detail: str
) -> None:
    register_wiki_cassette(rsps, cassette)
    outcome = await search_wikipedia(
        QUERY,
        scorer=KeywordScorer({"same face": 0.9}),
        max_pages=1,
        search_results=4,
        search_page_size=2,
    )
    # page 1 held a relevant hit, yet no partial count and no findings are reported
    assert_unavailable(outcome, kind)
    assert detail in (outcome.detail or "")
    assert not any(_params(c).get("prop") for c in rsps.calls)  # no page was read


# --- the tool as the graph sees it ------------------------------------------------------------


async def test_tool_runs_with_validated_args(rsps: responses.RequestsMock) -> None:
    register_wiki_cassette(rsps, "search_tidal_locking.json")
    tool = make_wikipedia_tool(KeywordScorer(SCORER_RULES))
    assert tool.name == "wikipedia"
    assert "Wikipedia" in tool.description
    outcome = await tool.run({"query": QUERY, "max_pages": 1})
    assert outcome.status == "found"
    assert {i.title for i in outcome.items} == {"Tidal locking"}


async def test_tool_rejects_arguments_outside_the_schema() -> None:
    tool = make_wikipedia_tool(KeywordScorer())
    outcome = await tool.run({"query": QUERY, "max_pages": 5})
    assert_unavailable(outcome, "config")


@pytest.mark.parametrize(
    "raw",
    [
        {"query": ""},
        {"query": "x" * 301},
        {"query": "x", "max_pages": 0},
        {"query": "x", "max_pages": 4},
    ],
)
def test_wikipedia_args_bounds(raw: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        WikipediaArgs.model_validate(raw)


def test_wikipedia_args_defaults() -> None:
    assert WikipediaArgs(query="x").max_pages == 2


def test_split_sections_paths_and_skips() -> None:
    text = (
        "Lead one.\nLead two.\n\n== History ==\nOld.\n=== Early years ===\nEarly.\n"
        "== Empty ==\n=== Child ===\nChild text.\n== See also ==\nLink\n=== Sub ===\nNo.\n"
        "== Uses ==\nUsed."
    )
    got = [(p.section, p.text) for p in split_sections(text)]
    assert got == [
        (None, "Lead one.\nLead two."),
        ("History", "Old."),
        ("History / Early years", "Early."),
        ("Empty / Child", "Child text."),
        ("Uses", "Used."),
    ]


def test_split_sections_cuts_long_sections() -> None:
    para = "word " * 400  # 2000 characters in one paragraph
    passages = split_sections(f"== Long ==\n{para}\nShort end.")
    assert len(passages) >= 2
    assert all(len(p.text) <= 1200 for p in passages)
    assert all(p.section == "Long" for p in passages)
