"""Row 10 (schema fuzzing, issue 26): bodies generated from the endpoint's own request schema
(its OpenAPI document) and mutated, for invoke, batch, stream, stream_log and page requests (the
search routes: `{"input": {"search": ...}}` on invoke and stream); the Python API (`aask`,
`asearch`) from the JSON schemas of its inputs; the CLI from its own argparse parser.

What must hold: no 5xx but 503, no traceback to a client, no raw exception (the API raises
InvalidQuestion or returns a result; the CLI exits 0, 1 with a sentence, or 2). 60 inputs per
route in the default suite, 2,000 under --run-heavy ($GA_SCHEMA_FUZZ overrides both). The four
causes of the 500s found by hand are regression tests of their own.
"""

from __future__ import annotations

import argparse
import io
import json
import logging
import os
import random
import uuid
from collections import Counter
from contextlib import redirect_stderr, redirect_stdout
from typing import Any

import httpx
import pytest

from grounded_agent import InvalidQuestion, aask, asearch, cli
from grounded_agent.documents import DocumentQuery
from grounded_agent.schemas import AgentResult
from grounded_agent.serve.app import ServeSettings, create_app
from grounded_agent.serve.schemas import AgentInput
from grounded_agent.store import KnowledgeStore
from tests.faults.test_fuzz import graph
from tests.support.schema_fuzz import (
    SPECIAL_TEXT,
    SchemaFuzzer,
    batch_shapes,
    python_value,
)
from tests.support.serving import serving

pytestmark = pytest.mark.integration

SEED = int(os.environ.get("GA_SCHEMA_FUZZ_SEED", "26"))
ROUTES = ("invoke", "batch", "stream", "stream_log", "search_invoke", "search_stream")


def examples(request: pytest.FixtureRequest) -> int:
    """Inputs per route: 60, 2,000 under --run-heavy, or $GA_SCHEMA_FUZZ."""
    if os.environ.get("GA_SCHEMA_FUZZ"):
        return int(os.environ["GA_SCHEMA_FUZZ"])
    return 2_000 if request.config.getoption("--run-heavy") else 60


def check_response(route: str, r: httpx.Response) -> None:
    """No 5xx but 503 shedding, no traceback, a refusal is a JSON error, a stream has no
    error event (a server fault inside a 200)."""
    assert r.status_code < 500 or r.status_code == 503, (r.status_code, r.text[:300])
    assert "Traceback" not in r.text and 'File "' not in r.text, r.text[:300]
    if r.status_code >= 400:
        assert r.json()["error"], r.text
    elif "stream" in route:
        assert "event: error" not in r.text, r.text[-300:]


def test_the_check_rejects_server_errors() -> None:
    """Negative control: a 500, a traceback in a 422, an error event in a 200 stream all fail."""
    req = httpx.Request("POST", "http://x/agent/invoke")
    for route, bad in (
        ("invoke", httpx.Response(500, json={"error": "internal_error"}, request=req)),
        ("invoke", httpx.Response(502, json={"error": "bad_gateway"}, request=req)),
        ("batch", httpx.Response(422, text='Traceback (most recent call last):\n  File "x"',
                                 request=req)),
        ("stream_log", httpx.Response(200, text='event: error\ndata: {"status_code": 500}',
                                      request=req)),
    ):
        with pytest.raises(AssertionError):
            check_response(route, bad)
    check_response("invoke", httpx.Response(503, json={"error": "overloaded"}, request=req))


def _route_schema(route: str, components: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """(path, request schema) of a fuzzed route, as the endpoint's OpenAPI document gives it."""
    if route.startswith("search_"):
        page = {"type": "object", "required": ["input"], "properties": {
            "input": {"type": "object", "required": ["search"],
                      "properties": {"search": {"$ref": "#/components/schemas/DocumentQuery"}}},
            "config": {"$ref": "#/components/schemas/agentAgentConfig"}}}
        return route.removeprefix("search_"), page
    name = {"invoke": "agentInvokeRequest", "batch": "agentBatchRequest",
            "stream": "agentStreamRequest", "stream_log": "agentStreamLogRequest"}[route]
    return route, {"$ref": f"#/components/schemas/{name}"}


@pytest.fixture
def fuzz_app(fake_store: KnowledgeStore) -> Any:
    return create_app(graph(), store=fake_store, settings=ServeSettings(), threads=True)


@pytest.mark.parametrize("route", ROUTES)
def test_endpoint_schema_fuzz(route: str, fuzz_app: Any, fault: Any,
                              request: pytest.FixtureRequest,
                              caplog: pytest.LogCaptureFixture) -> None:
    count = examples(request)
    row = fault(10, f"schema fuzz: /agent/{route} ({count} bodies)")
    caplog.set_level(logging.WARNING)
    components = fuzz_app.openapi()["components"]["schemas"]
    path, schema = _route_schema(route, components)
    fuzzer = SchemaFuzzer(schema, components, seed=SEED + ROUTES.index(route),
                          thread_prefix=f"sfz-{uuid.uuid4().hex[:6]}-")
    tally: Counter[str] = Counter()
    with serving(fuzz_app) as base, httpx.Client(base_url=base, timeout=120) as client:
        for i in range(count):
            if route == "batch" and i % 5 == 4:
                body = json.dumps(batch_shapes(
                    fuzzer, {"$ref": "#/components/schemas/AgentInput"}), ensure_ascii=True
                ).encode()
            else:
                body = fuzzer.body()
            r = client.post(f"/agent/{path}", content=body,
                            headers={"content-type": "application/json"})
            try:
                check_response(route, r)
            except AssertionError as exc:
                raise AssertionError(f"seed {SEED + ROUTES.index(route)} body #{i}: {body[:400]!r}") from exc
            tally[str(r.status_code)] += 1
    errors = [r.getMessage()[:200] for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == []
    assert sum(tally.values()) == count and tally["200"] > 0 and tally["422"] > 0, tally
    row.record(saw=", ".join(f"{k}: {v}" for k, v in sorted(tally.items())),
               logged=f"{len(errors)} ERROR records",
               control="check_response rejects a 500/502, a traceback, a stream error event; "
               "some bodies answered 200 (the fuzzer reaches the graph)",
               **{f"{route} {k}": v for k, v in sorted(tally.items())},
               mutations=dict(fuzzer.mutations_used))


# --- the four causes found by hand, on every route they apply to ------------------------------

KNOWN = [
    ("invoke", b'{"input": {"question": "Pro plan price?"}, "config": null}', "config"),
    ("stream", b'{"input": {"question": "Pro plan price?"}, "config": null}', "config"),
    ("stream_log", b'{"input": {"question": "Pro plan price?"}, "config": null}', "config"),
    ("batch", b'{"inputs": [{"question": "Pro plan price?"}], "config": null}', "config"),
    ("invoke", b'{"input": {"question": "Pro plan price?"}, "n": ' + b"7" * 4_301 + b"}",
     "4300 digits"),
    ("batch", b'{"inputs": [{"search": {"page": ' + b"1" * 5_000 + b"}}]}", "4300 digits"),
    ("batch", b'{"inputs": 5}', "inputs"),
    ("batch", b'{"inputs": true}', "inputs"),
    ("batch", b'{"inputs": false}', "inputs"),
    ("batch", b'{"inputs": null}', "inputs"),
    ("invoke", b'{"input": {"search": {"text": "price\\u0000list"}}}', "NUL"),
    ("stream", b'{"input": {"search": {"text": "price\\u0000list"}}}', "NUL"),
]


@pytest.mark.parametrize(("route", "body", "needle"), KNOWN)
def test_the_four_known_causes_answer_422(route: str, body: bytes, needle: str,
                                          fuzz_app: Any) -> None:
    with serving(fuzz_app) as base:
        r = httpx.post(f"{base}/agent/{route}", content=body, timeout=60,
                       headers={"content-type": "application/json"})
    assert r.status_code == 422, r.text[:300]
    assert r.json()["error"] == "invalid_input" and needle in r.json()["detail"]


async def test_a_nul_in_the_search_text_is_invalid_question_not_a_database_error(
    fake_store: KnowledgeStore,
) -> None:
    with pytest.raises(InvalidQuestion, match="NUL"):
        await asearch("price\x00list", store=fake_store)
    ok = await asearch("price list", store=fake_store)  # control: the same store answers
    assert ok.result_type == "search" and ok.status == "not_found"


# --- the Python API ---------------------------------------------------------------------------


def _api_call_ok(outcome: Any) -> str:
    if isinstance(outcome, InvalidQuestion):
        message = str(outcome)
        assert message and "\n" not in message and "Traceback" not in message, message
        return "InvalidQuestion"
    assert isinstance(outcome, AgentResult), repr(outcome)[:300]
    outcome.model_dump_json().encode("utf-8")  # the result can be encoded and stored
    return f"result ({outcome.status})"


async def test_python_api_schema_fuzz(fake_store: KnowledgeStore, fault: Any,
                                      request: pytest.FixtureRequest) -> None:
    count = examples(request)
    row = fault(10, f"schema fuzz: Python aask() and asearch() ({count} calls each)")
    ask_schema = AgentInput.model_json_schema()
    ask_schema["properties"] = {k: v for k, v in ask_schema["properties"].items()
                                if k != "search"}
    ask_schema["properties"]["thread_id"] = {"anyOf": [{"type": "string"}, {"type": "null"}]}
    ask_schema["required"] = ["question"]
    asks = SchemaFuzzer(ask_schema, ask_schema.get("$defs"), seed=SEED + 100)
    searches = SchemaFuzzer(DocumentQuery.model_json_schema(), seed=SEED + 101)
    g = graph()
    tally: Counter[str] = Counter()
    for i in range(count):
        for name, fuzzer in (("aask", asks), ("asearch", searches)):
            value = python_value(fuzzer.value())
            kwargs = dict(value) if isinstance(value, dict) else {"text": value}
            try:
                if name == "aask":
                    question = kwargs.pop("question", None)
                    outcome: Any = await aask(question, graph=g, **kwargs)
                else:
                    text = kwargs.pop("text", None)
                    outcome = await asearch(text, store=fake_store, **kwargs)
            except InvalidQuestion as exc:
                outcome = exc
            except Exception as exc:  # a raw exception is the failure this test looks for
                raise AssertionError(f"{name} #{i} raised {exc!r} for {value!r:.400}") from exc
            tally[f"{name}: {_api_call_ok(outcome)}"] += 1
    assert sum(tally.values()) == 2 * count and tally["aask: InvalidQuestion"] > 0, tally
    assert any(k.startswith("asearch: result") for k in tally), tally
    row.record(saw=", ".join(f"{k} {v}" for k, v in sorted(tally.items())),
               control="a raw exception fails the run (no catch-all); an unencodable result "
               "fails it too", **{k: v for k, v in sorted(tally.items())})


# --- the CLI, from its own parser -------------------------------------------------------------

CLI_COMMANDS = (("ask",), ("search",), ("docs", "show"), ("docs", "remove"), ("docs", "list"))
"""What the CLI fuzz runs; not ingest, demo, serve or eval (a generated path could be real)."""


def _subparser(parser: argparse.ArgumentParser, names: tuple[str, ...]) -> argparse.ArgumentParser:
    for name in names:
        action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = action.choices[name]
    return parser


def _cli_value(rng: random.Random, action: argparse.Action) -> str:
    """A value for `action`: plausible, or broken the way a command line breaks it (invalid
    UTF-8 arrives as surrogateescape characters U+DC80..U+DCFF)."""
    if action.type is int:
        plain = str(rng.choice([1, 2, 20, 50]))
        broken = rng.choice(["0", "-1", "9" * 5_000, "1e3", "", "x", "\udcff", "99999999999"])
    else:
        plain = rng.choice(["Pro plan price?", "What is the Pro plan price?", "price", "en",
                            "knowledge_base", "2025-01-01", "newest", "t-1", "doc-1"])
        broken = rng.choice(["\udcff", "t\udcff", "\udcc3\udca9", "a\x00b", "\ud800", "",
                             " ", "-", "--json", "x" * 5_000, *SPECIAL_TEXT, "\u202e\u200b"])
    if rng.random() < 0.5:
        return plain
    where = rng.randint(0, len(plain))
    return rng.choice([broken, plain[:where] + broken + plain[where:]])


def cli_argv(rng: random.Random, parser: argparse.ArgumentParser) -> list[str]:
    """argv for one of CLI_COMMANDS, built from that command's own actions."""
    names = rng.choice(CLI_COMMANDS)
    sub = _subparser(parser, names)
    argv = list(names)
    positional: list[str] = []
    for action in sub._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        if not action.option_strings:
            if action.nargs != "?" or rng.random() < 0.8:
                positional.append(_cli_value(rng, action))
        elif rng.random() < 0.4:
            flag = rng.choice(action.option_strings)
            if action.nargs == 0:
                argv.append(flag)
            else:
                argv += [flag, _cli_value(rng, action)]
    return [*argv, "--", *positional] if positional else argv


def test_cli_schema_fuzz(fault: Any, fake_store: KnowledgeStore, request: pytest.FixtureRequest,
                         monkeypatch: pytest.MonkeyPatch) -> None:
    count = examples(request)
    row = fault(10, f"schema fuzz: CLI arguments from its parser ({count} command lines)")
    import grounded_agent.graph.agent as agent_module

    monkeypatch.setattr(agent_module, "agent", graph())
    # search and a threaded ask use the default store: this test's table
    monkeypatch.setattr(agent_module.default_deps, "get_store", lambda: fake_store)
    parser = cli.build_parser()
    rng = random.Random(SEED + 200)
    tally: Counter[str] = Counter()
    for i in range(count):
        argv = cli_argv(rng, parser)
        # a real terminal's streams: stdout strict UTF-8, stderr backslashreplace (Python's)
        out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict")
        err = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="backslashreplace")
        with redirect_stdout(out), redirect_stderr(err):
            try:
                code = cli.main(argv)
            except SystemExit as exc:  # argparse's own refusals
                code = int(exc.code or 0)
            out.flush()
            err.flush()
        stdout = out.buffer.getvalue().decode()
        stderr = err.buffer.getvalue().decode()
        where = f"#{i} {argv!r:.300}: exit {code}, stderr {stderr[:300]!r}"
        assert "Traceback" not in stderr + stdout, where
        assert " failed: " not in stderr, where  # the catch-all's 'X failed: SomeError'
        if code == 2 and stderr.startswith("usage:"):
            tally["exit 2 (argparse usage)"] += 1
        elif code == 2:
            assert stderr.startswith("grounded-agent: invalid "), where
            assert len(stderr.splitlines()) == 1, where
            tally["exit 2 (one line)"] += 1
        elif code == 1:
            assert stderr.startswith("grounded-agent: no document with id"), where
            tally["exit 1 (no such document)"] += 1
        else:
            assert code == 0, where
            tally["exit 0"] += 1
    assert sum(tally.values()) == count and tally["exit 0"] > 0, tally
    assert tally["exit 2 (one line)"] > 0, tally
    row.record(saw=", ".join(f"{k} {v}" for k, v in sorted(tally.items())),
               control="the catch-all's 'failed: <Error>' line and any traceback fail the run",
               **{k: v for k, v in sorted(tally.items())})
