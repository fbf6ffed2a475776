"""`langgraph dev` serves langgraph.json offline; the LangGraph SDK runs the default graph on the
real embedded store with the sample knowledge base (what LangGraph Studio talks to)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import ROOT, child_env, langgraph_dev

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

CONTRACT = {"question", "status", "answer", "citations", "confidence", "attempts", "queries",
            "sources", "warnings", "trail", "usage"}


@pytest.fixture(scope="module")
def dev_server(ingested_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    log = tmp_path_factory.mktemp("langgraph_dev") / "server.log"
    with langgraph_dev(ROOT / "langgraph.json", child_env(ingested_home), log) as url:
        yield url


async def test_a_run_returns_the_output_contract(dev_server: str) -> None:
    from langgraph_sdk import get_client

    client = get_client(url=dev_server)
    out = await client.runs.wait(
        None, "agent", input={"question": "How much does the Pro plan cost per user per month?"}
    )
    assert isinstance(out, dict)
    assert set(out) >= CONTRACT
    assert out["status"] in ("answered", "answered_with_caveat")
    assert out["citations"] and out["citations"][0]["source"] == "knowledge_base"
    assert "29" in out["answer"]
    assert out["sources"][0]["source"] == "knowledge_base"
    assert out["trail"][-1]["node"] == "answer"


async def test_studio_sees_the_graph_its_schemas_and_context(dev_server: str) -> None:
    from langgraph_sdk import get_client

    client = get_client(url=dev_server)
    assistants = await client.assistants.search(graph_id="agent")
    schemas = await client.assistants.get_schemas(assistants[0]["assistant_id"])
    assert schemas["input_schema"]["required"] == ["question"]
    assert set(schemas["output_schema"]["properties"]) >= CONTRACT
    context = schemas["context_schema"]["properties"]
    assert context["found_threshold"]["description"]


async def test_stream_of_node_updates(dev_server: str) -> None:
    from langgraph_sdk import get_client

    client = get_client(url=dev_server)
    nodes = []
    async for part in client.runs.stream(
        None, "agent", input={"question": "What is the capital of Mongolia?"},
        stream_mode="updates",
    ):
        if part.event == "updates" and isinstance(part.data, dict):
            nodes.extend(part.data)
    assert nodes[0] == "prepare_question" and nodes[-1] == "answer"


async def test_studio_streams_the_checked_sentences_as_custom_events(dev_server: str) -> None:
    """What a chat view streams: the checked sentences as custom events, then the result; in
    `messages` mode one message, the checked answer; no passage or prompt on either."""
    from langgraph_sdk import get_client

    client = get_client(url=dev_server)
    events: list[dict[str, object]] = []
    messages: list[object] = []
    async for part in client.runs.stream(
        None, "agent", input={"question": "How much does the Pro plan cost per user per month?"},
        stream_mode=["custom", "messages-tuple"],
    ):
        if part.event == "custom" and isinstance(part.data, dict):
            events.append(part.data)
        elif part.event.startswith("messages"):
            messages.append(part.data)
    kinds = [e["event"] for e in events]
    assert kinds[0] == "source" and kinds[-1] == "result" and "sentence" in kinds
    result = events[-1]["result"]
    assert isinstance(result, dict) and result["status"] in ("answered", "answered_with_caveat")
    sentences = [str(e["text"]) for e in events if e["event"] == "sentence"]
    assert str(result["answer"]).startswith(" ".join(sentences))
    wire = str(messages) + str(events)
    assert "<passage" not in wire and "<source" not in wire and "tool" not in str(
        [m[0].get("type") for m in messages if isinstance(m, list) and m])
    assert any(isinstance(m, list) and m and m[0].get("content") == result["answer"]
               for m in messages)


async def test_a_run_shows_every_step_as_its_node(dev_server: str) -> None:
    """What Studio shows for one answered question: each step its own node, in order (offline:
    the draft is the extract, no model call anywhere)."""
    from langgraph_sdk import get_client

    client = get_client(url=dev_server)
    nodes = []
    async for part in client.runs.stream(
        None, "agent", input={"question": "How much does the Pro plan cost per user per month?"},
        stream_mode="updates",
    ):
        if part.event == "updates" and isinstance(part.data, dict):
            nodes.extend(part.data)
    assert nodes == [
        "prepare_question", "route_request", "call_tools", "check_grounding", "score_confidence",
        "draft_answer", "check_citations", "answer",
    ]


async def test_a_studio_thread_takes_a_second_question(dev_server: str) -> None:
    """Studio keeps every conversation in a thread; the second turn must start clean."""
    from langgraph_sdk import get_client

    client = get_client(url=dev_server)
    thread = await client.threads.create()
    for question in ("How much does the Pro plan cost per user per month?",
                     "What is the uptime commitment in the SLA?"):
        out = await client.runs.wait(thread["thread_id"], "agent", input={"question": question})
        assert isinstance(out, dict) and out.get("question") == question, out
        assert out["status"] in ("answered", "answered_with_caveat", "not_found"), out
