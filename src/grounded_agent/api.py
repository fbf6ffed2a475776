"""The Python API: ask / aask return the public AgentResult; astream shows progress per node."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.graph.state import CompiledStateGraph
from typing_extensions import TypedDict, Unpack

from grounded_agent.context import Context, parse_sources
from grounded_agent.schemas import AgentResult, InvalidQuestion, validate_question

Graph = CompiledStateGraph[Any, Any, Any, Any]


class AskOptions(TypedDict, total=False):
    """What ask, aask, arun and astream accept beside the question."""

    sources: list[str] | str | None
    """Sources to search (knowledge_base, wikipedia, web); default: Context.sources."""
    language: str | None
    """Language of the answer; default: the question's."""
    context: Context | None
    """Per-run settings (models, thresholds, limits); default: Context()."""
    graph: Graph | None
    """A graph from build_graph; default: the package's `agent`."""
    thread_id: str | None
    """Conversation thread: follow-up questions see the earlier turns (checkpointed)."""


def _inputs(question: str, options: AskOptions) -> dict[str, Any]:
    """Validates before any model or tool call, so bad input costs nothing and loses nothing."""
    # every input key is set, None included: in a thread, a key left out would keep the
    # previous turn's value (and `sources` then holds that turn's per-source reports)
    payload: dict[str, Any] = {
        "question": validate_question(question), "sources": None, "language": None
    }
    sources = options.get("sources")
    if sources is not None:  # an empty list is a mistake to report, not a request for defaults
        try:
            payload["sources"] = list(parse_sources(sources))
        except ValueError as exc:
            raise InvalidQuestion(str(exc)) from exc
    if options.get("language"):
        payload["language"] = options.get("language")
    return payload


def _config(thread_id: str | None) -> RunnableConfig:
    return {"configurable": {"thread_id": thread_id}} if thread_id else {}


@asynccontextmanager
async def _graph_for(graph: Graph | None, thread_id: str | None) -> AsyncIterator[Graph]:
    """The graph to run. A thread on the default graph gets a checkpointed copy on the store's
    database, opened in this event loop (the saver's pool cannot cross loops); a caller's own
    graph is used as given, with whatever checkpointer it was compiled with."""
    if graph is not None:
        yield graph
        return
    from grounded_agent.graph.agent import agent, default_deps

    if not thread_id:
        yield agent
        return
    from grounded_agent.checkpoint import open_checkpointer
    from grounded_agent.graph.builder import compile_graph

    async with open_checkpointer(store=default_deps.get_store()) as saver:
        yield compile_graph(default_deps, checkpointer=saver)


async def aask(question: str, **options: Unpack[AskOptions]) -> AgentResult:
    """Answers one question; raises InvalidQuestion for input the agent refuses."""
    return await arun(question, **options)


def ask(question: str, **options: Unpack[AskOptions]) -> AgentResult:
    """Blocking form of `aask`, for scripts and notebooks without a running event loop."""
    return asyncio.run(arun(question, **options))


async def arun(
    question: str,
    *,
    on_step: Callable[[str, dict[str, Any]], None] | None = None,
    **options: Unpack[AskOptions],
) -> AgentResult:
    """`aask` that reports each node's update to `on_step` as it happens (CLI progress)."""
    payload = _inputs(question, options)
    thread_id = options.get("thread_id")
    final: dict[str, Any] = {}
    async with _graph_for(options.get("graph"), thread_id) as g:
        async for mode, chunk in g.astream(
            payload,
            config=_config(thread_id),
            context=options.get("context") or Context(),
            stream_mode=["updates", "values"],
        ):
            if mode == "values" and isinstance(chunk, dict):
                final = dict(chunk)
            elif on_step is not None and isinstance(chunk, dict):
                for node, update in chunk.items():
                    on_step(node, dict(update or {}))
    return AgentResult.model_validate(final)


async def astream(
    question: str, **options: Unpack[AskOptions]
) -> AsyncIterator[tuple[str, dict[str, Any]]]:
    """Yields (node, update) as each node finishes; the last update is the answer node's."""
    payload = _inputs(question, options)
    thread_id = options.get("thread_id")
    async with _graph_for(options.get("graph"), thread_id) as g:
        async for chunk in g.astream(
            payload,
            config=_config(thread_id),
            context=options.get("context") or Context(),
            stream_mode="updates",
        ):
            for node, update in chunk.items():
                yield node, dict(update or {})
