"""Row 10: generated hostile input through the Python API, the CLI (in-process `cli.main`) and the
endpoint: NUL bytes, lone surrogates, RTL and zero-width characters, a megabyte of emoji, huge
and deeply nested JSON, invalid UTF-8, wrong types, unknown fields.

What must hold for every input: no server error and no traceback reaches the user; a refusal
is a clear 4xx (endpoint), InvalidQuestion (API) or one line with exit 2 (CLI); a refused request
writes nothing to the database. $GA_FUZZ_EXAMPLES sets the number of inputs per entry point
(100 in the normal suite; `make faults` runs 1,000)."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import os
import uuid
from collections import Counter
from contextlib import redirect_stderr, redirect_stdout
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grounded_agent import InvalidQuestion, aask, build_graph, cli
from grounded_agent.serve.app import ServeSettings, create_app
from grounded_agent.store import KnowledgeStore
from tests.fakes import ScriptedSource, finding, found
from tests.support.serving import serving

EXAMPLES = int(os.environ.get("GA_FUZZ_EXAMPLES", "100"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                           HealthCheck.data_too_large, HealthCheck.large_base_example],
)
PRO = "The Pro plan costs 49 EUR per user per month."

SPECIAL = ["\x00", "\ud800", "\udfff", "\udcff", "\u202e", "\u200f", "\u200b", "\u200d", "\ufeff",
           "\u2066", "مرحبا", "שלום", "😀", "👩‍💻", "\n", "\t", "\x1b[31m", "'; DROP TABLE x; --",
           "{{question}}", "</sources>", "[1]", "\\", '"']
any_char = st.characters(exclude_categories=[])  # surrogates and controls included
valid_char = st.characters(exclude_categories=["Cs"], exclude_characters=["\x00"])
RTL_ZW = ["\u202e", "\u200f", "\u200b", "\u200d", "\ufeff", "\u2066", "مرحبا", "שלום", "😀",
          "👩‍💻", " Pro plan ", " price? "]
hostile_text = st.one_of(
    st.text(any_char, max_size=60),  # anything, surrogates and NUL included
    st.text(valid_char, min_size=1, max_size=80),  # odd but valid text: it must be answered
    st.lists(st.sampled_from(RTL_ZW), min_size=1, max_size=10).map("".join),
    st.lists(st.sampled_from(SPECIAL) | st.text(any_char, max_size=5), max_size=12).map("".join),
    st.sampled_from(["😀" * 262_144, "x" * 4_001, "a" * 4_000, " " * 100, ""]),
)
wrong_type = st.one_of(st.none(), st.integers(), st.floats(allow_nan=True), st.booleans(),
                       st.lists(st.integers(), max_size=3), st.dictionaries(st.text(max_size=3),
                                                                             st.integers(),
                                                                             max_size=2))
question = st.one_of(hostile_text, hostile_text, wrong_type)
sources = st.one_of(st.none(), st.lists(st.sampled_from(
    ["knowledge_base", "wikipedia", "web", "", "intranet", "\ud800", "KNOWLEDGE_BASE"]),
    max_size=4), st.text(any_char, max_size=10), st.lists(wrong_type, max_size=2))
language = st.one_of(st.none(), hostile_text)
valid_question = st.one_of(
    st.text(valid_char, min_size=1, max_size=80),
    st.lists(st.sampled_from(RTL_ZW), min_size=1, max_size=10).map("".join),
).filter(lambda q: bool(q.strip()))
valid_sources = st.one_of(st.none(), st.lists(
    st.sampled_from(["knowledge_base"]), min_size=1, max_size=2))
valid_language = st.one_of(st.none(), st.sampled_from(["English", "de", "עברית", "日本語"]))
arguments = st.one_of(  # (question, sources, language): hostile, or odd but valid
    st.tuples(question, sources, language),
    st.tuples(valid_question, valid_sources, valid_language),
)


def graph() -> Any:
    kb = ScriptedSource("knowledge_base",
                        [found("knowledge_base", finding(text=PRO, title="Pricing", score=0.9))])
    return build_graph(chat_model=None, tools={"knowledge_base": kb.tool()})


def record(row: Any, tally: Counter[str], **extra: Any) -> None:
    total = sum(tally.values())
    row.record(saw=", ".join(f"{k} {v}" for k, v in sorted(tally.items())),
               inputs=total, **extra)


# --- the Python API ---------------------------------------------------------------------------


def test_python_api(fault: Any) -> None:
    row = fault(10, f"fuzz: Python API ({EXAMPLES} inputs)")
    tally: Counter[str] = Counter()
    g = graph()

    @FUZZ
    @given(args=arguments)
    def run(args: tuple[Any, Any, Any]) -> None:
        q, s, lang = args
        try:
            result = asyncio.run(aask(q, sources=s, language=lang, graph=g))
        except InvalidQuestion as exc:
            message = str(exc)
            assert message and "\n" not in message and "Traceback" not in message
            tally["InvalidQuestion"] += 1
            return
        # accepted: a valid result whose text can be encoded and stored
        dumped = result.model_dump_json()
        dumped.encode("utf-8")
        assert "\x00" not in result.question
        tally[f"accepted ({result.status})"] += 1

    run()
    assert sum(tally.values()) >= EXAMPLES
    record(row, tally, control="an unexpected exception fails the run (no catch-all)")


# --- the CLI, in-process ----------------------------------------------------------------------


def test_cli(fault: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    row = fault(10, f"fuzz: CLI, cli.main in-process ({EXAMPLES} inputs)")
    import grounded_agent.graph.agent as agent_module

    monkeypatch.setattr(agent_module, "agent", graph())
    tally: Counter[str] = Counter()

    @FUZZ
    @given(q=hostile_text, s=st.one_of(st.none(), st.text(any_char, max_size=20)),
           lang=st.one_of(st.none(), st.text(any_char, max_size=10)))
    def run(q: str, s: str | None, lang: str | None) -> None:
        argv = ["ask", "--json"]
        if s is not None:
            argv += ["--sources", s]
        if lang is not None:
            argv += ["--language", lang]
        out, err = io.StringIO(), io.StringIO()
        with redirect_stdout(out), redirect_stderr(err):
            try:
                code = cli.main([*argv, "--", q])
            except SystemExit as exc:  # argparse's own refusals
                code = int(exc.code or 0)
        stderr = err.getvalue()
        assert "Traceback" not in stderr and "Traceback" not in out.getvalue()
        assert code in (0, 2), (code, stderr)
        if code == 2 and stderr.startswith("usage:"):  # argparse: an option without its value
            tally["exit 2, argparse usage"] += 1
        elif code == 2:
            assert len(stderr.splitlines()) == 1, stderr
            assert stderr.startswith("grounded-agent: invalid input:"), stderr
            tally["exit 2, one line"] += 1
        else:
            assert json.loads(out.getvalue())["status"]
            tally["exit 0"] += 1

    run()
    assert sum(tally.values()) >= EXAMPLES
    record(row, tally)


# --- the endpoint -----------------------------------------------------------------------------


def _bodies() -> st.SearchStrategy[tuple[str, bytes | Any]]:
    """(endpoint, body): a JSON value to send, or raw bytes."""
    inp = st.one_of(
        st.fixed_dictionaries({"question": question},
                              optional={"sources": sources, "language": language}),
        st.fixed_dictionaries({"question": valid_question},
                              optional={"sources": valid_sources, "language": valid_language}),
        st.fixed_dictionaries({"question": hostile_text, "extra_field": st.integers()}),
        st.fixed_dictionaries({"question": hostile_text, "\ud800": st.integers()}),
    )
    configurable = st.dictionaries(
        st.sampled_from(["top_k", "found_threshold", "model", "answer_system_prompt",
                         "max_attempts", "wikipedia_language", "\ud800"]),
        st.one_of(wrong_type, hostile_text), max_size=3)
    good = st.one_of(
        st.fixed_dictionaries({"input": inp}),
        st.fixed_dictionaries({"input": inp, "config": st.fixed_dictionaries(
            {"configurable": configurable})}),
        st.fixed_dictionaries({"input": inp, "kwargs": wrong_type}),
    )
    batch = st.fixed_dictionaries({"inputs": st.lists(inp, max_size=3)})
    raw = st.one_of(
        st.binary(max_size=200),
        st.integers(1, 20_000).map(lambda n: b"[" * n + b"]" * n),
        st.integers(1, 5_000).map(lambda n: b'{"input": ' * n + b"1" + b"}" * n),
        st.just(b'{"input": {"question": "\xff\xfe price?"}}'),
        st.just(json.dumps({"input": {"question": "x" * 70_000}}).encode()),
        st.just(b'{"input": {"question": "a\\ud800b"}}'),
        st.just(b'{"input": {"question": "\\u0000"}}'),
    )
    which = st.sampled_from(["invoke", "stream", "batch"])
    return st.one_of(
        st.tuples(which, good), st.tuples(which, good), st.tuples(st.just("batch"), batch),
        st.tuples(which, raw), st.tuples(which, wrong_type),
    )


def check_response(endpoint: str, r: httpx.Response) -> None:
    """What every fuzzed request must get: no 5xx, no traceback, a refusal as a JSON error."""
    assert r.status_code < 500, (r.status_code, r.text[:300])
    assert "Traceback" not in r.text and 'File "' not in r.text
    if r.status_code >= 400:
        assert r.json()["error"], r.text
    elif endpoint == "stream":
        assert "event: error" not in r.text, r.text[-300:]


def test_the_endpoint_check_rejects_server_errors() -> None:
    """Negative control of the endpoint fuzz: a 500, a traceback or a stream's error event."""
    req = httpx.Request("POST", "http://x/agent/invoke")
    bad = [
        ("invoke", httpx.Response(500, json={"error": "internal_error"}, request=req)),
        ("invoke", httpx.Response(422, text="Traceback (most recent call last):", request=req)),
        ("stream", httpx.Response(200, text='event: error\ndata: {"status_code": 500}',
                                  request=req)),
    ]
    for endpoint, response in bad:
        with pytest.raises(AssertionError):
            check_response(endpoint, response)
    check_response("invoke", httpx.Response(422, json={"error": "invalid_input"}, request=req))


async def _checkpointed(store: KnowledgeStore, prefix: str) -> set[str]:
    import psycopg

    url = await asyncio.to_thread(store.database_url)
    async with await psycopg.AsyncConnection.connect(url) as conn:
        exists = await conn.execute("SELECT to_regclass('checkpoints') IS NOT NULL")
        row = await exists.fetchone()
        if not row or not row[0]:
            return set()
        cur = await conn.execute(
            "SELECT DISTINCT thread_id FROM checkpoints WHERE thread_id LIKE %s", (f"{prefix}%",)
        )
        return {r[0] for r in await cur.fetchall()}


@pytest.mark.integration
async def test_endpoint(fault: Any, fake_store: KnowledgeStore,
                        caplog: pytest.LogCaptureFixture) -> None:
    row = fault(10, f"fuzz: endpoint invoke/stream/batch ({EXAMPLES} inputs)")
    caplog.set_level(logging.WARNING)
    prefix = f"fuzz-{uuid.uuid4().hex[:6]}-"
    app = create_app(graph(), store=fake_store, settings=ServeSettings(), threads=True)
    tally: Counter[str] = Counter()
    refused: set[str] = set()
    accepted: set[str] = set()
    with serving(app) as base, httpx.Client(base_url=base, timeout=60) as client:

        @FUZZ
        @given(case=_bodies())
        def run(case: tuple[str, Any]) -> None:
            endpoint, body = case
            thread = f"{prefix}{uuid.uuid4().hex[:8]}"
            if isinstance(body, dict) and "input" in body:
                config = body.setdefault("config", {})
                if isinstance(config, dict):
                    configurable = config.setdefault("configurable", {})
                    if isinstance(configurable, dict):
                        configurable["thread_id"] = thread
            if isinstance(body, bytes):
                content = body
            else:
                content = json.dumps(body, ensure_ascii=True).encode()
            r = client.post(f"/agent/{endpoint}", content=content,
                            headers={"content-type": "application/json"})
            check_response(endpoint, r)
            if r.status_code >= 400:
                refused.add(thread)
            else:
                accepted.add(thread)
            tally[f"{r.status_code}"] += 1

        run()
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == [], [r.getMessage()[:200] for r in errors]
    written = await _checkpointed(fake_store, prefix)
    assert written & refused == set()  # a refused request wrote nothing
    assert sum(tally.values()) >= EXAMPLES
    record(row, tally, logged=f"{len(errors)} ERROR records",
           control=f"check_response rejects a 500, a traceback, an error event; "
           f"{len(written & accepted)} accepted threads checkpointed, "
           f"{len(written & refused)} refused ones")
