"""Rows 1-3: sources that time out, rate-limit, refuse or fail part-way. Real tools (the
knowledge-base tool over a store double, Wikipedia with `responses`, web search with `respx`),
the real graph offline; no socket leaves the process.

Each row's check is also run against the wrong handling (a failure turned into an empty result,
a 401 retried, a partial read counted as complete) and must reject it: the negative control."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import requests
import responses
import respx
from responses import matchers

from grounded_agent import aask, build_graph
from grounded_agent.context import Context
from grounded_agent.schemas import AgentResult, Finding, SourceReport
from grounded_agent.store.errors import StoreTimeout, StoreUnavailable
from grounded_agent.tools._retry import RetryPolicy
from grounded_agent.tools.knowledge_base import make_knowledge_base_tool
from grounded_agent.tools.web_search import make_web_search_tool, search_web
from grounded_agent.tools.wikipedia import make_wikipedia_tool, search_wikipedia
from tests.faults.conftest import logged
from tests.tool_fakes import KeywordScorer, tavily_body

QUESTION = "What does the Pro plan cost per user per month?"
PRO = "The Pro plan costs 49 EUR per user per month on monthly billing."
EN_API = "https://en.wikipedia.org/w/api.php"
TAVILY = "https://api.tavily.com"
KEY = "tvly-faults-secret-0123456789"
NOT_FOUND_WORDING = ("could not find", "not found", "no answer to this question in")


class FlakyStore:
    """A store double: `script` says per call what `asearch` does (a finding, a StoreTimeout
    raised at once or after 0.4 s, or a hang longer than any budget)."""

    def __init__(self, script: list[str]) -> None:
        self.script = script
        self.calls = 0

    async def asearch(self, query: str, k: int = 5, filters: Any = None) -> list[Finding]:
        what = self.script[min(self.calls, len(self.script) - 1)]
        self.calls += 1
        if what == "timeout":
            raise StoreTimeout("search: the database cancelled the statement (timeout)")
        if what == "hang":
            await asyncio.sleep(30)
        if what == "slow_timeout":  # the database's statement timeout, after a while
            await asyncio.sleep(0.4)
            raise StoreTimeout("search: the database cancelled the statement (timeout)")
        return [
            Finding(source="knowledge_base", source_id="pricing", title="Price list",
                    section="Pro plan", text=PRO, score=0.92, chunk_index=0)
        ]


def kb_tool(store: FlakyStore, timeout_s: float = 2.0, retries: int = 1) -> Any:
    return make_knowledge_base_tool(
        store,  # type: ignore[arg-type]
        timeout_s=timeout_s,
        policy=RetryPolicy(max_retries=retries, backoff_s=0.05),
    )


async def run(tools: dict[str, Any], sources: list[str], **ctx: Any) -> AgentResult:
    graph = build_graph(chat_model=None, tools=tools)
    return await aask(QUESTION, sources=sources, graph=graph, context=Context(**ctx))


def assert_failure_not_absence(result: AgentResult) -> None:
    """A source that could not be read is never reported, worded or counted as empty."""
    assert result.status == "unavailable", result.status
    assert not result.citations
    low = result.answer.lower()
    assert not any(w in low for w in NOT_FOUND_WORDING), result.answer
    for s in result.sources:
        assert s.status == "error" and s.finding_count is None and s.coverage != "complete"


def emptied(result: AgentResult) -> AgentResult:
    """The wrong handling of a failure: every failed source read as an empty one."""
    sources = [
        SourceReport(source=s.source, status="not_found", coverage="complete", finding_count=0)
        for s in result.sources
    ]
    return result.model_copy(update={
        "status": "not_found", "sources": sources,
        "answer": "I could not find an answer to this question in the sources I searched.",
    })


def must_reject(check: Any, *args: Any) -> str:
    """The negative control: `check` must fail on the wrongly handled result."""
    with pytest.raises(AssertionError):
        check(*args)
    return f"{check.__name__} rejects the wrong handling"


# --- row 1: the knowledge base times out --------------------------------------------------------


@pytest.mark.parametrize("how", ["timeout", "slow_timeout"])
async def test_kb_times_out_once_then_works(
    how: str, fault: Any, caplog: pytest.LogCaptureFixture
) -> None:
    row = fault(1, f"knowledge base times out once ({how}), then answers")
    caplog.set_level(logging.INFO)
    store = FlakyStore([how, "ok"])
    started = time.monotonic()
    result = await run({"knowledge_base": kb_tool(store)}, ["knowledge_base"])
    elapsed = time.monotonic() - started
    assert store.calls == 2  # one retry
    assert result.status == "answered", result.answer
    assert [c.source_id for c in result.citations] == ["pricing"]  # no duplicate citation
    assert result.sources[0].status == "found" and result.sources[0].finding_count == 1
    assert elapsed < 2.0  # inside the tool's budget
    # negative control: without the retry the same fault is unavailable, never not_found
    control = await run({"knowledge_base": kb_tool(FlakyStore([how, "ok"]), retries=0)},
                        ["knowledge_base"])
    assert_failure_not_absence(control)
    row.record(
        saw=f"{result.status}, {len(result.citations)} citation, {elapsed:.2f}s",
        logged=logged(caplog, "retrying"),
        control=f"no retry -> {control.status} ({control.sources[0].error_kind})",
    )


async def test_every_source_times_out_on_every_attempt(
    fault: Any, caplog: pytest.LogCaptureFixture
) -> None:
    row = fault(1, "every source times out on every attempt")
    caplog.set_level(logging.INFO)
    store = FlakyStore(["hang"])
    with responses.RequestsMock(assert_all_requests_are_fired=False) as wiki, respx.mock(
        base_url=TAVILY
    ) as web:
        wiki.add(responses.GET, EN_API, body=requests.exceptions.ReadTimeout("Read timed out."))
        web.post("/search").mock(side_effect=httpx.ReadTimeout("timed out"))
        tools = {
            "knowledge_base": kb_tool(store, timeout_s=0.6),
            "wikipedia": make_wikipedia_tool(KeywordScorer(), timeout_s=0.6, backoff_s=0.05),
            "web": make_web_search_tool(KeywordScorer(), api_key=KEY, timeout_s=0.6,
                                        backoff_s=0.05),
        }
        result = await run(tools, ["knowledge_base", "wikipedia", "web"])
        wiki_calls, web_calls = len(wiki.calls), web.calls.call_count
    assert_failure_not_absence(result)
    assert {s.error_kind for s in result.sources} == {"timeout"}
    assert result.attempts == 1  # no re-query of broken services
    assert wiki_calls >= 2 and web_calls >= 2  # each was retried within its budget
    row.record(
        saw=f"{result.status}; " + ", ".join(f"{s.source}: {s.error_kind}" for s in result.sources),
        logged=logged(caplog, "not retrying", "timed out"),
        control=must_reject(assert_failure_not_absence, emptied(result)),
        requests=f"wikipedia {wiki_calls}, web {web_calls}, kb {store.calls}",
    )


# --- row 2: web search 429/401/403; Wikipedia retried by the same rule -------------------------


async def test_web_429_retry_after_is_honoured_within_the_budget(
    fault: Any, caplog: pytest.LogCaptureFixture
) -> None:
    row = fault(2, "web search 429 with Retry-After, then 200")
    caplog.set_level(logging.INFO)
    with respx.mock(base_url=TAVILY) as web:
        web.post("/search").mock(side_effect=[
            httpx.Response(429, headers={"Retry-After": "0.3"}, json={"detail": "slow down"}),
            httpx.Response(200, json=tavily_body("search_ok.json")),
        ])
        started = time.monotonic()
        outcome = await search_web("capital of Australia", scorer=KeywordScorer(default=0.8),
                                   api_key=KEY, timeout_s=3.0)
        waited = time.monotonic() - started
        assert web.calls.call_count == 2
    assert outcome.status == "found" and waited >= 0.3
    row.record(saw=f"{outcome.status} after {waited:.2f}s (Retry-After 0.3)",
               logged=logged(caplog, "retrying"))


async def test_web_429_past_the_budget_is_partial_naming_the_source(
    fault: Any, caplog: pytest.LogCaptureFixture
) -> None:
    row = fault(2, "web search keeps answering 429: partial, naming web search")
    caplog.set_level(logging.INFO)
    with respx.mock(base_url=TAVILY) as web:
        route = web.post("/search").mock(
            return_value=httpx.Response(429, headers={"Retry-After": "0.2"}, json={})
        )
        tools = {
            "knowledge_base": kb_tool(FlakyStore(["ok"])),
            "web": make_web_search_tool(KeywordScorer(), api_key=KEY, timeout_s=2.0),
        }
        result = await run(tools, ["knowledge_base", "web"])
        calls = route.call_count
    web_report = next(s for s in result.sources if s.source == "web")
    assert calls == 2  # the Retry-After honoured once, then the rule gives up
    assert web_report.status == "error" and web_report.error_kind == "rate_limit"
    assert result.status == "partial" and "web search could not be searched" in result.answer
    assert KEY not in result.model_dump_json() and KEY not in caplog.text

    def names_the_failed_source(r: AgentResult) -> None:
        assert r.status == "partial" and "web search" in r.answer

    wrong = result.model_copy(update={"status": "answered", "answer": result.answer.split("\n")[0]})
    row.record(saw=f"{result.status}: '{result.answer.splitlines()[-1]}'",
               logged=logged(caplog, "rate_limit"),
               control=must_reject(names_the_failed_source, wrong), requests=calls)


@pytest.mark.parametrize("status", [401, 403])
async def test_web_auth_failures_are_never_retried(
    status: int, fault: Any, caplog: pytest.LogCaptureFixture
) -> None:
    row = fault(2, f"web search {status}: never retried")
    caplog.set_level(logging.INFO)
    with respx.mock(base_url=TAVILY) as web:
        route = web.post("/search").mock(
            return_value=httpx.Response(status, json={"detail": {"error": "bad key"}})
        )
        outcome = await search_web("q", scorer=KeywordScorer(), api_key=KEY, timeout_s=3.0)
        calls = route.call_count
    assert outcome.error_kind == "auth" and calls == 1
    assert outcome.finding_count is None and KEY not in (outcome.detail or "")
    # negative control: the rule would retry a 503 on the same budget; a 401 gets one request
    with respx.mock(base_url=TAVILY) as web:
        route = web.post("/search").mock(return_value=httpx.Response(503, json={}))
        await search_web("q", scorer=KeywordScorer(), api_key=KEY, timeout_s=3.0, backoff_s=0.01)
        retried = route.call_count
    assert retried == 3
    row.record(saw=f"error {outcome.error_kind} after {calls} request",
               logged=logged(caplog, "not retrying"),
               control=f"a 503 on the same rule: {retried} requests")


def _search_body(*titles: str) -> dict[str, Any]:
    return {"batchcomplete": "", "query": {
        "searchinfo": {"totalhits": len(titles)},
        "search": [{"ns": 0, "title": t, "pageid": 100 + i, "snippet": t}
                   for i, t in enumerate(titles)],
    }}


def _page_body(pageid: int, title: str, extract: str) -> dict[str, Any]:
    return {"batchcomplete": "", "query": {"pages": {str(pageid): {
        "pageid": pageid, "ns": 0, "title": title, "extract": extract,
        "fullurl": f"https://en.wikipedia.org/wiki/{title.replace(' ', '_')}",
        "revisions": [{"revid": 7, "timestamp": "2026-01-02T00:00:00Z"}],
    }}}}


SEARCH = [matchers.query_param_matcher({"list": "search"}, strict_match=False)]


def _page(pageid: int) -> list[Any]:
    return [matchers.query_param_matcher({"pageids": str(pageid)}, strict_match=False)]


@pytest.fixture
def wiki() -> Iterator[responses.RequestsMock]:
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        yield mock


@pytest.mark.parametrize(
    ("first", "label"),
    [
        ({"status": 429, "headers": {"Retry-After": "0.2"}, "body": "slow down"}, "429"),
        ({"status": 503, "body": "<html>busy</html>"}, "503"),
        ({"body": requests.exceptions.ReadTimeout("Read timed out.")}, "timeout"),
    ],
    ids=["429", "503", "timeout"],
)
async def test_wikipedia_is_retried_by_the_shared_rule(
    wiki: responses.RequestsMock, first: dict[str, Any], label: str, fault: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    row = fault(2, f"Wikipedia {label} once, then 200")
    caplog.set_level(logging.INFO)
    wiki.add(responses.GET, EN_API, match=SEARCH, **first)
    wiki.add(responses.GET, EN_API, match=SEARCH, json=_search_body("Tidal locking"))
    wiki.add(responses.GET, EN_API, match=_page(100),
             json=_page_body(100, "Tidal locking", "The Moon always shows the same face."))
    outcome = await search_wikipedia("tidal locking", scorer=KeywordScorer({"same face": 0.9}),
                                     timeout_s=4.0, backoff_s=0.05)
    assert outcome.status == "found" and outcome.coverage == "complete"
    assert len(wiki.calls) == 3  # the failed search, its retry, the page
    row.record(saw=f"{outcome.status} after {len(wiki.calls)} requests",
               logged=logged(caplog, "retrying"))


async def test_wikipedia_auth_failure_is_not_retried(
    wiki: responses.RequestsMock, fault: Any
) -> None:
    row = fault(2, "Wikipedia 403: never retried")
    wiki.add(responses.GET, EN_API, status=403, body="forbidden")
    outcome = await search_wikipedia("tidal locking", scorer=KeywordScorer(), timeout_s=4.0)
    assert outcome.error_kind == "auth" and len(wiki.calls) == 1
    row.record(saw=f"error {outcome.error_kind} after {len(wiki.calls)} request")


# --- row 3: one of several Wikipedia pages fails -------------------------------------------------


def assert_partial_read(outcome: Any) -> None:
    assert outcome.coverage == "partial" and outcome.finding_count is None
    assert outcome.status == "found" and outcome.items


async def test_wikipedia_read_where_one_page_fails_is_partial(
    wiki: responses.RequestsMock, fault: Any, caplog: pytest.LogCaptureFixture
) -> None:
    row = fault(3, "Wikipedia: one of two pages fails (503 on every try)")
    caplog.set_level(logging.INFO)
    wiki.add(responses.GET, EN_API, match=SEARCH, json=_search_body("Tidal locking", "Moon"))
    wiki.add(responses.GET, EN_API, match=_page(100),
             json=_page_body(100, "Tidal locking", "The Moon always shows the same face."))
    wiki.add(responses.GET, EN_API, match=_page(101), status=503, body="busy")
    scorer = KeywordScorer({"same face": 0.9, "tidal": 0.8, "moon": 0.7})
    outcome = await search_wikipedia("tidal locking moon", scorer=scorer, timeout_s=4.0,
                                     backoff_s=0.05)
    assert_partial_read(outcome)
    assert {i.title for i in outcome.items} == {"Tidal locking"}  # the page read is usable
    assert "Moon" in (outcome.detail or "")

    # through the graph: answered from the page read, flagged partial, never a clean "answered"
    wiki_tool = make_wikipedia_tool(scorer, timeout_s=4.0, backoff_s=0.05)
    graph = build_graph(chat_model=None, tools={"wikipedia": wiki_tool})
    result = await aask("Why does the Moon always show the same face? tidal locking",
                        sources=["wikipedia"], graph=graph)
    report = result.sources[0]
    assert report.coverage == "partial" and report.finding_count is None
    assert result.status == "partial" and result.citations
    assert "part of Wikipedia could not be read" in result.answer
    complete = outcome.model_copy(update={"coverage": "complete", "finding_count": 1})
    row.record(
        saw=f"{result.status}, coverage {report.coverage}, finding_count {report.finding_count}, "
        f"{len(result.citations)} citation(s)",
        logged=logged(caplog, "could not be read"),
        control=must_reject(assert_partial_read, complete),
    )


async def test_wikipedia_partial_read_with_nothing_relevant_is_never_not_found(
    wiki: responses.RequestsMock, fault: Any
) -> None:
    row = fault(3, "Wikipedia: the page read is irrelevant, the other failed")
    wiki.add(responses.GET, EN_API, match=SEARCH, json=_search_body("Tidal locking", "Moon"))
    wiki.add(responses.GET, EN_API, match=_page(100),
             json=_page_body(100, "Tidal locking", "Gravity gradients slow rotation."))
    wiki.add(responses.GET, EN_API, match=_page(101), status=503, body="busy")
    tool = make_wikipedia_tool(KeywordScorer(default=0.1), timeout_s=4.0, backoff_s=0.05)
    graph = build_graph(chat_model=None, tools={"wikipedia": tool})
    result = await aask("Who named the Moon?", sources=["wikipedia"], graph=graph,
                        context=Context(max_attempts=1))
    assert result.status == "unavailable", result.status
    assert result.sources[0].status == "not_found" and result.sources[0].coverage == "partial"
    assert "could not find" not in result.answer.lower()
    row.record(saw=f"{result.status}: '{result.answer[:90]}'")


# --- one warning per source outage ---------------------------------------------------------------


class DownStore:
    """A store double whose database cannot be reached."""

    async def asearch(self, query: str, k: int = 5, filters: Any = None) -> list[Finding]:
        raise StoreUnavailable("could not connect to the embedded database")


def warned(caplog: pytest.LogCaptureFixture, level: int = logging.WARNING) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.levelno >= level and r.name.startswith("grounded_agent")]


async def test_each_source_outage_is_one_warning(
    wiki: responses.RequestsMock, caplog: pytest.LogCaptureFixture
) -> None:
    """The knowledge base, Wikipedia and web search all down: one WARNING line each (the graph's,
    in call_tools); the retry loop, the tool and its guard say theirs at INFO, for -v. A
    Wikipedia outage used to print three ~400-character warnings, one per layer."""
    caplog.set_level(logging.INFO)
    wiki.add(responses.GET, EN_API, body=requests.exceptions.ConnectionError(
        "HTTPSConnectionPool(host='en.wikipedia.org', port=443): Max retries exceeded"))
    with respx.mock(base_url=TAVILY) as web:
        web.post("/search").mock(return_value=httpx.Response(503, json={}))
        tools = {
            "knowledge_base": make_knowledge_base_tool(
                DownStore(),  # type: ignore[arg-type]
                timeout_s=2.0, policy=RetryPolicy(max_retries=1, backoff_s=0.01)),
            "wikipedia": make_wikipedia_tool(KeywordScorer(), timeout_s=2.0, backoff_s=0.01),
            "web": make_web_search_tool(KeywordScorer(), api_key=KEY, timeout_s=2.0,
                                        backoff_s=0.01),
        }
        result = await run(tools, ["knowledge_base", "wikipedia", "web"])
    assert_failure_not_absence(result)
    lines = warned(caplog)
    assert sorted(line.split()[1] for line in lines) == ["knowledge_base", "web", "wikipedia"], lines
    assert all(line.startswith("source ") for line in lines), lines
    assert [w.kind for w in result.warnings].count("source_unavailable") == 3
    # the control: the layers below did see each outage, more than once for Wikipedia (at INFO)
    assert sum("wikipedia" in line for line in warned(caplog, logging.INFO)) >= 3


@pytest.mark.parametrize("pages", ["every page fails", "one of two pages fails"])
async def test_a_wikipedia_read_that_fails_page_by_page_is_one_warning(
    wiki: responses.RequestsMock, caplog: pytest.LogCaptureFixture, pages: str
) -> None:
    """Pages that cannot be read are logged one by one at INFO; the read gets one WARNING: the
    source failed (every page), or was read in part (some)."""
    caplog.set_level(logging.INFO)
    wiki.add(responses.GET, EN_API, match=SEARCH, json=_search_body("Tidal locking", "Moon"))
    if pages == "every page fails":
        wiki.add(responses.GET, EN_API, match=_page(100), status=503, body="busy")
    else:
        wiki.add(responses.GET, EN_API, match=_page(100),
                 json=_page_body(100, "Tidal locking", "The Moon always shows the same face."))
    wiki.add(responses.GET, EN_API, match=_page(101), status=503, body="busy")
    scorer = KeywordScorer({"same face": 0.9, "tidal": 0.8, "moon": 0.7})
    tool = make_wikipedia_tool(scorer, timeout_s=4.0, backoff_s=0.01)
    result = await aask("Why does the Moon always show the same face? tidal locking",
                        sources=["wikipedia"], graph=build_graph(chat_model=None,
                                                                 tools={"wikipedia": tool}))
    lines = warned(caplog)
    expected = "failed (" if pages == "every page fails" else "read in part: "
    assert len(lines) == 1 and lines[0].startswith(f"source wikipedia {expected}"), lines
    assert result.sources[0].coverage != "complete"
    assert sum("could not be read" in line for line in warned(caplog, logging.INFO)) >= 1
