"""The Python API: ask / aask return the public AgentResult; astream shows progress per node."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.graph.state import CompiledStateGraph

from grounded_agent.context import Context, parse_sources
from grounded_agent.schemas import (
    AgentResult,
    InvalidQuestion,
    validate_language,
    validate_question,
)


def _inputs(question: str, sources: list[str] | str | None, language: str | None) -> dict[str, Any]:
    """Validates before any model or tool call, so bad input costs nothing and loses nothing."""
    # every input key is set, None included: in a thread, a key left out would keep the
    # previous turn's value (and `sources` then holds that turn's per-source reports)
    payload: dict[str, Any] = {
        "question": validate_question(question), "sources": None, "language": None
    }
    if sources is not None:  # an empty list is a mistake to report, not a request for defaults
        try:
            payload["sources"] = list(parse_sources(sources))
        except ValueError as exc:
            raise InvalidQuestion(str(exc)) from exc
    payload["language"] = validate_language(language)
    return payload


def _config(thread_id: str | None) -> RunnableConfig:
    return {"configurable": {"thread_id": thread_id}} if thread_id else {}


def _graph(
    graph: CompiledStateGraph[Any, Any, Any, Any] | None,
) -> CompiledStateGraph[Any, Any, Any, Any]:
    if graph is not None:
        return graph
    from grounded_agent.graph.agent import agent

    return agent


@asynccontextmanager
async def _graph_for(
    graph: CompiledStateGraph[Any, Any, Any, Any] | None, thread_id: str | None
) -> AsyncIterator[CompiledStateGraph[Any, Any, Any, Any]]:
    """The graph to run. A thread on the default graph gets a checkpointed copy on the store's
    database, opened in this event loop (the saver's pool cannot cross loops); a caller's own
    graph is used as given, with whatever checkpointer it was compiled with."""
    if graph is not None or not thread_id:
        yield _graph(graph)
        return
    from grounded_agent.checkpoint import open_checkpointer
    from grounded_agent.graph.agent import default_deps
    from grounded_agent.graph.builder import build_graph

    async with open_checkpointer(store=default_deps.get_store()) as saver:
        yield build_graph(deps=default_deps, checkpointer=saver)


async def aask(
    question: str,
    *,
    sources: list[str] | str | None = None,
    language: str | None = None,
    context: Context | None = None,
    graph: CompiledStateGraph[Any, Any, Any, Any] | None = None,
    thread_id: str | None = None,
) -> AgentResult:
    """Answers one question; raises InvalidQuestion for input the agent refuses."""
    return await arun(
        question,
        sources=sources,
        language=language,
        context=context,
        graph=graph,
        thread_id=thread_id,
    )


def ask(
    question: str,
    *,
    sources: list[str] | str | None = None,
    language: str | None = None,
    context: Context | None = None,
    graph: CompiledStateGraph[Any, Any, Any, Any] | None = None,
    thread_id: str | None = None,
) -> AgentResult:
    """Blocking form of `aask`, for scripts and notebooks without a running event loop."""
    return asyncio.run(
        aask(
            question,
            sources=sources,
            language=language,
            context=context,
            graph=graph,
            thread_id=thread_id,
        )
    )


async def arun(
    question: str,
    *,
    on_step: Callable[[str, dict[str, Any]], None] | None = None,
    sources: list[str] | str | None = None,
    language: str | None = None,
    context: Context | None = None,
    graph: CompiledStateGraph[Any, Any, Any, Any] | None = None,
    thread_id: str | None = None,
) -> AgentResult:
    """`aask` that reports each node's update to `on_step` as it happens (CLI progress)."""
    payload = _inputs(question, sources, language)
    final: dict[str, Any] = {}
    async with _graph_for(graph, thread_id) as g:
        async for mode, chunk in g.astream(
            payload,
            config=_config(thread_id),
            context=context or Context(),
            stream_mode=["updates", "values"],
        ):
            if mode == "values" and isinstance(chunk, dict):
                final = dict(chunk)
            elif on_step is not None and isinstance(chunk, dict):
                for node, update in chunk.items():
                    on_step(node, dict(update or {}))
    return AgentResult.model_validate(final)


async def astream(
    question: str,
    *,
    sources: list[str] | str | None = None,
    language: str | None = None,
    context: Context | None = None,
    graph: CompiledStateGraph[Any, Any, Any, Any] | None = None,
    thread_id: str | None = None,
) -> AsyncIterator[tuple[str, dict[str, Any]]]:
    """Yields (node, update) as each node finishes; the last update is the answer node's."""
    payload = _inputs(question, sources, language)
    async with _graph_for(graph, thread_id) as g:
        async for chunk in g.astream(
            payload, config=_config(thread_id), context=context or Context(), stream_mode="updates"
        ):
            for node, update in chunk.items():
                yield node, dict(update or {})
