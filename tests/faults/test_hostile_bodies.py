"""Row 17: request bodies in the wrong encoding on every POST route of the endpoint.

Generated from the classes an outside probe found one member of ({\\x00}\\x00}, a 500): leading
NUL bytes, a NUL anywhere, valid requests encoded as UTF-16 or UTF-32 (either byte order, with
and without a byte order mark), UTF-8 behind a byte order mark of any encoding, Latin-1 text,
random bytes, and random mixes of JSON punctuation and NUL. Python's JSON parser guesses
UTF-16/32 from NUL bytes, so without the check every one of these would be read (or fail) in
the wrong encoding. What must hold: every body of those classes gets 422 `invalid_input` naming
the cause, and no body gets a 5xx other than 503. $GA_BODY_FUZZ sets the bodies per route (300
in the normal suite, 5,000 under --run-heavy).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import random
from collections import Counter
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from grounded_agent import build_graph
from grounded_agent.serve.app import ServeSettings, body_problem, create_app
from grounded_agent.store import KnowledgeStore
from tests.fakes import ScriptedSource, finding, found
from tests.support.serving import serving

pytestmark = pytest.mark.integration

SEED = 46
QUESTION = {"question": "What does the Pro plan cost per month?"}


def examples(request: pytest.FixtureRequest) -> int:
    """Bodies per route: 300, 5,000 under --run-heavy, or $GA_BODY_FUZZ."""
    if os.environ.get("GA_BODY_FUZZ"):
        return int(os.environ["GA_BODY_FUZZ"])
    return 5_000 if request.config.getoption("--run-heavy", default=False) else 300


def valid_request(route: str) -> dict[str, Any]:
    if route == "batch":
        return {"inputs": [QUESTION, {"question": "Wer hat Zugriff? 日本語 😀"}]}
    return {"input": QUESTION, "config": {"configurable": {"top_k": 3}}}


def _utf(codec: str, bom: bool) -> Callable[[str], bytes]:
    def encode(text: str) -> bytes:
        raw = text.encode(codec)
        if bom:
            return ("\ufeff").encode(codec) + raw
        return raw

    return encode


ENCODINGS = {
    "utf-16-le": _utf("utf-16-le", False), "utf-16-be": _utf("utf-16-be", False),
    "utf-16-le+bom": _utf("utf-16-le", True), "utf-16-be+bom": _utf("utf-16-be", True),
    "utf-32-le": _utf("utf-32-le", False), "utf-32-be": _utf("utf-32-be", False),
    "utf-32-le+bom": _utf("utf-32-le", True), "utf-32-be+bom": _utf("utf-32-be", True),
}
BOMS = [b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff", b"\xff\xfe\x00\x00", b"\x00\x00\xfe\xff"]
PUNCTUATION = b'{}[]":,\x00 01ntrufalse'


def hostile_body(rng: random.Random, route: str) -> tuple[str, bytes]:
    """(class, body) of one generated body; every class but `punctuation` must get 422."""
    text = json.dumps(valid_request(route), ensure_ascii=rng.random() < 0.5)
    plain = text.encode("utf-8")
    kind = rng.choice(["leading_nul", "nul_inside", "utf16_32", "bom", "latin1", "random",
                       "punctuation"])
    if kind == "leading_nul":
        return kind, b"\x00" * rng.randint(1, 8) + rng.choice(
            [plain, b"}", b"{\x00}\x00}", bytes(rng.choices(PUNCTUATION, k=rng.randint(0, 12)))])
    if kind == "nul_inside":
        at = rng.randint(1, len(plain) - 1)
        return kind, plain[:at] + b"\x00" * rng.randint(1, 4) + plain[at:]
    if kind == "utf16_32":
        name = rng.choice(sorted(ENCODINGS))
        return f"{kind} {name.split('+')[0][:6]}", ENCODINGS[name](text)
    if kind == "bom":
        return kind, rng.choice(BOMS) + plain
    if kind == "latin1":
        return kind, json.dumps({"input": {"question": "Prix du forfait é à ü ?"}},
                                ensure_ascii=False).encode("latin-1")
    if kind == "random":
        return kind, bytes([0xFF, 0xC0][rng.randint(0, 1)]) + rng.randbytes(rng.randint(0, 200))
    return kind, bytes(rng.choices(PUNCTUATION, k=rng.randint(1, 40)))


def check(kind: str, r: httpx.Response) -> None:
    """No 5xx but 503, no traceback; every class but `punctuation` is a 422 invalid_input."""
    assert r.status_code < 500 or r.status_code == 503, (r.status_code, r.text[:300])
    assert "Traceback" not in r.text
    if kind != "punctuation":
        assert r.status_code == 422, (kind, r.status_code, r.text[:300])
        assert r.json()["error"] == "invalid_input", r.text[:300]


def test_the_body_check_rejects_wrong_answers() -> None:
    """Negative control of `check`: a 500, a 200 to a UTF-16 body, a 502 are all caught."""
    req = httpx.Request("POST", "http://x/agent/invoke")
    for kind, response in (
        ("leading_nul", httpx.Response(500, json={"error": "internal_error"}, request=req)),
        ("utf16_32 utf-16", httpx.Response(200, json={"output": {}}, request=req)),
        ("punctuation", httpx.Response(502, json={"error": "bad_gateway"}, request=req)),
    ):
        with pytest.raises(AssertionError):
            check(kind, response)
    check("punctuation", httpx.Response(503, json={"error": "overloaded"}, request=req))


def test_without_the_check_the_parser_reads_them_in_a_guessed_encoding() -> None:
    """Negative control of the classes: the check before this round (valid UTF-8 only) let
    every UTF-16/32 body and every NUL-led body through, and the JSON parser then reads a
    UTF-16/32 body as the valid request it encodes (a 200 where a 422 is promised)."""
    rng = random.Random(SEED)
    passed_old = guessed = 0
    for _ in range(600):
        kind, body = hostile_body(rng, "invoke")
        if kind in ("latin1", "random", "punctuation", "bom"):
            continue
        try:
            body.decode("utf-8")
            passed_old += 1
        except UnicodeDecodeError:
            continue
        with contextlib.suppress(ValueError):
            guessed += json.loads(body) == valid_request("invoke")
        assert body_problem(body, "invoke") is not None
    assert passed_old > 150 and guessed > 20, (passed_old, guessed)


def post_routes(app: Any) -> list[str]:
    """Every POST route of the app: the agent's LangServe routes and any other."""
    return sorted({r.path for r in app.routes if "POST" in (getattr(r, "methods", None) or ())})


@pytest.fixture
def app(fake_store: KnowledgeStore) -> Any:
    kb = ScriptedSource("knowledge_base", [found("knowledge_base", finding(
        text="The Pro plan costs 49 EUR per user per month.", title="Pricing", score=0.9))])
    graph = build_graph(chat_model=None, tools={"knowledge_base": kb.tool()})
    return create_app(graph, store=fake_store, settings=ServeSettings(), threads=False)


def test_hostile_bodies_on_every_post_route(app: Any, fault: Any,
                                            request: pytest.FixtureRequest,
                                            caplog: pytest.LogCaptureFixture) -> None:
    count = examples(request)
    routes = post_routes(app)
    row = fault(17, f"hostile body encodings on every POST route ({count} bodies each)")
    caplog.set_level(logging.WARNING)
    assert {"/agent/invoke", "/agent/batch", "/agent/stream"} <= set(routes), routes
    per_route: dict[str, Counter[str]] = {}
    per_class: Counter[str] = Counter()
    with serving(app) as base, httpx.Client(base_url=base, timeout=60) as client:
        for n, path in enumerate(routes):
            rng = random.Random(SEED + n)
            tally: Counter[str] = Counter()
            for i in range(count):
                kind, body = hostile_body(rng, path.rpartition("/")[2])
                r = client.post(path, content=body, headers={"content-type": "application/json"})
                try:
                    check(kind, r)
                except AssertionError as exc:
                    raise AssertionError(f"{path} seed {SEED + n} body #{i} ({kind}): "
                                         f"{body[:120]!r}") from exc
                tally[str(r.status_code)] += 1
                per_class[kind.split()[0]] += 1
            per_route[path] = tally
    errors = [r.getMessage()[:200] for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == []
    assert all(sum(t.values()) == count for t in per_route.values())
    row.record(
        saw="; ".join(f"{p}: " + ", ".join(f"{k} {v}" for k, v in sorted(t.items()))
                      for p, t in per_route.items()),
        logged=f"{len(errors)} ERROR records",
        control="check() rejects a 500, a 502 and a 200 to a UTF-16 body; the old check (UTF-8 "
        "only) passes the UTF-16/32 and NUL-led bodies, which the parser reads as requests",
        routes=len(routes), classes=dict(sorted(per_class.items())),
    )
