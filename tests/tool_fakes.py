"""Test doubles for the source tools: a scripted relevance scorer and HTTP fixture loaders."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import requests
import responses

FIXTURES = Path(__file__).resolve().parent / "fixtures"
WIKI_FIXTURES = FIXTURES / "wikipedia"
TAVILY_FIXTURES = FIXTURES / "tavily"


class KeywordScorer:
    """Deterministic RelevanceScorer: a text scores the highest value among the phrases it
    contains (case-insensitive), `default` otherwise. Records every call."""

    def __init__(self, rules: dict[str, float] | None = None, default: float = 0.1) -> None:
        self.rules = {k.lower(): v for k, v in (rules or {}).items()}
        self.default = default
        self.calls: list[tuple[str, list[str]]] = []

    def score(
        self, query: str, texts: Sequence[str], cosine: Sequence[float] | None = None
    ) -> list[float]:
        self.calls.append((query, list(texts)))
        out = []
        for text in texts:
            low = text.lower()
            hits = [v for k, v in self.rules.items() if k in low]
            out.append(max(hits) if hits else self.default)
        return out


def tavily_body(name: str) -> Any:
    """A Tavily /search (or error) body from tests/fixtures/tavily."""
    return json.loads((TAVILY_FIXTURES / name).read_text())


def _params_matcher(expected: dict[str, str]) -> Any:
    """Request params include `expected`; a first result page (no sroffset expected) must not
    carry sroffset, so page 1 and page 2 of one search are told apart."""

    def match(request: requests.PreparedRequest) -> tuple[bool, str]:
        got = dict(parse_qsl(urlsplit(request.url or "").query))
        for key, value in expected.items():
            if got.get(key) != value:
                return False, f"{key}: {got.get(key)!r} != {value!r}"
        if "sroffset" not in expected and "sroffset" in got:
            return False, "unexpected sroffset"
        return True, ""

    return match


def register_wiki_cassette(rsps: responses.RequestsMock, name: str) -> list[dict[str, Any]]:
    """Serves every entry of a tests/fixtures/wikipedia cassette; returns the entries.

    Entries are {request: {method, uri}, response: {status, content_type, json | body,
    headers?} | {raise: "timeout" | "connection"}}, the shape of ../shared/fixtures/wikipedia_api.
    Matching is on the params the fixture's URI names, so extra request params do not matter.
    """
    entries: list[dict[str, Any]] = json.loads((WIKI_FIXTURES / name).read_text())
    for entry in entries:
        uri = entry["request"]["uri"]
        parts = urlsplit(uri)
        base = f"{parts.scheme}://{parts.netloc}{parts.path}"
        expected = dict(parse_qsl(parts.query))
        expected.pop("format", None)
        match = [_params_matcher(expected)]
        resp = entry["response"]
        if "raise" in resp:
            exc: Exception = (
                requests.exceptions.ReadTimeout("Read timed out. (read timeout=12.0)")
                if resp["raise"] == "timeout"
                else requests.exceptions.ConnectionError("Connection refused")
            )
            rsps.add(responses.GET, base, body=exc, match=match)
            continue
        body = json.dumps(resp["json"]) if "json" in resp else resp["body"]
        rsps.add(
            responses.GET,
            base,
            body=body,
            status=resp["status"],
            content_type=resp.get("content_type", "application/json"),
            headers=resp.get("headers"),
            match=match,
        )
    return entries
