"""Row 4: the language model misbehaves, over real HTTP (tests/support/openai_double.py on a
loopback port, ChatOpenAI pointed at it as a user's environment would). The knowledge base is a
store double behind the real tool, so the model is the only thing that varies.

Whatever the model does: bounded retries, the documented safe default (fixed routing, the local
scorer, an extractive answer, an abstention), never an answer from memory, never more model
calls than the cap."""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest

from grounded_agent import aask, build_graph
from grounded_agent.context import Context
from grounded_agent.llm.calls import MAX_MODEL_CALLS
from grounded_agent.llm.structured import forget_methods
from grounded_agent.schemas import AgentResult
from tests.faults.conftest import logged
from tests.faults.test_sources import PRO, QUESTION, FlakyStore, kb_tool, must_reject
from tests.support.openai_double import Fault, ModelDouble

MEMORY = "The Pro plan costs 99 USD per seat and includes a free pony"
"""A "fact" no source holds: it must never reach the user."""


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[ModelDouble, str]]:
    double = ModelDouble()
    with double.serve() as base_url:
        yield double, base_url


@pytest.fixture
def double(served: tuple[ModelDouble, str], monkeypatch: pytest.MonkeyPatch) -> ModelDouble:
    served[0].configure()
    forget_methods()
    monkeypatch.setenv("OPENAI_BASE_URL", served[1])
    monkeypatch.setenv("OPENAI_API_KEY", "sk-faults-model-key-0123456789")
    return served[0]


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def ask(score: float = 0.92, **ctx: Any) -> AgentResult:
    store = FlakyStore(["ok"])
    if score != 0.92:
        original = store.asearch

        async def asearch(*args: Any, **kwargs: Any) -> Any:
            return [f.model_copy(update={"score": score}) for f in await original(*args, **kwargs)]

        store.asearch = asearch  # type: ignore[method-assign]
    graph = build_graph(tools={"knowledge_base": kb_tool(store)})  # the model from the env
    return await aask(QUESTION, graph=graph,
                      context=Context(sources=["knowledge_base"], **{"choose_one_source": True, **ctx}))


def assert_grounded(result: AgentResult, requests: int) -> None:
    """Never from memory, never past the cap; whatever is said is cited from the source."""
    assert MEMORY not in result.answer and "99 USD" not in result.answer and "pony" not in result.answer
    assert result.usage.llm_calls <= MAX_MODEL_CALLS
    assert requests <= 2 * MAX_MODEL_CALLS  # the client's own retry at most doubles them
    if result.status in ("answered", "answered_with_caveat", "partial"):
        assert result.citations and all(c.source_id == "pricing" for c in result.citations)


def from_memory(result: AgentResult) -> AgentResult:
    """The wrong handling: the model's uncited memory reaches the user."""
    return result.model_copy(update={"answer": f"{MEMORY}.", "citations": []})


def kinds(result: AgentResult) -> list[str]:
    return [w.kind for w in result.warnings]


async def test_model_endpoint_down(
    double: ModelDouble, monkeypatch: pytest.MonkeyPatch, fault: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    row = fault(4, "model endpoint down (connection refused)")
    caplog.set_level(logging.INFO)
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{closed_port()}/v1")
    result = await ask()
    assert_grounded(result, 0)
    assert result.status == "answered" and "49 EUR" in result.answer
    assert "model_unavailable" in kinds(result)
    row.record(saw=f"{result.status} (extractive), warnings {sorted(set(kinds(result)))}",
               logged=logged(caplog, "model", "fixed routing"),
               control=must_reject(assert_grounded, from_memory(result), 0),
               llm_calls=result.usage.llm_calls)


@pytest.mark.parametrize("status", [500, 503])
async def test_model_5xx(double: ModelDouble, status: int, fault: Any,
                         caplog: pytest.LogCaptureFixture) -> None:
    row = fault(4, f"model answers {status} on every call")
    caplog.set_level(logging.INFO)
    double.configure(faults=[Fault(status=status)])
    result = await ask()
    assert_grounded(result, len(double.requests))
    assert result.status == "answered" and "model_unavailable" in kinds(result)
    row.record(saw=f"{result.status} (extractive), {len(double.requests)} requests, "
               f"{result.usage.llm_calls} counted", logged=logged(caplog, "model"))


async def test_model_timeouts(double: ModelDouble, fault: Any,
                              caplog: pytest.LogCaptureFixture) -> None:
    row = fault(4, "model never answers in time")
    caplog.set_level(logging.INFO)
    double.configure(latency_s=6.0)
    started = time.monotonic()
    result = await ask(time_budget_s=4.0)
    elapsed = time.monotonic() - started
    assert_grounded(result, len(double.requests))
    assert elapsed < 8.0  # the question's budget holds, whatever the model does
    assert result.sources[0].status == "found"  # the search was not starved by the wait
    assert result.status in ("answered", "answered_with_caveat")
    row.record(saw=f"{result.status} in {elapsed:.1f}s (budget 4s), warnings "
               f"{sorted(set(kinds(result)))}", logged=logged(caplog, "model", "budget"))


async def test_malformed_structured_output_twice(double: ModelDouble, fault: Any,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    row = fault(4, "confidence judgement unreadable (prose) on every try")
    caplog.set_level(logging.INFO)
    double.configure(structured="prose")
    result = await ask(score=0.66)  # undecided locally: the model is asked to judge
    judged = double.steps().count("judged_answer")
    assert judged >= 2  # tried again, then stopped
    assert_grounded(result, len(double.requests))
    assert result.confidence.level in ("LOW", "NOT_RELEVANT", None) or not result.confidence.can_answer \
        or result.status == "answered_with_caveat"
    row.record(saw=f"{result.status}, confidence {result.confidence.level}, "
               f"{judged} judgement requests", logged=logged(caplog, "could not be read"))


async def test_unknown_tool_name(double: ModelDouble, fault: Any,
                                 caplog: pytest.LogCaptureFixture) -> None:
    row = fault(4, "model calls a tool outside the allow-list ('shell')")
    caplog.set_level(logging.INFO)
    double.configure(tool_name="shell")
    result = await ask()
    assert_grounded(result, len(double.requests))
    assert "rejected_tool_call" in kinds(result)
    assert [s.source for s in result.sources] == ["knowledge_base"]
    assert result.sources[0].status == "found"  # the requested source was still searched
    row.record(saw=f"{result.status}; rejected_tool_call; knowledge_base searched",
               logged=logged(caplog, "shell", "rejected"))


async def test_tool_arguments_fail_the_schema(double: ModelDouble, fault: Any,
                                              caplog: pytest.LogCaptureFixture) -> None:
    row = fault(4, "model passes arguments that fail the tool's schema")
    caplog.set_level(logging.INFO)
    double.configure(invalid_tool_args=("call_tools",))
    result = await ask()
    assert_grounded(result, len(double.requests))
    assert "rejected_tool_call" in kinds(result) and result.sources[0].status == "found"
    row.record(saw=f"{result.status}; rejected_tool_call; source searched with the question",
               logged=logged(caplog, "invalid arguments", "rejected"))


@pytest.mark.parametrize(
    ("draft", "label"),
    [
        (f"{PRO.rstrip('.')} [7].", "cites [7] of 1 source"),
        (f"{MEMORY}.", "no citation markers"),
        (f"{MEMORY} [1].", "a fact from memory with a valid marker"),
    ],
    ids=["marker_7", "no_markers", "memory_with_marker"],
)
async def test_answer_citations_are_checked_in_code(
    double: ModelDouble, draft: str, label: str, fault: Any, caplog: pytest.LogCaptureFixture
) -> None:
    row = fault(4, f"model answer: {label}")
    caplog.set_level(logging.INFO)
    double.configure(answer_text=draft)
    result = await ask()
    assert_grounded(result, len(double.requests))
    assert "[7]" not in result.answer
    if label.startswith("cites"):
        assert "citation_removed" in kinds(result)
    # markers that check out nowhere, or no marker and no sentence a passage supports (nor a
    # statement that the sources do not answer): the evidence is quoted instead
    assert result.status == "answered" and "49 EUR" in result.answer
    assert "99 USD" not in result.answer and "pony" not in result.answer
    row.record(saw=f"{result.status}; {len(result.citations)} citation(s); "
               f"warnings {sorted(set(kinds(result)))}",
               logged=logged(caplog, "answer", "draft"))
