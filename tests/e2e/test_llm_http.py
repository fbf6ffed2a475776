"""LLM mode over real HTTP, as a user with a local model server runs it: the model double
(tests/support/openai_double.py) on a loopback port, OPENAI_BASE_URL pointing at it, and the
sample knowledge base ingested by the real CLI. The entry points are the CLI, the Python API, the
LangServe endpoint and `langgraph dev`.

What is asserted: statuses and citations for a cooperative model; that each citation style of
the answer reaches the user with every marker on the sentence it closed; that the confidence step
works whatever structured output the server supports; and that 429, 5xx, malformed bodies,
invalid tool arguments and latency lead to what the code documents: the step falls back (fixed
routing, the local scorer, an extractive answer) with a `model_unavailable` warning, the failed
call counts against the cap, and the outcome is the offline one, never an error.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from grounded_agent import aask, build_graph
from grounded_agent.cli import parse_demo_questions
from grounded_agent.context import Context
from grounded_agent.deps import MAX_MODEL_CALLS
from grounded_agent.llm.structured import forget_methods
from grounded_agent.prompts.answer import ANSWER_SYSTEM, ANSWER_USER, JUDGED_ANSWER_SYSTEM
from grounded_agent.prompts.sources import render_sources
from grounded_agent.sample import SAMPLE_QUESTIONS
from grounded_agent.schemas import AgentResult, Finding
from grounded_agent.store import KnowledgeStore, StoreSettings, open_store
from grounded_agent.tools.base import SourceTool
from grounded_agent.tools.knowledge_base import make_knowledge_base_tool
from tests.conftest import squad_path
from tests.e2e.conftest import ROOT, child_env, free_port, stop_group
from tests.support.openai_double import STYLES, Behaviour, Fault, ModelDouble, Oracle

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

QUESTION = "How much does the Pro plan cost per user per month?"
JUDGE_CANDIDATES = (
    "How long is the initial term of the Bluefin Health agreement?",
    "Which payment methods does Lumenary accept?",
    "When does the Southwind Logistics agreement end?",
    "What is the annual fee in the Contoso Retail contract?",
    "What is included in Enterprise support?",
    "Does Lumenary offer a free trial of the Pro plan?",
)
"""Questions whose evidence the local signals may leave undecided, so the draft call judges the
confidence; which ones do depends on the scoring of the day, so the `judged` fixture picks one."""
DEMO_QUESTIONS = [
    q for _, q, sources in parse_demo_questions(SAMPLE_QUESTIONS.read_text())
    if not sources
]
ANSWERED = ("answered", "answered_with_caveat")
LANGGRAPH = Path(os.environ.get("VIRTUAL_ENV") or ROOT / ".venv") / "bin" / "langgraph"
GROUNDED_AGENT = Path(sys.executable).parent / "grounded-agent"


# --- fixtures -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[ModelDouble, str]]:
    """The double on a free loopback port for the whole module; each test sets its behaviour."""
    double = ModelDouble()
    with double.serve() as base_url:
        yield double, base_url


@pytest.fixture
def double(served: tuple[ModelDouble, str]) -> Iterator[ModelDouble]:
    served[0].configure()  # defaults, empty log
    forget_methods()  # the structured-output method learnt for this URL by an earlier test
    yield served[0]
    forget_methods()


@pytest.fixture
def base_url(served: tuple[ModelDouble, str]) -> str:
    return served[1]


@pytest.fixture
def llm_env(base_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """LLM mode in this process, as a user's shell would set it."""
    monkeypatch.setenv("OPENAI_BASE_URL", base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "test")


@pytest.fixture(scope="module")
async def store(ingested_home: Path) -> AsyncIterator[KnowledgeStore]:
    settings = StoreSettings(
        home=ingested_home, database_url=None, embeddings="local", table_name=None
    )
    kb = open_store(settings)
    await kb.asearch("warm up", k=1)
    yield kb
    await kb.aclose()


@pytest.fixture(scope="module")
def graph(store: KnowledgeStore) -> Any:
    """The graph as `grounded_agent.agent` builds it: ChatOpenAI from the environment per run."""
    return build_graph(store=store)


@pytest.fixture(scope="module")
def offline_graph(store: KnowledgeStore) -> Any:
    return build_graph(chat_model=None, store=store)


@pytest.fixture(scope="module")
async def judged(graph: Any, served: tuple[ModelDouble, str]) -> str:
    """A sample question on which the agent asks the model for its confidence judgement."""
    double, base_url = served
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OPENAI_BASE_URL", base_url)
        mp.setenv("OPENAI_API_KEY", "test")
        for question in JUDGE_CANDIDATES:
            double.configure()
            await ask(graph, question)
            if "judged_answer" in double.steps():
                return question
    pytest.skip("no sample question reaches the model's confidence step with today's scoring")


def llm_child_env(home: Path, base_url: str) -> dict[str, str]:
    return {**child_env(home), "OPENAI_BASE_URL": base_url, "OPENAI_API_KEY": "test"}


async def ask(graph: Any, question: str = QUESTION, **context: Any) -> AgentResult:
    return await aask(question, graph=graph, context=Context(sources=["knowledge_base"], **context))


def warnings_of(result: AgentResult | dict[str, Any], kind: str) -> list[str]:
    items = result.warnings if isinstance(result, AgentResult) else result["warnings"]
    return [
        (w.detail if not isinstance(w, dict) else w["detail"])
        for w in items
        if (w.kind if not isinstance(w, dict) else w["kind"]) == kind
    ]


_GROUP = re.compile(r"\s*[.!?]?\s*((?:\[\d{1,3}(?:\s*[,\-–]\s*\d{1,3})*\]\s*)+)")


def attached_markers(answer: str, sentence: str) -> list[int] | None:
    """The marker numbers that close `sentence` in the final answer (None: the sentence is gone).

    The sentence is found by its words without its final punctuation; the markers are the groups
    right after it, before or after a full stop."""
    core = re.sub(r"[.!?][\"')\]]*$", "", sentence.strip())
    flat = " ".join(answer.split())
    at = flat.find(core)
    if at < 0:
        return None
    m = _GROUP.match(flat, at + len(core))
    if m is None:
        return []
    numbers: list[int] = []
    for group in re.findall(r"\[([^\]]*)\]", m.group(1)):
        for part in re.split(r"\s*,\s*", group):
            lo, _, hi = part.partition("-")
            numbers.extend(range(int(lo), int(hi or lo) + 1))
    return numbers


def assert_each_marker_on_its_sentence(result: AgentResult, draft: dict[str, Any]) -> None:
    """Every sentence of the model's draft reached the user, closed by markers that name the
    sources the model cited for it (compared by title and section: the numbers change). A quote
    keeps the markers of the passages it quotes: the double's second marker on a multi-marker
    style names a passage that does not state the sentence, and is dropped."""
    sources = {s["n"]: (s["title"], s["section"] or None) for s in draft["sources"]}
    cited = {c.n: (c.title, c.section) for c in result.citations}
    for item in draft["items"]:
        got = attached_markers(result.answer, item["sentence"])
        assert got, f"sentence lost: {item['sentence']!r} in {result.answer!r}"
        expected = {sources[n] for n in item["markers"]}
        assert {cited[n] for n in got} <= expected, (item, result.answer)


# --- the Python API -----------------------------------------------------------------------------


@pytest.mark.usefixtures("llm_env")
async def test_a_cooperative_model_answers_with_its_citation(
    graph: Any, double: ModelDouble
) -> None:
    result = await ask(graph, choose_one_source=True)  # the model asked to choose
    assert result.status == "answered"
    assert result.citations[0].source_id == "lumenary-pricing"
    assert "29 euros" in result.answer
    assert result.warnings == []
    # the model chose the search (with the question), the local signals decided, the model wrote
    assert double.steps() == ["call_tools", "answer"]
    assert [r["question"] for r in double.requests] == [QUESTION, QUESTION]
    # the allow-list offered: the source asked for, and the two document tools (issue 11)
    assert double.requests[0]["tools"] == ["knowledge_base", "search_documents", "search_and_ask"]
    assert result.usage.llm_calls == 2 and result.usage.input_tokens > 0


PARAPHRASE = "Each person on Pro is billed 29 euros a month when paying monthly."


@pytest.mark.parametrize("judge", ["all", "quotes", "none"])
@pytest.mark.usefixtures("llm_env")
async def test_a_paraphrase_goes_to_the_support_judge(
    graph: Any, double: ModelDouble, judge: str
) -> None:
    double.configure(answer_text=f"{PARAPHRASE[:-1]} [1].", support_judge=judge)
    result = await ask(graph)
    assert double.steps() == ["answer", "check_support"]
    assert result.usage.llm_calls == 2 and result.citations
    # the judge's prompt names no question; the double files it under the answer it checks
    assert [r["question"] for r in double.requests] == [QUESTION] * 2
    assert result.citations[0].source_id == "lumenary-pricing"
    if judge == "all":  # confirmed: the model's own sentence reaches the user, no warning
        assert attached_markers(result.answer, PARAPHRASE) == [1]
        assert warnings_of(result, "unsupported_sentence") == []
        assert any(t.decision == "support_judged" for t in result.trail)
    else:  # not confirmed (not a quote): removed, and the sources are quoted instead
        assert attached_markers(result.answer, PARAPHRASE) is None
        assert "29 euros" in result.answer
        assert warnings_of(result, "unsupported_sentence")


@pytest.mark.parametrize("judge", ["quotes", "all"])
@pytest.mark.usefixtures("llm_env")
async def test_a_sentence_close_to_a_quote_is_judged_too(
    graph: Any, double: ModelDouble, judge: str
) -> None:
    """"... paid by card" adds a detail the price list lacks; no quote, so the model judges it:
    refuted, it goes."""
    added = "The Pro plan costs 29 euros per user per month on monthly billing, paid by card."
    double.configure(answer_text=f"{added[:-1]} [1].", support_judge=judge)
    result = await ask(graph)
    assert double.steps() == ["answer", "check_support"]
    if judge == "all":
        assert attached_markers(result.answer, added) == [1]
    else:
        assert attached_markers(result.answer, added) is None
        assert warnings_of(result, "unsupported_sentence")


@pytest.mark.usefixtures("llm_env")
async def test_a_quoting_model_is_not_judged(graph: Any, double: ModelDouble) -> None:
    result = await ask(graph)
    assert "check_support" not in double.steps() and result.usage.llm_calls == 1


@pytest.mark.parametrize(
    ("supports", "last_kind"), [(("json_schema",), "json_schema"), ((), "text")],
    ids=["json_schema_only", "text_only"],
)
@pytest.mark.usefixtures("llm_env")
async def test_the_support_judgement_works_on_every_kind_of_server(
    graph: Any, double: ModelDouble, supports: tuple[str, ...], last_kind: str
) -> None:
    """The judgement is a structured call like the confidence step's: a server without tools
    (or without json_schema) answers it in the form it supports."""
    double.configure(answer_text=f"{PARAPHRASE[:-1]} [1].", support_judge="all", supports=supports)
    result = await ask(graph)
    kinds = [r["kind"] for r in double.requests if r["step"] == "check_support"]
    assert kinds and kinds[-1] == last_kind
    assert attached_markers(result.answer, PARAPHRASE) == [1]
    assert result.usage.llm_calls == len(double.requests) <= MAX_MODEL_CALLS


@pytest.mark.usefixtures("llm_env")
async def test_a_judge_cannot_confirm_a_figure_the_source_does_not_state(
    graph: Any, double: ModelDouble
) -> None:
    changed = PARAPHRASE.replace("29", "27")
    double.configure(answer_text=f"{changed[:-1]} [1].", support_judge="all")
    result = await ask(graph)
    assert "check_support" in double.steps()
    assert "27 euros" not in result.answer and warnings_of(result, "unsupported_sentence")


@pytest.mark.usefixtures("llm_env")
async def test_a_failing_support_judge_leaves_the_sentence_removed(
    graph: Any, double: ModelDouble
) -> None:
    double.configure(
        answer_text=f"{PARAPHRASE[:-1]} [1].", support_judge="all",
        faults=[{"status": 503, "step": "check_support"}],
    )
    result = await ask(graph)
    assert attached_markers(result.answer, PARAPHRASE) is None
    assert any(t.decision == "support_not_judged" for t in result.trail)
    assert result.status in ANSWERED  # the sources are quoted instead: no answer is lost
    # the user learns that the check ran without the model, and nothing technical
    [told] = warnings_of(result, "model_unavailable")
    assert "support check" in told and "503" not in told


@pytest.mark.usefixtures("llm_env")
async def test_a_spent_model_budget_leaves_the_quote_check_and_says_so(
    graph: Any, double: ModelDouble
) -> None:
    double.configure(answer_text=f"{PARAPHRASE[:-1]} [1].", support_judge="all")
    result = await ask(graph, max_model_calls=1)  # the answer spends it
    assert "check_support" not in double.steps() and result.usage.llm_calls == 1
    assert attached_markers(result.answer, PARAPHRASE) is None
    assert any("by quote only" in w for w in warnings_of(result, "budget_exhausted"))


@pytest.mark.usefixtures("llm_env")
async def test_the_support_judge_can_be_turned_off(graph: Any, double: ModelDouble) -> None:
    double.configure(answer_text=f"{PARAPHRASE[:-1]} [1].", support_judge="all")
    result = await ask(graph, judge_support=False)
    assert "check_support" not in double.steps()
    assert attached_markers(result.answer, PARAPHRASE) is None
    assert any("checked by quote only" in w for w in warnings_of(result, "unsupported_sentence"))


@pytest.mark.usefixtures("llm_env")
async def test_the_model_judges_confidence_over_the_wire(
    graph: Any, double: ModelDouble, judged: str
) -> None:
    result = await ask(graph, judged)
    assert "judged_answer" in double.steps() and "answer" not in double.steps()  # one call
    assert any(t.node == "draft_answer" and t.decision == "HIGH (model)" for t in result.trail)
    assert result.status in ANSWERED and result.citations
    assert result.usage.llm_calls == len(double.requests) <= MAX_MODEL_CALLS


@pytest.mark.parametrize("second_sentence", [False, True], ids=["one_sentence", "two_sentences"])
@pytest.mark.parametrize("style", STYLES)
@pytest.mark.usefixtures("llm_env")
async def test_each_citation_style_reaches_the_user(
    graph: Any, double: ModelDouble, style: str, second_sentence: bool
) -> None:
    double.configure(style=style, extra_sentence=second_sentence)
    result = await ask(graph)
    (draft,) = double.answers
    assert result.status == "answered", (draft["draft"], result.answer, result.warnings)
    assert_each_marker_on_its_sentence(result, draft)
    assert "Sources:" not in result.answer
    if style != "bullets":  # its introduction line is no claim, and may be reported as removed
        assert warnings_of(result, "unsupported_sentence") == [], draft["draft"]
    # a quote is checked in code alone; a sentence that is no longer one is judged by the model
    assert ("check_support" in double.steps()) == (style == "paraphrase")


@pytest.mark.parametrize(
    ("settings", "expected_tried"),
    [
        ({"supports": ("json_schema",)}, ["tools", "json_schema"]),
        ({"supports": ()}, ["tools", "json_schema", "text"]),
        ({"supports": (), "refuse_unsupported": False, "structured": "fenced"}, ["tools"]),
        ({"supports": (), "refuse_unsupported": False}, ["tools", "text"]),
    ],
    ids=["json_schema_only", "text_only_refusing", "text_only_fenced", "text_only_ignoring"],
)
@pytest.mark.usefixtures("llm_env")
async def test_the_confidence_step_works_on_every_kind_of_server(
    graph: Any, double: ModelDouble, judged: str, settings: dict[str, Any],
    expected_tried: list[str],
) -> None:
    double.configure(**settings)
    result = await ask(graph, judged)
    judged = [r["kind"] for r in double.requests if r["step"] == "judged_answer"]
    assert judged == expected_tried
    assert result.confidence.level == "HIGH"
    assert result.status in ANSWERED
    assert result.usage.llm_calls == len(double.requests) <= MAX_MODEL_CALLS


@pytest.mark.usefixtures("llm_env")
async def test_unreadable_judgements_stay_within_the_call_cap(
    graph: Any, double: ModelDouble, judged: str
) -> None:
    double.configure(structured="prose")
    result = await ask(graph, judged)
    assert result.usage.llm_calls == len(double.requests) <= MAX_MODEL_CALLS
    assert double.steps().count("judged_answer") >= 2
    assert result.status != "unavailable"


@pytest.mark.usefixtures("llm_env")
async def test_invalid_tool_arguments_are_rejected_and_the_source_still_searched(
    graph: Any, double: ModelDouble
) -> None:
    double.configure(invalid_tool_args=("call_tools",))
    result = await ask(graph, choose_one_source=True)  # the model chooses the one search
    assert any("invalid arguments for knowledge_base" in w for w in warnings_of(result, "rejected_tool_call"))
    assert result.status == "answered" and result.citations[0].source_id == "lumenary-pricing"


@pytest.mark.usefixtures("llm_env")
async def test_tool_arguments_that_are_not_json_fall_back_to_fixed_routing(
    graph: Any, double: ModelDouble
) -> None:
    double.configure(broken_tool_json=("call_tools",))
    result = await ask(graph)
    assert result.sources[0].status == "found"
    assert result.status == "answered" and result.citations[0].source_id == "lumenary-pricing"


STEP_LIMITS = {"call_tools": ("judgement_max_tokens",),
               "check_support": ("judgement_max_tokens",),
               "reformulate_query": ("rewrite_max_tokens",), "condense": ("rewrite_max_tokens",),
               "answer": ("answer_max_tokens",),
               "judged_answer": ("answer_max_tokens", "judgement_max_tokens")}
"""The limit of each step: the sum of these settings (a judged draft writes both)."""


@pytest.mark.usefixtures("llm_env")
async def test_every_request_carries_its_steps_token_limit_and_no_null_content(
    graph: Any, double: ModelDouble, judged: str
) -> None:
    """Per step `max_tokens` (the name local servers read, not `max_completion_tokens`), and no
    `"content": null` in the assistant turn that carries the tool calls (llama-cpp-python answers
    that with a 500)."""
    ctx = Context(sources=["knowledge_base"])
    result = await ask(graph, judged)
    assert result.status in ANSWERED
    steps = double.steps()
    assert "judged_answer" in steps
    for request in double.requests:
        limit = sum(getattr(ctx, name) for name in STEP_LIMITS[request["step"]])
        assert request["max_tokens"] == limit, request
        assert request["max_completion_tokens"] is None
        assert request["null_content"] is False, request


@pytest.mark.usefixtures("llm_env")
async def test_a_500_that_names_the_request_falls_back_like_a_refusal(
    graph: Any, double: ModelDouble, judged: str
) -> None:
    """llama-cpp-python refuses a json_schema `response_format` with HTTP 500: the next method
    is tried, the judgement still comes from the model, and no outage is reported."""
    message = "Invalid response_format: only 'text' or 'json_object' are supported"
    double.configure(faults=[
        Fault(status=500, step="judged_answer", times=2, message=message)])
    result = await ask(graph, judged)
    judged_kinds = [r["kind"] for r in double.requests if r["step"] == "judged_answer"]
    assert judged_kinds == ["tools", "tools", "json_schema"]  # the client retries a 500 once
    assert any(t.decision == "HIGH (model)" for t in result.trail)
    assert warnings_of(result, "model_unavailable") == []


@pytest.mark.usefixtures("llm_env")
async def test_a_plain_500_stays_an_outage(graph: Any, double: ModelDouble, judged: str) -> None:
    """Negative control of the one above: a 500 that names no part of the request is the
    service failing; no other method is tried, and the user is told."""
    double.configure(faults=[Fault(status=500, step="judged_answer")])
    result = await ask(graph, judged)
    judged_kinds = [r["kind"] for r in double.requests if r["step"] == "judged_answer"]
    assert set(judged_kinds) == {"tools"}  # the client's own retry, nothing else
    assert warnings_of(result, "model_unavailable")


@pytest.mark.usefixtures("llm_env")
async def test_a_draft_without_markers_is_cited_where_its_source_supports_it(
    graph: Any, offline_graph: Any, double: ModelDouble
) -> None:
    """A small model's answer without `[n]`: the sentence a passage supports is cited, the
    invented one removed; a draft that only says the sources do not answer still abstains."""
    offline = await ask(offline_graph)
    fact = next(c for c in offline.citations)  # the passage that states the price
    double.configure()
    await ask(graph)
    quoted = double.answers[0]["items"][0]["sentence"]
    double.configure(answer_text=f"{quoted} It also includes a free pony.")
    result = await ask(graph)
    assert result.status == "answered", result.answer
    assert [c.source_id for c in result.citations] == [fact.source_id]
    assert "[1]" in result.answer and "pony" not in result.answer
    assert any(t.decision == "model_draft_cited" for t in result.trail)
    assert warnings_of(result, "unsupported_sentence")
    double.configure(answer_text="The sources do not contain the answer to this question.")
    abstained = await ask(graph)
    assert abstained.status == "not_found" and not abstained.citations


FAULTS = {
    "500": Fault(status=500),
    "503": Fault(status=503),
    "429": Fault(status=429, retry_after=0.2),
    "malformed_json": Fault(status=200, body='{"id": "chatcmpl-1", "choices": [{"mess'),
    "html_502": Fault(status=502, body="<html><body>Bad gateway</body></html>",
                      content_type="text/html"),
    "no_choices": Fault(status=200, body='{"id": "x", "object": "chat.completion", "choices": []}'),
    "text_plain_200": Fault(status=200, body="model loading", content_type="text/plain"),
}


@pytest.mark.parametrize("fault", list(FAULTS.values()), ids=list(FAULTS))
@pytest.mark.usefixtures("llm_env")
async def test_a_failing_model_gives_the_offline_answer_with_warnings(
    graph: Any, offline_graph: Any, double: ModelDouble, fault: Fault
) -> None:
    double.configure(faults=[fault])
    result = await ask(graph)
    offline = await ask(offline_graph)
    assert result.status == offline.status == "answered"
    assert [c.source_id for c in result.citations] == [c.source_id for c in offline.citations]
    assert len(warnings_of(result, "model_unavailable")) == 1  # the answer step (one source: no
    # tool choice asked)
    # each failed call counts against the cap; the OpenAI client retries 429/5xx once itself
    assert result.usage.llm_calls == 1
    assert 1 <= len(double.requests) <= 2 * result.usage.llm_calls


@pytest.mark.parametrize("question", DEMO_QUESTIONS)
@pytest.mark.usefixtures("llm_env")
async def test_a_failed_model_never_turns_an_offline_answer_into_not_found(
    graph: Any, offline_graph: Any, double: ModelDouble, question: str
) -> None:
    """With every call failing, each step takes its offline path: the status is exactly the
    offline one (whatever that is), flagged by model_unavailable, never worse."""
    double.configure(faults=[Fault(status=500)])
    result = await ask(graph, question)
    offline = await ask(offline_graph, question)
    assert result.status == offline.status
    assert warnings_of(result, "model_unavailable")
    assert result.usage.llm_calls <= MAX_MODEL_CALLS


@pytest.mark.usefixtures("llm_env")
async def test_a_429_with_retry_after_is_retried_by_the_client(
    graph: Any, double: ModelDouble
) -> None:
    double.configure(faults=[Fault(status=429, retry_after=1, times=1)])
    started = time.monotonic()
    result = await ask(graph)
    assert time.monotonic() - started >= 1.0  # Retry-After was honoured
    assert result.status == "answered" and result.warnings == []
    assert [r["status"] for r in double.requests] == [429, 200]
    assert result.usage.llm_calls == 1  # one call in the budget, two requests on the wire


@pytest.mark.usefixtures("llm_env")
async def test_latency_is_waited_for(graph: Any, double: ModelDouble) -> None:
    double.configure(latency_s=1.0)
    started = time.monotonic()
    result = await ask(graph)
    assert time.monotonic() - started >= 1.0
    assert result.status == "answered" and result.warnings == []


def knowledge_base_needing(store: KnowledgeStore, seconds: float) -> SourceTool:
    """The real knowledge_base tool on `store`, taking `seconds` more per search (a remote
    database, a loaded machine): what a cold process or a busy server sees."""
    real = make_knowledge_base_tool(store)

    async def run(args: Any) -> Any:
        await asyncio.sleep(seconds)
        return await real.run(args)

    return SourceTool(name="knowledge_base", description=real.description,
                      args_schema=real.args_schema, func=run, timeout_s=real.timeout_s)




@pytest.mark.parametrize(
    "settings",
    [
        pytest.param({}, id="fast_model"),
        pytest.param({"latency_s": 10, "latency_steps": ("call_tools",)}, id="slow_model"),
        pytest.param({"faults": [Fault(status=429, retry_after=30, step="call_tools")]},
                     id="long_retry_after"),
    ],
)
@pytest.mark.usefixtures("llm_env")
async def test_a_slow_model_does_not_cost_the_knowledge_base_its_search(
    store: KnowledgeStore, double: ModelDouble, settings: dict[str, Any]
) -> None:
    double.configure(**settings)
    graph = build_graph(store=store, tools={"knowledge_base": knowledge_base_needing(store, 0.5)})
    result = await ask(graph, time_budget_s=8)
    assert result.sources[0].status == "found", result.sources
    assert result.status in ANSWERED


@pytest.mark.usefixtures("llm_env")
async def test_streamed_model_calls_cross_the_wire_as_sse(graph: Any, double: ModelDouble) -> None:
    """What LangGraph Studio does: stream_mode "messages" makes every model call stream."""
    final: dict[str, Any] = {}
    tokens = 0
    async for mode, chunk in graph.astream(
        {"question": QUESTION, "sources": None, "language": None},
        context=Context(sources=["knowledge_base"]),
        stream_mode=["messages", "values"],
    ):
        if mode == "values":
            final = chunk
        else:
            tokens += 1
    assert tokens > 0
    assert all(r["stream"] for r in double.requests)
    assert final["status"] == "answered" and final["citations"]


# --- the oracle of the LLM-mode evaluation (benchmarks/bench_llm_oracle.py) ----------------------


@pytest.fixture(scope="module")
def oracle_served() -> Iterator[tuple[ModelDouble, str]]:
    oracle = Oracle(squad_path("questions.jsonl"), squad_path("kb_corpus.jsonl"))
    double = ModelDouble(Behaviour(mode="oracle"), oracle)
    with double.serve() as base_url:
        yield double, base_url


def _squad_case() -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """The first answerable question and the knowledge base by doc_id."""
    questions = [json.loads(x) for x in squad_path("questions.jsonl").read_text().splitlines() if x]
    kb = {d["doc_id"]: d for d in map(json.loads, squad_path("kb_corpus.jsonl").read_text().splitlines()) if d}
    q = next(x for x in questions if x["kind"] == "answerable")
    return q, kb


def _chat(base_url: str, system: str, user: str, tool_text: str | None = None) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": system},
                                      {"role": "user", "content": user}]
    if tool_text is not None:
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function",
             "function": {"name": "knowledge_base", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": tool_text},
        ]
    r = httpx.post(f"{base_url}/chat/completions", json={"model": "m", "messages": messages},
                   timeout=30)
    assert r.status_code == 200, r.text
    message: dict[str, Any] = r.json()["choices"][0]["message"]
    return message


@pytest.mark.parametrize("style", STYLES)
def test_the_oracle_quotes_the_gold_sentence_with_the_gold_marker(
    oracle_served: tuple[ModelDouble, str], style: str
) -> None:
    double, base_url = oracle_served
    double.configure(mode="oracle", style=style)
    q, kb = _squad_case()
    gold = kb[q["gold_doc_id"]]
    other = next(d for d in kb.values() if d["title"] != gold["title"])
    block = "\n".join(
        f'<source n="{n}" title="{d["title"]}">\n{d["text"]}\n</source>'
        for n, d in ((1, other), (2, gold))
    )
    draft = _chat(base_url, ANSWER_SYSTEM, ANSWER_USER.format(question=q["question"], sources=block))
    record = double.oracle.drafts[q["id"]]  # type: ignore[union-attr]
    assert record["correct"] and record["gold_n"] == 2
    quoted = record["items"][0]["sentence"]
    assert any(a.lower() in quoted.lower() for a in q["answers"])
    assert quoted in gold["text"]
    assert 2 in (attached_markers(draft["content"], quoted) or [])
    assert draft["content"] == record["draft"]


def test_the_oracle_rates_high_only_with_the_gold_passage(
    oracle_served: tuple[ModelDouble, str]
) -> None:
    base_url = oracle_served[1]
    q, kb = _squad_case()
    gold = kb[q["gold_doc_id"]]
    other = next(d for d in kb.values() if d["title"] != gold["title"])

    def level(*docs: dict[str, Any]) -> str:
        sources = render_sources([Finding(source="knowledge_base", source_id=d["doc_id"],
                                          title=d["title"], text=d["text"], score=0.8)
                                  for d in docs])
        message = _chat(base_url, JUDGED_ANSWER_SYSTEM.format(language="English"),
                        ANSWER_USER.format(question=q["question"], sources=sources)
                        + "\nReply in JSON.")
        return str(json.loads(message["content"])["level"])

    assert level(other, gold) == "HIGH"
    assert level(other) == "LOW"


# --- the CLI ------------------------------------------------------------------------------------


def run_cli(home: Path, base_url: str, *args: str) -> dict[str, Any]:
    done = subprocess.run(
        [str(GROUNDED_AGENT), "ask", *args, "--json"],
        env=llm_child_env(home, base_url), cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out: dict[str, Any] = json.loads(done.stdout)
    return out


def test_cli_answers_through_the_model_server(
    ingested_home: Path, double: ModelDouble, base_url: str
) -> None:
    out = run_cli(ingested_home, base_url, QUESTION)
    assert out["status"] == "answered"
    assert out["citations"][0]["source_id"] == "lumenary-pricing"
    assert "29 euros" in out["answer"]
    assert double.steps() == ["answer"]
    assert out["usage"]["llm_calls"] == 1


def test_cli_prints_the_checked_sentences_before_the_rest_of_the_answer(
    ingested_home: Path, double: ModelDouble, base_url: str
) -> None:
    """`ask --stream` (what a terminal gets): each checked sentence as it arrives, then the label,
    the notes and the sources; the answer's sentences are not printed twice."""
    done = subprocess.run(
        [str(GROUNDED_AGENT), "ask", QUESTION, "--stream"],
        env=llm_child_env(ingested_home, base_url), cwd=ROOT, capture_output=True, text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    streamed, _, rest = done.stdout.partition("\n\n")
    assert "29 euros" in streamed and "[1]" in streamed
    assert rest.startswith("[Answered]") and "Sources:" in rest
    assert done.stdout.count(streamed) == 1
    assert double.steps() == ["answer"]


def test_cli_keeps_a_marker_after_the_full_stop(
    ingested_home: Path, double: ModelDouble, base_url: str
) -> None:
    """The issue's first example: "X. [1]" must not become not_found with confidence HIGH."""
    double.configure(style="after_stop")
    out = run_cli(ingested_home, base_url, QUESTION)
    assert out["status"] == "answered", (out["sources"], out["warnings"], double.answers)
    assert out["citations"][0]["source_id"] == "lumenary-pricing"


@pytest.mark.parametrize(
    "fault",
    [Fault(status=500), Fault(status=200, body="{not json")],
    ids=["500", "malformed"],
)
def test_cli_with_a_broken_model_server_still_answers_from_the_knowledge_base(
    ingested_home: Path, double: ModelDouble, base_url: str, fault: Fault
) -> None:
    double.configure(faults=[fault])
    out = run_cli(ingested_home, base_url, QUESTION)
    assert out["status"] == "answered", (out["sources"], out["trail"], double.requests)
    assert out["citations"][0]["source_id"] == "lumenary-pricing"
    assert len(warnings_of(out, "model_unavailable")) == 1


def test_python_api_in_a_user_script(
    ingested_home: Path, double: ModelDouble, base_url: str
) -> None:
    """`from grounded_agent import ask` in a fresh interpreter with the environment set."""
    script = (
        "import json; from grounded_agent import ask; "
        f"r = ask({QUESTION!r}); print(json.dumps(r.model_dump(mode='json')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], env=llm_child_env(ingested_home, base_url), cwd=ROOT,
        capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["status"] == "answered" and out["citations"][0]["source_id"] == "lumenary-pricing"
    assert double.steps() == ["answer"]


# --- the LangServe endpoint and langgraph dev -----------------------------------------------------


def start_server(cmd: list[str], env: dict[str, str], url: str, probe: str, log: Any) -> Any:
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    deadline = time.monotonic() + 180
    while True:
        try:
            if httpx.get(f"{url}{probe}", timeout=2).status_code == 200:
                return proc
        except httpx.HTTPError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            stop_group(proc)
            log.seek(0)
            pytest.fail(f"{cmd[0]} did not come up:\n{log.read()[-3000:]}")
        time.sleep(0.5)


@pytest.fixture(scope="module")
def endpoint(
    ingested_home: Path, served: tuple[ModelDouble, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """`grounded-agent serve` in its own process, its model the double."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with (tmp_path_factory.mktemp("serve") / "server.log").open("w+") as log:
        proc = start_server([str(GROUNDED_AGENT), "serve", "--port", str(port)],
                            llm_child_env(ingested_home, served[1]), url, "/healthz", log)
        try:
            yield url
        finally:
            stop_group(proc)


def test_endpoint_invoke_answers_through_the_model_server(
    endpoint: str, double: ModelDouble
) -> None:
    r = httpx.post(f"{endpoint}/agent/invoke", json={"input": {"question": QUESTION}}, timeout=120)
    assert r.status_code == 200, r.text
    out = r.json()["output"]
    assert out["status"] == "answered"
    assert out["citations"][0]["source_id"] == "lumenary-pricing"
    assert double.steps() == ["answer"]


def test_endpoint_with_a_rate_limited_model_still_answers(
    endpoint: str, double: ModelDouble
) -> None:
    double.configure(faults=[Fault(status=429, retry_after=0.2)])
    r = httpx.post(f"{endpoint}/agent/invoke", json={"input": {"question": QUESTION}}, timeout=120)
    assert r.status_code == 200, r.text
    out = r.json()["output"]
    assert out["status"] == "answered"
    assert len(warnings_of(out, "model_unavailable")) == 1
    assert out["usage"]["llm_calls"] == 1


def test_endpoint_stream_ends_with_the_answer(endpoint: str, double: ModelDouble) -> None:
    r = httpx.post(f"{endpoint}/agent/stream", json={"input": {"question": QUESTION}}, timeout=120)
    assert r.status_code == 200
    data = [
        json.loads(line[len("data:"):])
        for line in r.text.splitlines()
        if line.startswith("data:") and line[len("data:"):].strip() not in ("", "null")
    ]
    final = [d for d in data if isinstance(d, dict) and d.get("status")]
    assert final and final[-1]["status"] == "answered" and final[-1]["citations"]
    assert final[-1]["event"] == "result"
    # the model's draft streamed over HTTP; each checked sentence reached the client before it
    sentences = [d["text"] for d in data if isinstance(d, dict) and d.get("event") == "sentence"]
    assert sentences and final[-1]["answer"].startswith(" ".join(sentences))
    assert "answer" in double.steps()


@pytest.fixture(scope="module")
def dev_server(
    ingested_home: Path, served: tuple[ModelDouble, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """`langgraph dev` on langgraph.json (what Studio talks to), its model the double."""
    if not LANGGRAPH.exists():
        pytest.skip(f"{LANGGRAPH} is missing: install the dev extra (langgraph-cli[inmem])")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with (tmp_path_factory.mktemp("langgraph_dev") / "server.log").open("w+") as log:
        proc = start_server(
            [str(LANGGRAPH), "dev", "--no-browser", "--no-reload", "--port", str(port),
             "--config", str(ROOT / "langgraph.json")],
            llm_child_env(ingested_home, served[1]), url, "/ok", log,
        )
        try:
            yield url
        finally:
            stop_group(proc)


async def test_langgraph_dev_run_answers_through_the_model_server(
    dev_server: str, double: ModelDouble
) -> None:
    from langgraph_sdk import get_client

    out = await get_client(url=dev_server).runs.wait(None, "agent", input={"question": QUESTION})
    assert isinstance(out, dict)
    assert out["status"] == "answered", out
    assert out["citations"][0]["source_id"] == "lumenary-pricing"
    assert double.steps() == ["answer"]


async def test_langgraph_dev_streams_model_tokens_from_the_server(
    dev_server: str, double: ModelDouble
) -> None:
    """Studio's view: messages streamed token by token, the model called with stream=True."""
    from langgraph_sdk import get_client

    events: list[str] = []
    final: dict[str, Any] = {}
    async for part in get_client(url=dev_server).runs.stream(
        None, "agent", input={"question": QUESTION}, stream_mode=["messages-tuple", "values"]
    ):
        events.append(part.event)
        if part.event == "values" and isinstance(part.data, dict):
            final = part.data
    assert "messages" in events
    assert double.requests and all(r["stream"] for r in double.requests)
    assert final.get("status") == "answered" and final.get("citations")


async def test_langgraph_dev_shows_every_model_call_as_its_own_node(
    dev_server: str, double: ModelDouble, judged: str
) -> None:
    """What Studio shows for a question that takes every model-calling step: the draft that also
    judges the confidence (the local signals left it open) and the support judgement each in a
    node of its own, in order, and each node's update counts the calls it made (every model call
    belongs to exactly one node; score_confidence makes none)."""
    from langgraph_sdk import get_client

    double.configure(style="paraphrase")  # a sentence that is no longer a quote is judged
    nodes: list[str] = []
    calls: dict[str, int] = {}
    async for part in get_client(url=dev_server).runs.stream(
        None, "agent", input={"question": judged}, stream_mode="updates"
    ):
        if part.event == "updates" and isinstance(part.data, dict):
            for node, update in part.data.items():
                nodes.append(node)
                spent = int(((update or {}).get("usage") or {}).get("llm_calls") or 0)
                if spent:
                    calls[node] = calls.get(node, 0) + spent
    assert nodes == [
        "prepare_question", "route_request", "call_tools", "check_grounding", "score_confidence",
        "draft_answer", "check_citations", "answer",
    ]
    assert double.steps() == ["judged_answer", "check_support"]
    assert calls == {"draft_answer": 1, "check_citations": 1}


async def test_langgraph_dev_with_a_failing_model_answers_from_the_knowledge_base(
    dev_server: str, double: ModelDouble
) -> None:
    from langgraph_sdk import get_client

    double.configure(faults=[Fault(status=503)])
    out = await get_client(url=dev_server).runs.wait(None, "agent", input={"question": QUESTION})
    assert isinstance(out, dict)
    assert out["status"] == "answered", out
    assert len(warnings_of(out, "model_unavailable")) == 1


@pytest.mark.parametrize("judge", ["all", "none"])
def test_bench_support_judge_measures_through_a_model_server(
    double: ModelDouble, base_url: str, judge: str
) -> None:
    """`bench_support.py --judge` runs the labelled rows through a model server: a judge that
    confirms everything keeps the judged rows (the digits rule aside), and one that confirms
    nothing removes every judged row."""
    import httpx
    from langchain_openai import ChatOpenAI

    from tests.support.benchmarks import load_benchmark

    bench = load_benchmark("bench_support")
    double.configure(support_judge=judge)
    ctx = Context()
    rows = [r for r in bench.load() if r["set"] == "tune"][:12]
    # its own HTTP client: the benchmark runs its own event loop, once per call
    model = ChatOpenAI(model=ctx.model, base_url=base_url, api_key="test",
                       http_async_client=httpx.AsyncClient())
    judged = bench.judged_verdicts(rows, model, ctx)
    assert {how for _, _, how in judged} <= {"judge", "quote check"}
    assert "judge" in {how for _, _, how in judged}
    assert double.steps().count("check_support") == sum(how == "judge" for _, _, how in judged)
    for row, kept, how in judged:
        if how == "judge" and judge == "none":
            assert not kept, row["sentence"]
    if judge == "all":
        assert sum(kept for _, kept, how in judged if how == "judge") >= 10


@pytest.mark.usefixtures("llm_env")
def test_the_blocking_api_asks_the_model_again_and_again(graph: Any, double: ModelDouble) -> None:
    """A script calling ask() three times: each call reaches the model. With a fresh event loop
    per call (asyncio.run), the model's cached HTTP client stayed on the first, closed loop and
    every later call fell back offline with a model_unavailable warning."""
    from grounded_agent import ask as ask_blocking

    for _ in range(3):
        result = ask_blocking(QUESTION, graph=graph, context=Context(sources=["knowledge_base"]))
        assert result.status == "answered" and result.warnings == [], result.warnings
        assert result.usage.llm_calls == 1
    assert double.steps() == ["answer"] * 3


@pytest.mark.usefixtures("llm_env")
def test_the_blocking_api_reaches_the_model_from_several_threads(
    graph: Any, double: ModelDouble
) -> None:
    """A web app or a worker pool calling ask() from its own threads: every call runs on the one
    process loop (blocking.py), where the default model's connections stay open."""
    from concurrent.futures import ThreadPoolExecutor

    from grounded_agent import ask as ask_blocking

    def one(_: int) -> AgentResult:
        return ask_blocking(QUESTION, graph=graph, context=Context(sources=["knowledge_base"]))

    with ThreadPoolExecutor(max_workers=3) as pool:
        results = list(pool.map(one, range(6)))
    for result in results:
        assert result.status == "answered" and result.warnings == [], result.warnings
    assert double.steps().count("answer") == 6


def test_the_oracle_reads_a_project_knowledge_base_and_states_a_table_row() -> None:
    """bench_llm_oracle --kb-dir: the oracle knows a project KB from its folder (no ../shared),
    maps a chunk to its document though markup keeps it from being a substring, and states the
    table row that holds the answer with its header, as a model would."""
    from evals.data import read_kb_dir_docs

    kb = ROOT / "benchmarks" / "kbs" / "pinecrest_tenants"
    oracle = Oracle(kb / "questions.jsonl", docs=read_kb_dir_docs(kb / "docs"))
    question = "Which days do the bin lorries take away the ordinary rubbish?"
    table = ("| Bin | What goes in | Collected |\n|---|---|---|\n"
             "| Grey | general waste | Tuesday and Friday |\n"
             "| Blue | paper and cardboard | every second Wednesday |")
    other = "Rent for each month is due on the 1st day of that month and is always paid in advance."
    block = (f'<source n="1" title="Rent and fees">\n{other}\n</source>\n'
             f'<source n="2" title="Rubbish, recycling and bulky waste">\n{table}\n</source>')
    double = ModelDouble(Behaviour(mode="oracle"), oracle)
    with double.serve() as base_url:
        draft = _chat(base_url, ANSWER_SYSTEM, ANSWER_USER.format(question=question, sources=block))
    record = oracle.drafts["pc-a05"]
    assert record["correct"] and record["gold_n"] == 2
    assert record["sources"] == [{"n": 1, "doc_id": "pc-rent-fees"}, {"n": 2, "doc_id": "pc-waste"}]
    assert "Collected: Tuesday and Friday" in draft["content"]
    assert 2 in (attached_markers(draft["content"], record["items"][0]["sentence"]) or [])
