"""The shared failure classification and retry rule, without any HTTP."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import httpx
import pytest
import requests
from pydantic import BaseModel, ValidationError

from grounded_agent.tools._retry import (
    Failure,
    RetryPolicy,
    SourceFailure,
    classify_exception,
    classify_status,
    parse_retry_after,
    redact,
    retry_delay,
    run_with_retries,
)


@pytest.mark.parametrize(
    ("status", "kind", "retryable"),
    [
        (401, "auth", False),
        (403, "auth", False),
        (429, "rate_limit", True),
        (432, "rate_limit", False),
        (433, "rate_limit", False),
        (408, "timeout", True),
        (500, "unavailable", True),
        (502, "unavailable", True),
        (503, "unavailable", True),
        (400, "unknown", False),
        (404, "unknown", False),
    ],
)
def test_classify_status(status: int, kind: str, retryable: bool) -> None:
    failure = classify_status(status)
    assert failure is not None
    assert (failure.kind, failure.retryable, failure.status) == (kind, retryable, status)


def test_success_statuses_are_no_failure() -> None:
    assert classify_status(200) is None
    assert classify_status(204) is None


def test_429_carries_retry_after() -> None:
    failure = classify_status(429, retry_after="7")
    assert failure is not None and failure.retry_after_s == 7.0


class _Shape(BaseModel):
    results: list[int]


def _validation_error() -> ValidationError:
    try:
        _Shape.model_validate({"results": "nope"})
    except ValidationError as exc:
        return exc
    raise AssertionError("expected a ValidationError")


@pytest.mark.parametrize(
    ("exc", "kind"),
    [
        (requests.exceptions.ReadTimeout("slow"), "timeout"),
        # ConnectTimeout is also a ConnectionError: it must still read as a timeout
        (requests.exceptions.ConnectTimeout("slow connect"), "timeout"),
        (requests.exceptions.ConnectionError("refused"), "unavailable"),
        # requests' JSONDecodeError is also an OSError: it must read as bad_response
        (requests.exceptions.JSONDecodeError("Expecting value", "<html>", 0), "bad_response"),
        (json.JSONDecodeError("Expecting value", "<html>", 0), "bad_response"),
        (_validation_error(), "bad_response"),
        (httpx.ReadTimeout("slow"), "timeout"),
        (httpx.ConnectError("refused"), "unavailable"),
        (TimeoutError(), "timeout"),
        (RuntimeError("boom"), "unknown"),
    ],
)
def test_classify_exception(exc: BaseException, kind: str) -> None:
    assert classify_exception(exc).kind == kind


def test_classify_http_status_errors_by_status() -> None:
    request = httpx.Request("POST", "https://api.example/search")
    response = httpx.Response(429, headers={"Retry-After": "3"}, request=request)
    failure = classify_exception(httpx.HTTPStatusError("429", request=request, response=response))
    assert (failure.kind, failure.retry_after_s) == ("rate_limit", 3.0)

    resp = requests.Response()
    resp.status_code = 503
    assert classify_exception(requests.HTTPError(response=resp)).kind == "unavailable"


def test_source_failure_keeps_its_failure() -> None:
    failure = Failure("bad_response", False, "x")
    assert classify_exception(SourceFailure(failure)) is failure


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("5", 5.0),
        ("0.25", 0.25),
        (" 0 ", 0.0),
        ("-3", 0.0),
        (None, None),
        ("", None),
        ("soon", None),
    ],
)
def test_parse_retry_after_seconds(value: str | None, seconds: float | None) -> None:
    assert parse_retry_after(value) == seconds


def test_parse_retry_after_http_date() -> None:
    now = datetime(2026, 3, 10, 12, 0, 0, tzinfo=UTC)
    assert parse_retry_after("Tue, 10 Mar 2026 12:00:30 GMT", now=now) == 30.0
    assert parse_retry_after("Tue, 10 Mar 2026 11:00:00 GMT", now=now) == 0.0


def test_redact_removes_every_secret() -> None:
    assert redact("key tvly-abc in tvly-abc", "tvly-abc", None) == "key [redacted] in [redacted]"


POLICY = RetryPolicy(max_retries=2, backoff_s=0.5, max_backoff_s=0.8, min_attempt_s=0.05)
TRANSIENT = Failure("unavailable", True, "503")


def test_transient_failures_back_off_exponentially_then_give_up() -> None:
    delays = [
        retry_delay(
            TRANSIENT, retries_done=n, rate_limit_retries_done=0, remaining_s=60, policy=POLICY
        )
        for n in range(3)
    ]
    assert delays == [0.5, 0.8, None]  # 0.5, min(1.0, cap 0.8), then the retries are spent


def test_non_retryable_failures_are_not_retried() -> None:
    for failure in (Failure("auth", False), Failure("bad_response", False)):
        assert (
            retry_delay(
                failure, retries_done=0, rate_limit_retries_done=0, remaining_s=60, policy=POLICY
            )
            is None
        )


def test_rate_limit_waits_retry_after_once_if_it_fits() -> None:
    limited = Failure("rate_limit", True, "429", retry_after_s=2.0)
    assert (
        retry_delay(
            limited, retries_done=0, rate_limit_retries_done=0, remaining_s=5, policy=POLICY
        )
        == 2.0
    )
    # a second 429 is reported, not waited for
    assert (
        retry_delay(
            limited, retries_done=0, rate_limit_retries_done=1, remaining_s=5, policy=POLICY
        )
        is None
    )
    # a Retry-After beyond the remaining budget is reported at once
    assert (
        retry_delay(
            limited, retries_done=0, rate_limit_retries_done=0, remaining_s=2.01, policy=POLICY
        )
        is None
    )


def test_rate_limit_without_retry_after_uses_one_backoff_step() -> None:
    limited = Failure("rate_limit", True, "429")
    assert (
        retry_delay(
            limited, retries_done=0, rate_limit_retries_done=0, remaining_s=5, policy=POLICY
        )
        == 0.5
    )


def test_backoff_never_overruns_the_budget() -> None:
    assert (
        retry_delay(
            TRANSIENT, retries_done=0, rate_limit_retries_done=0, remaining_s=0.5, policy=POLICY
        )
        is None
    )


class _Clock:
    """Fake time: sleeping advances it, nothing really waits."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


async def test_run_with_retries_reports_the_last_failure() -> None:
    clock = _Clock()
    failures = iter(
        [httpx.ConnectError("refused"), httpx.ConnectError("refused"), httpx.ReadTimeout("slow")]
    )

    async def attempt(remaining: float) -> str:
        raise next(failures)

    with pytest.raises(SourceFailure) as info:
        await run_with_retries(
            attempt,
            classify=classify_exception,
            policy=POLICY,
            budget_s=30,
            sleep=clock.sleep,
            clock=clock,
        )
    assert info.value.failure.kind == "timeout"  # the last failure, not the first
    assert clock.sleeps == [0.5, 0.8]


async def test_run_with_retries_returns_after_a_transient_failure() -> None:
    clock = _Clock()
    calls: list[float] = []

    async def attempt(remaining: float) -> str:
        calls.append(remaining)
        if len(calls) == 1:
            raise httpx.ConnectError("refused")
        return "ok"

    result = await run_with_retries(
        attempt,
        classify=classify_exception,
        policy=POLICY,
        budget_s=10,
        sleep=clock.sleep,
        clock=clock,
    )
    assert result == "ok"
    assert calls == [10.0, 9.5]  # each attempt learns the budget left


async def test_run_with_retries_does_not_retry_auth() -> None:
    clock = _Clock()
    calls = 0

    async def attempt(remaining: float) -> str:
        nonlocal calls
        calls += 1
        raise SourceFailure(Failure("auth", False, "401"))

    with pytest.raises(SourceFailure) as info:
        await run_with_retries(
            attempt,
            classify=classify_exception,
            policy=POLICY,
            budget_s=10,
            sleep=clock.sleep,
            clock=clock,
        )
    assert (info.value.failure.kind, calls, clock.sleeps) == ("auth", 1, [])


async def test_run_with_retries_cuts_a_hanging_attempt_at_the_budget() -> None:
    async def attempt(remaining: float) -> str:
        import asyncio

        await asyncio.sleep(5)
        return "late"

    with pytest.raises(SourceFailure) as info:
        await run_with_retries(attempt, classify=classify_exception, policy=POLICY, budget_s=0.1)
    assert info.value.failure.kind == "timeout"
