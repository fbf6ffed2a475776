"""The Tavily web search tool against /search bodies served by `respx` (httpx; no sockets)."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Iterator
from datetime import date
from typing import Any

import httpx
import pytest
import respx
from pydantic import SecretStr, ValidationError

from grounded_agent.schemas import ToolOutcome
from grounded_agent.tools.web_search import (
    WebSearchArgs,
    make_web_search_tool,
    parse_published,
    search_web,
)
from tests.tool_fakes import KeywordScorer, tavily_body

KEY = "tvly-dev-SECRET0123456789abcdef"
QUERY = "when was the James Webb Space Telescope launched"
FAST: dict[str, Any] = {"backoff_s": 0.01, "timeout_s": 3.0}


@pytest.fixture
def tavily() -> Iterator[respx.Router]:
    with respx.mock(base_url="https://api.tavily.com", assert_all_called=False) as router:
        yield router


def scorer() -> KeywordScorer:
    return KeywordScorer({"launched on 25 december": 0.92, "lagrange": 0.6, "canberra": 0.8})


def ok(name: str = "search_ok.json") -> httpx.Response:
    return httpx.Response(200, json=tavily_body(name))


def assert_unavailable(outcome: ToolOutcome, kind: str) -> None:
    """The read did not complete: an error of `kind`, never mistakable for "nothing found"."""
    assert outcome.status == "error"
    assert outcome.error_kind == kind
    assert outcome.finding_count is None
    assert outcome.status != "not_found"
    assert outcome.coverage != "complete"
    assert outcome.items == []


# --- completed reads -------------------------------------------------------------------------


async def test_found_maps_results_to_findings(tavily: respx.Router) -> None:
    route = tavily.post("/search").mock(return_value=ok())
    outcome = await search_web(QUERY, scorer=scorer(), api_key=KEY, **FAST)

    assert outcome.status == "found"
    assert outcome.coverage == "complete"
    assert outcome.finding_count == 3 == len(outcome.items)
    best = outcome.items[0]
    assert best.source == "web"
    assert best.url == best.source_id == "https://science.example.org/webb/overview"
    assert best.title == "James Webb Space Telescope - Mission overview"
    assert best.text.startswith("The James Webb Space Telescope was launched on 25 December 2021")
    assert best.score == 0.92  # our calibrated scale, not Tavily's
    assert best.raw_score == best.extra["tavily_score"] == 0.91
    # the request: key in the Authorization header only, arguments in the JSON body
    request = route.calls.last.request
    assert request.headers["Authorization"] == f"Bearer {KEY}"
    sent = json.loads(request.content)
    assert KEY not in request.content.decode()
    assert sent["query"] == QUERY and sent["max_results"] == 5 and sent["topic"] == "general"
    assert "time_range" not in sent


async def test_topic_time_range_and_published_dates(tavily: respx.Router) -> None:
    route = tavily.post("/search").mock(return_value=ok("search_news.json"))
    outcome = await search_web(
        "Ariane 6 launch",
        scorer=KeywordScorer(default=0.8),
        api_key=KEY,
        max_results=3,
        topic="news",
        time_range="week",
        **FAST,
    )
    sent = json.loads(route.calls.last.request.content)
    assert (sent["topic"], sent["time_range"], sent["max_results"]) == ("news", "week", 3)
    dates = {i.url: i.document_date for i in outcome.items}
    assert dates["https://news.example.com/2026/03/ariane6"] == date(2026, 3, 10)
    assert dates["https://space.example.org/schedule"] == date(2026, 2, 27)
    assert dates["https://blog.example.net/note"] is None
    undated = next(i for i in outcome.items if i.url == "https://blog.example.net/note")
    assert undated.extra["published_date_raw"] == "sometime last spring"


async def test_empty_results_are_not_found_with_count_zero(tavily: respx.Router) -> None:
    tavily.post("/search").mock(return_value=ok("search_empty.json"))
    outcome = await search_web("qwxzvbn flurble", scorer=scorer(), api_key=KEY, **FAST)
    assert outcome.status == "not_found"
    assert outcome.coverage == "complete"
    assert outcome.finding_count == 0
    assert outcome.error_kind is None


async def test_low_relevance_by_our_scorer_not_by_tavily_score(tavily: respx.Router) -> None:
    tavily.post("/search").mock(return_value=ok())  # Tavily scores its best result 0.91
    outcome = await search_web(QUERY, scorer=KeywordScorer(default=0.6), api_key=KEY, **FAST)
    assert outcome.status == "low_relevance"


async def test_injected_instructions_stay_plain_text_data(tavily: respx.Router) -> None:
    route = tavily.post("/search").mock(return_value=ok("search_injection.json"))
    outcome = await search_web(
        "what is the capital of Australia", scorer=scorer(), api_key=KEY, **FAST
    )
    fixture = tavily_body("search_injection.json")["results"][0]
    injected = next(i for i in outcome.items if i.url == fixture["url"])
    assert injected.text == fixture["content"]  # passed through verbatim, as data
    assert "Ignore previous instructions" in injected.text
    assert outcome.status == "found"
    assert route.call_count == 1  # nothing in the content made the tool call anything else
    assert len(tavily.calls) == 1


async def test_duplicate_urls_are_kept_once(tavily: respx.Router) -> None:
    body = tavily_body("search_ok.json")
    body["results"].append(dict(body["results"][0], content="repeat"))
    tavily.post("/search").mock(return_value=httpx.Response(200, json=body))
    outcome = await search_web(QUERY, scorer=scorer(), api_key=KEY, **FAST)
    assert outcome.finding_count == 3
    assert len({i.key for i in outcome.items}) == 3


# --- configuration and auth ------------------------------------------------------------------


async def test_no_key_is_config_error_and_no_request(tavily: respx.Router) -> None:
    route = tavily.post("/search").mock(return_value=ok())
    outcome = await search_web(QUERY, scorer=scorer(), api_key=None, **FAST)
    assert_unavailable(outcome, "config")
    assert route.call_count == 0 and len(tavily.calls) == 0


async def test_blank_key_is_config_error(tavily: respx.Router) -> None:
    outcome = await search_web(QUERY, scorer=scorer(), api_key=SecretStr("  "), **FAST)
    assert_unavailable(outcome, "config")
    assert len(tavily.calls) == 0


async def test_key_from_environment(tavily: respx.Router, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TAVILY_API_KEY", KEY)
    route = tavily.post("/search").mock(return_value=ok())
    outcome = await search_web(QUERY, scorer=scorer(), api_key=None, **FAST)
    assert outcome.status == "found"
    assert route.calls.last.request.headers["Authorization"] == f"Bearer {KEY}"


@pytest.mark.parametrize("status", [401, 403])
async def test_auth_failures_are_not_retried(tavily: respx.Router, status: int) -> None:
    route = tavily.post("/search").mock(
        return_value=httpx.Response(status, json=tavily_body("error_401.json"))
    )
    outcome = await search_web(QUERY, scorer=scorer(), api_key=KEY, **FAST)
    assert_unavailable(outcome, "auth")
    assert route.call_count == 1


# --- rate limits ------------------------------------------------------------------------------


def limited(retry_after: str | None) -> httpx.Response:
    headers = {"Retry-After": retry_after} if retry_after is not None else {}
    return httpx.Response(429, json=tavily_body("error_429.json"), headers=headers)


async def test_429_waits_retry_after_then_succeeds(tavily: respx.Router) -> None:
    route = tavily.post("/search").mock(side_effect=[limited("0.2"), ok()])
    started = time.perf_counter()
    outcome = await search_web(QUERY, scorer=scorer(), api_key=KEY, **FAST)
    assert outcome.status == "found"
    assert route.call_count == 2
    assert time.perf_counter() - started >= 0.2  # Retry-After was honoured


async def test_429_beyond_the_budget_is_reported_at_once(tavily: respx.Router) -> None:
    route = tavily.post("/search").mock(side_effect=[limited("30"), ok()])
    started = time.perf_counter()
    outcome = await search_web(QUERY, scorer=scorer(), api_key=KEY, backoff_s=0.01, timeout_s=2)
    assert_unavailable(outcome, "rate_limit")
    assert route.call_count == 1
    assert time.perf_counter() - started < 1.0  # it did not sit out the 30 s


async def test_429_is_retried_only_once(tavily: respx.Router) -> None:
    route = tavily.post("/search").mock(side_effect=[limited("0"), limited("0"), ok()])
    outcome = await search_web(QUERY, scorer=scorer(), api_key=KEY, **FAST)
    assert_unavailable(outcome, "rate_limit")
    assert route.call_count == 2


async def test_plan_limit_432_is_rate_limit_without_retry(tavily: respx.Router) -> None:
    route = tavily.post("/search").mock(
        return_value=httpx.Response(432, json=tavily_body("error_432.json"))
    )
    outcome = await search_web(QUERY, scorer=scorer(), api_key=KEY, **FAST)
    assert_unavailable(outcome, "rate_limit")
    assert route.call_count == 1


# --- transient failures: bounded retries with backoff ------------------------------------------


def server_error(status: int = 500) -> httpx.Response:
    return httpx.Response(status, json=tavily_body("error_500.json"))


async def test_5xx_then_success(tavily: respx.Router) -> None:
    route = tavily.post("/search").mock(side_effect=[server_error(503), ok()])
    outcome = await search_web(QUERY, scorer=scorer(), api_key=KEY, **FAST)
    assert outcome.status == "found"
    assert route.call_count == 2


async def test_persistent_5xx_is_unavailable_after_bounded_retries(tavily: respx.Router) -> None:
    route = tavily.post("/search").mock(return_value=server_error(502))
    outcome = await search_web(QUERY, scorer=scorer(), api_key=KEY, max_retries=2, **FAST)
    assert_unavailable(outcome, "unavailable")
    assert route.call_count == 3  # one try and two retries


async def test_persistent_timeouts_are_timeout(tavily: respx.Router) -> None:
    route = tavily.post("/search").mock(side_effect=httpx.ReadTimeout("timed out"))
    outcome = await search_web(QUERY, scorer=scorer(), api_key=KEY, max_retries=2, **FAST)
    assert_unavailable(outcome, "timeout")
    assert route.call_count == 3


async def test_the_last_failure_decides_the_kind(tavily: respx.Router) -> None:
    route = tavily.post("/search").mock(
        side_effect=[server_error(), server_error(), httpx.ConnectTimeout("connect timed out")]
    )
    outcome = await search_web(QUERY, scorer=scorer(), api_key=KEY, max_retries=2, **FAST)
    assert_unavailable(outcome, "timeout")
    assert route.call_count == 3


async def test_connection_errors_are_unavailable(tavily: respx.Router) -> None:
    tavily.post("/search").mock(side_effect=httpx.ConnectError("connection refused"))
    outcome = await search_web(QUERY, scorer=scorer(), api_key=KEY, max_retries=1, **FAST)
    assert_unavailable(outcome, "unavailable")


async def test_slow_server_is_cut_at_the_time_budget(tavily: respx.Router) -> None:
    async def slow(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(2)
        return ok()

    tavily.post("/search").mock(side_effect=slow)
    started = time.perf_counter()
    outcome = await search_web(QUERY, scorer=scorer(), api_key=KEY, timeout_s=0.3, backoff_s=0.01)
    assert_unavailable(outcome, "timeout")
    assert time.perf_counter() - started < 1.0


# --- malformed bodies --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "response",
    [
        httpx.Response(200, text="<html>upstream error</html>"),
        httpx.Response(200, text='{"query": "x", "results": [{"url": '),
        httpx.Response(200, json=["not", "an", "object"]),
        httpx.Response(200, json=tavily_body("search_results_not_list.json")),
        # the SDK would turn this into an empty result list, i.e. a false "nothing found"
        httpx.Response(200, json=tavily_body("search_missing_results.json")),
        httpx.Response(200, json=tavily_body("search_result_without_url.json")),
    ],
    ids=["html", "truncated", "list", "results-not-list", "no-results", "result-without-url"],
)
async def test_malformed_bodies_are_bad_response_not_retried(
    tavily: respx.Router, response: httpx.Response
) -> None:
    route = tavily.post("/search").mock(return_value=response)
    outcome = await search_web(QUERY, scorer=scorer(), api_key=KEY, **FAST)
    assert_unavailable(outcome, "bad_response")
    assert route.call_count == 1


# --- the key never leaks -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "effect",
    [
        ok(),
        httpx.Response(401, json={"detail": {"error": f"Invalid API key: {KEY}"}}),
        httpx.Response(500, text=f"crash while handling Bearer {KEY}"),
        httpx.Response(200, text=f"not json {KEY}"),
        httpx.ReadTimeout(f"timed out for {KEY}"),
    ],
    ids=["ok", "401-echoing-key", "500-echoing-key", "bad-body-echoing-key", "timeout"],
)
async def test_the_key_never_reaches_logs_or_outcomes(
    tavily: respx.Router, caplog: pytest.LogCaptureFixture, effect: Any
) -> None:
    caplog.set_level(logging.DEBUG)
    for name in ("httpx", "httpcore", "grounded_agent", "tavily"):
        caplog.set_level(logging.DEBUG, logger=name)
    tavily.post("/search").mock(side_effect=[effect] * 3)
    outcome = await search_web(QUERY, scorer=scorer(), api_key=KEY, max_retries=0, **FAST)

    assert caplog.records  # something was logged, and scanned
    assert KEY not in caplog.text
    assert all(KEY not in str(r.args) for r in caplog.records)
    assert KEY not in outcome.model_dump_json()
    assert KEY not in repr(outcome)
    assert KEY not in (outcome.detail or "")


async def test_the_tool_holds_its_key_as_a_secret(tavily: respx.Router) -> None:
    tool = make_web_search_tool(scorer(), api_key=KEY)
    assert KEY not in repr(tool)
    route = tavily.post("/search").mock(return_value=ok())
    outcome = await tool.run({"query": QUERY, "max_results": 2, "topic": "news"})
    assert outcome.status == "found"
    sent = json.loads(route.calls.last.request.content)
    assert (sent["max_results"], sent["topic"]) == (2, "news")


# --- the tool as the graph sees it ------------------------------------------------------------


async def test_tool_without_key_reports_config(tavily: respx.Router) -> None:
    tool = make_web_search_tool(scorer())
    assert tool.name == "web"
    outcome = await tool.run({"query": QUERY})
    assert_unavailable(outcome, "config")
    assert len(tavily.calls) == 0


async def test_tool_rejects_arguments_outside_the_schema() -> None:
    tool = make_web_search_tool(scorer(), api_key=KEY)
    outcome = await tool.run({"query": QUERY, "max_results": 50})
    assert_unavailable(outcome, "config")


@pytest.mark.parametrize(
    "raw",
    [
        {"query": ""},
        {"query": "x" * 401},
        {"query": "x", "max_results": 0},
        {"query": "x", "max_results": 11},
        {"query": "x", "topic": "finance"},
        {"query": "x", "time_range": "decade"},
    ],
)
def test_web_search_args_bounds(raw: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        WebSearchArgs.model_validate(raw)


def test_web_search_args_defaults() -> None:
    args = WebSearchArgs(query="x")
    assert (args.max_results, args.topic, args.time_range) == (5, "general", None)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("2026-02-27", date(2026, 2, 27)),
        ("2026-02-27T10:00:00Z", date(2026, 2, 27)),
        ("Tue, 10 Mar 2026 14:05:00 GMT", date(2026, 3, 10)),
        ("yesterday", None),
        (None, None),
    ],
)
def test_parse_published(raw: str | None, expected: date | None) -> None:
    assert parse_published(raw) == expected
