"""Failure classification and the retry rule shared by the HTTP-backed source tools.

LangGraph's default RetryPolicy retries neither HTTP 429 nor timeouts, and a tool must report
*why* it could not read a source, so the rule lives here: classify every failure into an
ErrorKind, retry only what a retry can fix, and never wait past the caller's time budget.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import TypeVar

import httpx
import requests
from pydantic import ValidationError

from grounded_agent.schemas import ErrorKind

log = logging.getLogger(__name__)

T = TypeVar("T")

_DETAIL_MAX = 300


@dataclass(frozen=True)
class Failure:
    """One classified failure: what kind, whether trying again can help, and log detail."""

    kind: ErrorKind
    retryable: bool
    detail: str = ""
    retry_after_s: float | None = None
    status: int | None = None


class SourceFailure(Exception):
    """Carries a classified failure from deep inside a tool to where it becomes a ToolOutcome."""

    def __init__(self, failure: Failure) -> None:
        super().__init__(f"{failure.kind}: {failure.detail}")
        self.failure = failure


@dataclass(frozen=True)
class RetryPolicy:
    """Bounded retries: transient failures back off exponentially, a 429 is retried at most once."""

    max_retries: int = 2
    backoff_s: float = 0.5
    max_backoff_s: float = 8.0
    rate_limit_retries: int = 1
    min_attempt_s: float = 0.05
    """A retry is only worth it if at least this much budget is left after the wait."""


def short(text: str, limit: int = _DETAIL_MAX) -> str:
    """Log detail is bounded: error bodies can be whole HTML pages."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def redact(text: str, *secrets: str | None) -> str:
    """Removes every secret from a string before it reaches a log line or an outcome."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "[redacted]")
    return text


def parse_retry_after(value: str | None, *, now: datetime | None = None) -> float | None:
    """Seconds from a Retry-After header (delta-seconds or HTTP-date); None if unreadable."""
    if value is None or not value.strip():
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = (when - (now or datetime.now(UTC))).total_seconds()
    if math.isnan(seconds) or math.isinf(seconds):
        return None
    return max(0.0, seconds)


def classify_status(
    status: int, *, retry_after: str | None = None, detail: str = ""
) -> Failure | None:
    """The failure an HTTP status means, or None for success (2xx)."""
    if 200 <= status < 300:
        return None
    text = short(f"HTTP {status}" + (f": {detail}" if detail else ""))
    if status in (401, 403):
        return Failure("auth", retryable=False, detail=text, status=status)
    if status == 429:
        return Failure(
            "rate_limit",
            retryable=True,
            detail=text,
            status=status,
            retry_after_s=parse_retry_after(retry_after),
        )
    if status in (432, 433):  # Tavily: plan or pay-as-you-go quota used up; waiting will not help
        return Failure("rate_limit", retryable=False, detail=text, status=status)
    if status == 408:
        return Failure("timeout", retryable=True, detail=text, status=status)
    if status >= 500:
        return Failure("unavailable", retryable=True, detail=text, status=status)
    return Failure("unknown", retryable=False, detail=text, status=status)


def classify_exception(exc: BaseException) -> Failure:
    """Maps requests/httpx/JSON/validation exceptions to a Failure. Order matters: in requests a
    JSONDecodeError is also an OSError and a ConnectTimeout is also a ConnectionError."""
    name = type(exc).__name__
    if isinstance(exc, SourceFailure):
        return exc.failure
    if isinstance(exc, (json.JSONDecodeError, ValidationError, UnicodeDecodeError)):
        return Failure("bad_response", retryable=False, detail=short(f"{name}: {exc}"))
    if isinstance(exc, httpx.HTTPStatusError):
        response = exc.response
        return classify_status(
            response.status_code, retry_after=response.headers.get("retry-after")
        ) or Failure(
            "bad_response", retryable=False, detail=f"unexpected HTTP {response.status_code}"
        )
    if isinstance(exc, requests.HTTPError) and exc.response is not None:
        resp = exc.response
        return classify_status(
            resp.status_code, retry_after=resp.headers.get("retry-after")
        ) or Failure("bad_response", retryable=False, detail=f"unexpected HTTP {resp.status_code}")
    if isinstance(exc, (httpx.TimeoutException, requests.Timeout, TimeoutError)):
        return Failure("timeout", retryable=True, detail=short(f"{name}: {exc}"))
    if isinstance(exc, (httpx.TransportError, requests.ConnectionError)):
        return Failure("unavailable", retryable=True, detail=short(f"{name}: {exc}"))
    if isinstance(exc, httpx.DecodingError):
        return Failure("bad_response", retryable=False, detail=short(f"{name}: {exc}"))
    return Failure("unknown", retryable=False, detail=short(f"{name}: {exc}"))


def retry_delay(
    failure: Failure,
    *,
    retries_done: int,
    rate_limit_retries_done: int,
    remaining_s: float,
    policy: RetryPolicy,
) -> float | None:
    """Seconds to wait before trying again, or None to give up and report `failure`.

    A 429 is retried at most `policy.rate_limit_retries` times, after its Retry-After (or one
    backoff step without one), and only if that wait still leaves time for a request.
    Timeouts and 5xx back off exponentially, at most `policy.max_retries` times.
    """
    if not failure.retryable:
        return None
    if failure.kind == "rate_limit":
        if rate_limit_retries_done >= policy.rate_limit_retries:
            return None
        delay = failure.retry_after_s if failure.retry_after_s is not None else policy.backoff_s
    else:
        if retries_done >= policy.max_retries:
            return None
        delay = min(policy.backoff_s * (2**retries_done), policy.max_backoff_s)
    if delay + policy.min_attempt_s > remaining_s:
        return None
    return delay


class _Retries:
    """The bookkeeping of one retried call, shared by the async and the blocking loop: how many
    retries of each kind were spent, and what the rule says after the next failure."""

    def __init__(self, policy: RetryPolicy, label: str) -> None:
        self.policy, self.label = policy, label
        self.retries = self.rate_retries = 0

    def after(self, failure: Failure, remaining_s: float) -> float:
        """Seconds to wait before the next try; raises SourceFailure(failure) to give up."""
        delay = retry_delay(
            failure,
            retries_done=self.retries,
            rate_limit_retries_done=self.rate_retries,
            remaining_s=remaining_s,
            policy=self.policy,
        )
        if delay is None:  # INFO: the graph warns once per failed source (nodes/call_tools)
            log.info(
                "%s failed (%s), not retrying: %s", self.label, failure.kind, failure.detail
            )
            raise SourceFailure(failure)
        if failure.kind == "rate_limit":
            self.rate_retries += 1
        else:
            self.retries += 1
        log.info(
            "%s failed (%s), retrying in %.2fs: %s", self.label, failure.kind, delay, failure.detail
        )
        return delay


def _spent(budget_s: float) -> SourceFailure:
    return SourceFailure(Failure("timeout", False, f"time budget of {budget_s:.1f}s spent"))


async def run_with_retries(
    attempt: Callable[[float], Awaitable[T]],
    *,
    classify: Callable[[BaseException], Failure],
    policy: RetryPolicy,
    budget_s: float,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    clock: Callable[[], float] = time.monotonic,
    label: str = "source",
) -> T:
    """Runs `attempt(seconds_left)` until it succeeds or the rule gives up.

    Raises SourceFailure with the *last* failure, so a run that ends on a timeout reports
    "timeout" and one that ends on a 5xx reports "unavailable".
    """
    deadline = clock() + budget_s
    rule = _Retries(policy, label)
    while True:
        remaining = deadline - clock()
        if remaining <= 0:
            raise _spent(budget_s)
        try:
            return await asyncio.wait_for(attempt(remaining), timeout=remaining)
        except Exception as exc:  # classified below; nothing is swallowed silently
            failure = classify(exc)
        await sleep(rule.after(failure, deadline - clock()))


def run_with_retries_blocking(
    attempt: Callable[[float], T],
    *,
    classify: Callable[[BaseException], Failure],
    policy: RetryPolicy,
    deadline: float,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    label: str = "source",
) -> T:
    """`run_with_retries` for blocking clients (requests in a worker thread): the same rule,
    bounded by an absolute `deadline` on `clock`. `attempt` must bound itself by the seconds
    it is given (a request timeout), since a blocking call cannot be cancelled."""
    budget_s = max(0.0, deadline - clock())
    rule = _Retries(policy, label)
    while True:
        remaining = deadline - clock()
        if remaining <= 0:
            raise _spent(budget_s)
        try:
            return attempt(remaining)
        except Exception as exc:  # classified below; nothing is swallowed silently
            failure = classify(exc)
        sleep(rule.after(failure, deadline - clock()))


def with_detail(failure: Failure, prefix: str) -> Failure:
    """The same failure with context prepended to its detail."""
    return replace(failure, detail=short(f"{prefix}: {failure.detail}"))
