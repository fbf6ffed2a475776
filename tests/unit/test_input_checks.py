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
