"""The runnable the endpoint serves: the compiled graph, checkpointed only for requests in a thread.

Why a wrapper and not the graph itself: LangServe needs one runnable at route time, while the
PostgreSQL saver must be opened inside the server's event loop (its pool cannot cross loops) and
only requests that name a thread_id should write checkpoints. The wrapper also publishes explicit
schemas and returns the output contract (AgentResult) rather than raw graph state.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Any

from langchain_core.runnables import ConfigurableFieldSpec, Runnable, RunnableConfig
from langchain_core.tracers.log_stream import RunLog, RunLogPatch
from langgraph.graph.state import CompiledStateGraph
from pydantic import BaseModel

from grounded_agent.documents import parse_query
from grounded_agent.graph.builder import source_names_of
from grounded_agent.schemas import AgentResult, AgentWarning, InvalidQuestion, TrailStep
from grounded_agent.serve.schemas import (
    AgentConfig,
    AgentOutput,
    ClientConfigurable,
    input_schema_for,
)
from grounded_agent.store.errors import StoreError
from grounded_agent.streaming import own_task

if TYPE_CHECKING:
    from langgraph.checkpoint.base import BaseCheckpointSaver

    from grounded_agent.store import KnowledgeStore

log = logging.getLogger(__name__)

Graph = CompiledStateGraph[Any, Any, Any, Any]


MAX_BATCH = 16
"""Questions per /agent/batch request."""

UNAVAILABLE_TEXT = (
    "I could not establish an answer: the database that keeps this conversation could not be "
    "reached, so nothing was searched. Retry later."
)


def unavailable_result(input: Any, detail: str) -> dict[str, Any]:
    """The result of a run stopped by its database: unavailable, nothing searched or claimed."""
    question = input.get("question") if isinstance(input, dict) else None
    result = AgentResult(
        question=str(question or ""),
        status="unavailable",
        answer=UNAVAILABLE_TEXT,
        warnings=[
            AgentWarning(
                kind="source_unavailable",
                detail="the conversation's database could not be reached; nothing was searched",
            )
        ],
        trail=[TrailStep(node="thread_storage", attempt=1, decision="unavailable")],
    )
    log.warning("threaded run stopped: %s", detail)
    return {"event": "result", **result.model_dump(mode="json")}


class ThreadGraphs:
    """Opens the checkpointer on first use (in the serving loop) and closes it at shutdown."""

    def __init__(self, store: KnowledgeStore | None, database_url: str | None = None) -> None:
        self._store = store
        self._database_url = database_url
        self._saver: BaseCheckpointSaver[Any] | None = None
        self._stack: AsyncExitStack | None = None
        self._lock: asyncio.Lock | None = None

    async def saver(self) -> BaseCheckpointSaver[Any]:
        """The shared saver; raises StoreUnavailable when the database cannot be reached."""
        if self._saver is not None:
            return self._saver
        self._lock = self._lock or asyncio.Lock()
        async with self._lock:
            if self._saver is None:
                from grounded_agent.checkpoint import open_checkpointer

                stack = AsyncExitStack()
                self._saver = await stack.enter_async_context(
                    open_checkpointer(self._database_url, store=self._store)
                )
                self._stack = stack
            assert self._saver is not None
            return self._saver

    async def aclose(self) -> None:
        if self._stack is not None:
            await self._stack.aclose()
        self._stack, self._saver, self._lock = None, None, None

    async def reset(self, saver: BaseCheckpointSaver[Any] | None) -> None:
        """Drops `saver` after its database failed, so the next threaded request opens a new
        one (a quick direct probe while the database is away, a fresh pool once it is back)."""
        if saver is None or saver is not self._saver:
            return
        stack, self._stack, self._saver = self._stack, None, None
        if stack is not None:
            try:
                await stack.aclose()
            except Exception:  # a dead pool may fail to close cleanly; it is dropped anyway
                log.debug("closing the failed thread pool", exc_info=True)


class AgentRunnable(Runnable[dict[str, Any], dict[str, Any]]):
    """Runs the graph statelessly, or on a checkpointed copy when the config names a thread."""

    name: str | None = "GroundedAgent"

    def __init__(
        self, graph: Graph, threads: ThreadGraphs | None, store: KnowledgeStore | None = None
    ) -> None:
        self.graph = graph
        self.threads = threads
        self.store = store
        self._threaded: Graph | None = None
        self.sources = source_names_of(graph)
        """The sources the served graph can search (None: not a graph from build_graph)."""
        self._input_schema = input_schema_for(self.sources)

    # --- schemas --------------------------------------------------------------------------------

    def get_input_schema(self, config: RunnableConfig | None = None) -> type[BaseModel]:
        return self._input_schema

    def get_output_schema(self, config: RunnableConfig | None = None) -> type[BaseModel]:
        return AgentOutput

    def config_schema(self, *, include: Any = None) -> type[BaseModel]:
        return AgentConfig

    @property
    def config_specs(self) -> list[ConfigurableFieldSpec]:
        """The client-settable keys, so wrappers LangServe adds publish the same config schema."""
        return [
            ConfigurableFieldSpec(
                id=name,
                annotation=info.annotation,
                name=name,
                description=info.description,
                default=None,
            )
            for name, info in ClientConfigurable.model_fields.items()
        ]

    # --- running --------------------------------------------------------------------------------

    async def _graph_for(self, config: RunnableConfig | None) -> Graph:
        thread_id = ((config or {}).get("configurable") or {}).get("thread_id")
        if not thread_id:
            return self.graph
        if self.threads is None:
            from grounded_agent.store.errors import StoreUnavailable

            raise StoreUnavailable("this server keeps no conversation threads")
        saver = await self.threads.saver()
        if self._threaded is None or self._threaded.checkpointer is not saver:
            self._threaded = self.graph.copy(update={"checkpointer": saver})
        return self._threaded

    def invoke(
        self, input: dict[str, Any], config: RunnableConfig | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        raise NotImplementedError("the endpoint runs the agent asynchronously (ainvoke)")

    async def abatch(
        self,
        inputs: list[dict[str, Any]],
        config: RunnableConfig | list[RunnableConfig] | None = None,
        *,
        return_exceptions: bool = False,
        **kwargs: Any,
    ) -> list[Any]:
        """A batch takes one concurrency slot, so its size is capped like a request's body."""
        if len(inputs) > MAX_BATCH:
            raise InvalidQuestion(f"a batch holds at most {MAX_BATCH} questions, not {len(inputs)}")
        return await super().abatch(
            inputs, config, return_exceptions=return_exceptions, **kwargs
        )

    async def _page(self, raw: Any, config: RunnableConfig | None) -> dict[str, Any]:
        """A page request: the store's next page, no graph run and no model call. In a thread
        whose last result was combined, its answer is kept, not computed again."""
        from grounded_agent.search_api import asearch

        query = parse_query(raw)
        if self.store is None:
            from grounded_agent.store import open_store

            self.store = open_store()
        previous = None
        if ((config or {}).get("configurable") or {}).get("thread_id"):
            graph = await self._graph_for(config)
            values = (await graph.aget_state(config or {})).values
            if values.get("result_type") == "combined" and values.get("status"):
                previous = AgentResult.model_validate(values)
        result = await asearch(query, previous=previous, store=self.store)
        return result.model_dump(mode="json")

    @staticmethod
    def _question_input(input: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in input.items() if k != "search"}

    async def _database_failed(self, graph: Graph, exc: BaseException) -> BaseException:
        """A database failure of a run as StoreUnavailable (a 503, never a 500); a threaded
        run's saver is dropped so the next request reconnects. Anything else is returned as is."""
        from grounded_agent.store.errors import map_error

        mapped = map_error(exc, "thread storage")
        if mapped is None:
            return exc
        if self.threads is not None and graph is not self.graph:
            await self.threads.reset(graph.checkpointer)  # type: ignore[arg-type]
        log.warning("run failed on the database: %s", mapped)
        return mapped

    async def ainvoke(
        self, input: dict[str, Any], config: RunnableConfig | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        if input.get("search") is not None:
            return await self._page(input["search"], config)
        graph = await self._graph_for(config)
        try:
            out = await graph.ainvoke(self._question_input(input), config)
        except Exception as exc:
            failure = await self._database_failed(graph, exc)
            if failure is exc:
                raise
            raise failure from exc
        return AgentResult.model_validate(out).model_dump(mode="json")

    async def astream(
        self, input: dict[str, Any], config: RunnableConfig | None = None, **kwargs: Any
    ) -> AsyncIterator[dict[str, Any]]:
        """Yields the run's events as they happen (streaming.py: `source`, `sentence`, `removed`),
        the last one the `result`: {"event": "result", **AgentResult}. Nothing else of the run
        leaves: no raw draft, passage, prompt or internal state.
        """
        if input.get("search") is not None:
            yield {"event": "result", **await self._page(input["search"], config)}
            return
        try:
            graph = await self._graph_for(config)
        except StoreError as exc:
            yield unavailable_result(input, str(exc))
            return
        nodes: list[str] = []
        last: dict[str, Any] = {}
        ended = False
        run = graph.astream(self._question_input(input), config,
                            stream_mode=["updates", "custom", "values"])
        try:
            async for mode, chunk in own_task(run):
                if mode == "updates" and isinstance(chunk, dict):
                    nodes.extend(chunk)
                elif mode == "values" and isinstance(chunk, dict):
                    last = chunk
                elif mode == "custom" and isinstance(chunk, dict):
                    ended = ended or chunk.get("event") == "result"
                    yield client_event(chunk)
            if not ended:  # a graph of one's own (serve --graph) that sends no events
                yield {"event": "result", **AgentResult.model_validate(last).model_dump(mode="json")}
        except (asyncio.CancelledError, GeneratorExit):
            # the client went away: the run stops here, no further node (and no model call) runs
            log.warning(
                "run cancelled: the client disconnected mid-stream after %s",
                ", ".join(nodes) if nodes else "no node",
            )
            raise
        except Exception as exc:
            failure = await self._database_failed(graph, exc)
            if failure is exc:
                raise
            # the response has started (200): the run ends with an unavailable result rather
            # than an error event that would read as a server fault
            yield unavailable_result(input, str(failure))

    async def astream_log(  # type: ignore[override]
        self, input: dict[str, Any], config: RunnableConfig | None = None, *,
        diff: bool = True, **kwargs: Any,
    ) -> AsyncIterator[RunLogPatch | RunLog]:
        """/agent/stream_log (the playground's route) carries what /agent/stream carries and
        nothing more: each event as streamed output, the result as the final output. The log of
        the graph's inner runs (prompts, passages, the raw draft) is never built."""
        start: dict[str, Any] = {"id": str(uuid.uuid4()), "name": self.name, "type": "chain",
                                  "streamed_output": [], "final_output": None, "logs": {}}
        first = RunLogPatch({"op": "replace", "path": "", "value": start})
        log_so_far = RunLog(*first.ops, state=start)  # type: ignore[arg-type]
        yield first if diff else log_so_far
        async for event in self.astream(input, config):
            ops: list[dict[str, Any]] = [
                {"op": "add", "path": "/streamed_output/-", "value": event}]
            if event.get("event") == "result":
                final = {k: v for k, v in event.items() if k != "event"}
                ops.append({"op": "replace", "path": "/final_output", "value": final})
            patch = RunLogPatch(*ops)
            log_so_far = log_so_far + patch
            yield patch if diff else log_so_far


def client_event(event: dict[str, Any]) -> dict[str, Any]:
    """A custom event as a client receives it: the result's fields at the top, so that a client
    reading the last event's `status` reads the result's."""
    if event.get("event") == "result":
        return {"event": "result", **event["result"]}
    return event
