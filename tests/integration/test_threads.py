"""Conversation threads on the embedded PostgreSQL: a follow-up is resolved against the earlier
turn, and the thread survives a restart (a second app, or a second checkpointer, on the same
database). Scripted model and sources: the thread plumbing is the subject."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest

from grounded_agent import aask
from grounded_agent.checkpoint import open_checkpointer
from grounded_agent.context import Context
from grounded_agent.graph.builder import build_graph
from grounded_agent.serve.app import ServeSettings, create_app
from grounded_agent.store import KnowledgeStore
from tests.fakes import (
    ScriptedChatModel,
    ScriptedSource,
    finding,
    found,
    judged,
    text,
    tool_call,
)
from tests.support.serving import serving

pytestmark = pytest.mark.integration

# each sentence names its plan: the endpoint runs the default Context, whose calibrated offline
# judge rates a sentence on its own ("It includes ..." says nothing of which plan)
PRO = "The Pro plan costs 49 EUR per user per month. The Pro plan includes priority support."
FIRST = "What does the Pro plan cost?"
FOLLOW_UP = "Does it include support?"
STANDALONE = "Does the Pro plan include priority support?"
# the model picks the search; the calibrated offline judge is off (its verdicts change with each
# calibration, and the thread plumbing is the subject here)
CTX = Context(sources=["knowledge_base"], choose_one_source=True, judge_veto=0.0, judge_margin=1.0)


def _kb() -> ScriptedSource:
    return ScriptedSource(
        "knowledge_base", [found("knowledge_base", finding(text=PRO, title="Pricing", score=0.9))]
    )


def _first_turn_model(chooses: bool = True) -> ScriptedChatModel:
    """`chooses`: the model is asked to choose the search (CTX); by default (one source, a
    question) it is not."""
    choice = [tool_call("knowledge_base", {"query": "Pro plan price"})] if chooses else []
    return ScriptedChatModel(
        responses=[*choice, text("The Pro plan costs 49 EUR per user per month [1].")]
    )


def _follow_up_model(chooses: bool = True) -> ScriptedChatModel:
    choice = [tool_call("knowledge_base", {"query": "Pro plan priority support"})] if chooses else []
    return ScriptedChatModel(
        responses=[
            text(STANDALONE),  # prepare_question resolves the follow-up against the thread
            *choice,
            judged("HIGH", True, "The Pro plan includes priority support [1]."),  # a quote
        ]
    )


def _assert_follow_up_saw_the_first_turn(
    model: ScriptedChatModel, kb: ScriptedSource, result: dict[str, Any],
    searched: str = "Pro plan priority support",
) -> None:
    condense_prompt = " ".join(str(m.content) for m in model.received[0])
    assert FIRST in condense_prompt and "49 EUR" in condense_prompt
    assert FOLLOW_UP in condense_prompt
    assert result["queries"][0] == STANDALONE
    assert any(t["decision"] == "resolved_follow_up" for t in result["trail"])
    assert kb.queries == [searched]
    assert result["status"] == "answered"


def test_endpoint_thread_survives_a_restart(fake_store: KnowledgeStore) -> None:
    thread = f"thread-{uuid.uuid4().hex[:8]}"
    config = {"configurable": {"thread_id": thread}}

    first_model = _first_turn_model(chooses=False)  # the endpoint runs the default Context
    app = create_app(
        build_graph(chat_model=first_model, tools={"knowledge_base": _kb().tool()}),
        store=fake_store,
        settings=ServeSettings(),
    )
    with serving(app) as base:
        r = httpx.post(
            f"{base}/agent/invoke",
            json={"input": {"question": FIRST}, "config": config},
            timeout=60,
        )
    assert r.status_code == 200, r.text
    assert r.json()["output"]["status"] == "answered"
    assert first_model.calls == 1

    # a new app instance: nothing in memory, only the database remembers the thread
    model, kb = _follow_up_model(chooses=False), _kb()
    app = create_app(
        build_graph(chat_model=model, tools={"knowledge_base": kb.tool()}),
        store=fake_store,
        settings=ServeSettings(),
    )
    with serving(app) as base:
        r = httpx.post(
            f"{base}/agent/invoke",
            json={"input": {"question": FOLLOW_UP}, "config": config},
            timeout=60,
        )
        assert r.status_code == 200, r.text
        _assert_follow_up_saw_the_first_turn(model, kb, r.json()["output"], searched=STANDALONE)

        # without a thread_id a question stands alone: no follow-up resolution
        alone = _first_turn_model(chooses=False)
        app2 = create_app(
            build_graph(chat_model=alone, tools={"knowledge_base": _kb().tool()}),
            store=fake_store,
            settings=ServeSettings(),
        )
        with serving(app2) as base2:
            r2 = httpx.post(
                f"{base2}/agent/invoke", json={"input": {"question": FOLLOW_UP}}, timeout=60
            )
        assert r2.status_code == 200
        assert not any(t["decision"] == "resolved_follow_up" for t in r2.json()["output"]["trail"])


async def test_python_api_thread_survives_a_new_checkpointer(fake_store: KnowledgeStore) -> None:
    thread = f"thread-{uuid.uuid4().hex[:8]}"
    async with open_checkpointer(store=fake_store) as saver:
        graph = build_graph(
            chat_model=_first_turn_model(),
            tools={"knowledge_base": _kb().tool()},
            checkpointer=saver,
        )
        first = await aask(FIRST, graph=graph, thread_id=thread, context=CTX)
    assert first.status == "answered"

    model, kb = _follow_up_model(), _kb()
    async with open_checkpointer(store=fake_store) as saver:
        graph = build_graph(
            chat_model=model, tools={"knowledge_base": kb.tool()}, checkpointer=saver
        )
        second = await aask(FOLLOW_UP, graph=graph, thread_id=thread, context=CTX)
        state = await graph.aget_state({"configurable": {"thread_id": thread}})
    _assert_follow_up_saw_the_first_turn(model, kb, second.model_dump(mode="json"))
    assert [h["question"] for h in state.values["history"]] == [FIRST, FOLLOW_UP]


async def test_unreachable_thread_database_is_a_clear_error() -> None:
    from grounded_agent.store.errors import StoreUnavailable

    with pytest.raises(StoreUnavailable, match="unreachable") as info:
        async with open_checkpointer("postgresql://agent:s3cret@127.0.0.1:1/kb"):
            pass
    assert "s3cret" not in str(info.value)
