"""Input the agent refuses before anything runs: text that cannot be encoded or stored (a lone
surrogate, NUL), malformed request bodies, sources that are not names. One clear sentence each."""

from __future__ import annotations

import json

import pytest

from grounded_agent import InvalidQuestion, aask, cli
from grounded_agent.context import parse_sources
from grounded_agent.schemas import validate_language, validate_question
from grounded_agent.serve.app import MAX_JSON_DEPTH, body_problem
from grounded_agent.store.ingest import IngestError, SourceDocument, to_record


@pytest.mark.parametrize(
    ("raw", "needle"),
    [
        ("price \udcff?", "lone surrogate (U+DCFF"),  # invalid UTF-8 on a command line
        ("price \ud800?", "lone surrogate (U+D800"),
        ("a\x00b", "NUL character at character 2"),
    ],
)
def test_the_question_check_refuses_unencodable_text(raw: str, needle: str) -> None:
    with pytest.raises(InvalidQuestion, match=r"^question ") as info:
        validate_question(raw)
    assert needle in str(info.value) and "\n" not in str(info.value)


def test_odd_but_valid_text_passes() -> None:
    for raw in ("مرحبا؟ \u200b price", "\u202eprice", "👩‍💻 Pro plan?", "\ufeffprice"):
        assert validate_question(raw)
    assert validate_language("  ") is None and validate_language("Deutsch") == "Deutsch"
    with pytest.raises(InvalidQuestion, match=r"^language "):
        validate_language("en\ud800")


async def test_the_python_api_refuses_before_any_run() -> None:
    with pytest.raises(InvalidQuestion, match="question"):
        await aask("price \udcff?", graph=object())  # type: ignore[arg-type]


def test_the_cli_exits_2_with_one_line_for_invalid_utf8(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["ask", "--", "what \udcff does it cost?"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("grounded-agent: invalid input: question ")
    assert "query" not in err


def test_sources_that_are_not_names_are_one_sentence() -> None:
    with pytest.raises(ValueError, match="must be a name"):
        parse_sources([1, 2])  # type: ignore[list-item]
    with pytest.raises(ValueError) as info:
        parse_sources("web,intra\nnet")
    assert "\n" not in str(info.value) and "'intra\\nnet'" in str(info.value)


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        (b"[" * 10_000 + b"]" * 10_000, f"deeper than {MAX_JSON_DEPTH}"),
        (b'{"input": {"question": "\xff\xfe"}}', "not valid UTF-8"),
        (b'{"input": {"question": "a\\ud800"}}', "input.question is not valid Unicode"),
        (b'{"inputs": [{"question": "q", "sources": ["\\udfff"]}]}', "inputs.0.sources.0"),
        (b'{"input": {"\\ud800": 1}}', "a field name in input"),
    ],
)
def test_malformed_bodies_are_named_before_parsing(body: bytes, needle: str) -> None:
    problem = body_problem(body)
    assert problem is not None and needle in problem


def test_well_formed_bodies_pass_the_body_check() -> None:
    nested_in_a_string = json.dumps({"input": {"question": "[" * 100 + " \\ud800"}}).encode()
    for body in (b'{"input": {"question": "What does it cost?"}}', b"{nope", nested_in_a_string,
                 json.dumps({"input": {"question": "😀 \u202e"}}).encode()):
        assert body_problem(body) is None, body


def test_a_document_with_nul_is_refused_before_embedding() -> None:
    doc = SourceDocument(doc_id="d", title="T", text="A NUL \x00 here.", origin="d.md")
    with pytest.raises(IngestError, match="text holds a NUL character"):
        to_record(doc)
    meta = SourceDocument(doc_id="d", title="T", text="Fine.", origin="d.jsonl",
                          extra={"note": "x\ud800"})
    with pytest.raises(IngestError, match=r"metadata\.note is not valid Unicode"):
        to_record(meta)


@pytest.mark.parametrize(
    ("route", "body", "needle"),
    [
        ("invoke", b'{"input": {"question": "q?"}, "config": null}', "config must be an object"),
        ("stream", b'{"input": {"question": "q?"}, "config": []}', "config must be an object"),
        ("stream_log", b'{"input": {"question": "q?"}, "config": 5}', "config must be an object"),
        ("invoke", b'{"input": {"question": "q?", "x": ' + b"9" * 4_301 + b"}}", "4300 digits"),
        ("batch", b'{"inputs": [{"question": "q?"}], "n": -' + b"1" * 5_000 + b"}", "4300 digits"),
        ("batch", b'{"inputs": 3}', "inputs must be a list of inputs, not a number"),
        ("batch", b'{"inputs": true}', "not a boolean"),
        ("batch", b'{"inputs": null}', "not null"),
        ("batch", b'{"inputs": [{"question": "q?"}], "config": null}', "config must be an object"),
        ("batch", b'{"inputs": [{"question": "q?"}], "config": [null]}', "one per input"),
        ("invoke", b'{"input": {"search": {"text": "a\\u0000b"}}}', "input.search.text holds a NUL"),
        ("invoke", b'[{"input": {"question": "q?"}}]', "must be a JSON object, not a list"),
        ("stream", b'"q?"', "must be a JSON object, not a string"),
    ],
)
def test_envelopes_langserve_would_fail_on_are_named(route: str, body: bytes, needle: str) -> None:
    """The four causes of the 500s found by hand (config null, a 4,301-digit integer, batch
    inputs not a list, NUL in a page request's text), and their neighbours."""
    problem = body_problem(body, route)
    assert problem is not None and needle in problem, problem


def test_well_formed_envelopes_pass() -> None:
    for route, body in (
        ("invoke", b'{"input": {"question": "q?"}, "config": {}, "n": ' + b"9" * 4_300 + b"}"),
        ("batch", b'{"inputs": [], "config": [{}]}'),
        ("batch", b'{"inputs": [{"question": "q?"}], "config": {"configurable": {}}}'),
        ("stream_log", b'{"input": {"question": "q?"}}'),
        ("input_schema", b"null"),  # not a run route: LangServe's own rules
    ):
        assert body_problem(body, route) is None, body


def test_search_text_that_cannot_be_stored_is_refused() -> None:
    from grounded_agent.documents import parse_query

    for text, needle in (("a\x00b", "text holds a NUL character at character 2"),
                         ("a\udcffb", "text is not valid Unicode text")):
        with pytest.raises(InvalidQuestion, match=needle):
            parse_query({"text": text})


async def test_the_python_search_raises_invalid_question_not_a_database_error() -> None:
    from grounded_agent import asearch

    with pytest.raises(InvalidQuestion, match="NUL"):
        await asearch("price\x00list", store=object())  # type: ignore[arg-type]
    with pytest.raises(InvalidQuestion, match="thread_id is not valid Unicode"):
        await aask("What does it cost?", thread_id="t\udcff", graph=object())  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "argv",
    [
        ["ask", "--thread", "t\udcff", "--", "What does it cost?"],  # $'t\xff' in a shell
        ["ask", "--thread", "t\x00", "--", "What does it cost?"],
        ["docs", "show", "\udcff"],
        ["docs", "remove", "doc\udcfe"],
    ],
)
def test_invalid_utf8_in_ids_exits_2_with_one_line(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("grounded-agent: invalid input: ")
    assert "Error" not in err and ("thread_id" in err or "document id" in err)


def test_time_limits_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """A slow local model needs longer limits in the CLI and the server too, which take no
    Context from their caller; an explicit Context value still wins."""
    from grounded_agent.context import Context

    monkeypatch.setenv("GROUNDED_AGENT_TIME_BUDGET_S", "300")
    monkeypatch.setenv("GROUNDED_AGENT_MODEL_TIMEOUT_S", "120.5")
    ctx = Context()
    assert (ctx.time_budget_s, ctx.model_timeout_s) == (300.0, 120.5)
    assert Context(model_timeout_s=5).model_timeout_s == 5
    monkeypatch.delenv("GROUNDED_AGENT_TIME_BUDGET_S")
    monkeypatch.delenv("GROUNDED_AGENT_MODEL_TIMEOUT_S")
    assert (Context().time_budget_s, Context().model_timeout_s) == (45.0, 20.0)


@pytest.mark.parametrize(
    ("value", "needle"),
    [("soon", "GROUNDED_AGENT_MODEL_TIMEOUT_S must be a number of seconds, not 'soon'"),
     ("0", "model_timeout_s must be above 0"), ("nan", "model_timeout_s must be above 0")],
)
def test_a_bad_time_limit_in_the_environment_is_one_sentence(
    monkeypatch: pytest.MonkeyPatch, value: str, needle: str
) -> None:
    from grounded_agent.context import Context

    monkeypatch.setenv("GROUNDED_AGENT_MODEL_TIMEOUT_S", value)
    with pytest.raises(ValueError, match="^" + needle):
        Context()
