"""The one shape every source tool has: validated arguments in, a ToolOutcome out, never an exception.

`guarded` is the one place a tool's timeout is applied and its exceptions become error outcomes.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import BaseModel, ValidationError

from grounded_agent.redaction import redacted_traceback
from grounded_agent.schemas import SourceName, Thresholds, ToolOutcome
from grounded_agent.tools._retry import Failure, SourceFailure

log = logging.getLogger(__name__)


class RelevanceScorer(Protocol):
    """Maps (query, passages) to calibrated relevance in [0, 1], the same scale for every source.

    `cosine` lets a caller pass similarities it already has (pgvector); without it the scorer
    embeds the passages itself.
    """

    def score(
        self, query: str, texts: Sequence[str], cosine: Sequence[float] | None = None
    ) -> list[float]: ...


Classify = Callable[[Exception], Failure]
"""A tool's reading of an exception that stopped it: which kind of failure, with what detail."""


def default_classify(source: str) -> Classify:
    """The default reading: a carried SourceFailure as it is, a TimeoutError from inside the tool
    (a store's own statement timeout) "timeout", anything else a bug ("unknown")."""

    def classify(exc: Exception) -> Failure:
        if isinstance(exc, SourceFailure):
            return exc.failure
        if isinstance(exc, TimeoutError):  # the graph warns once (nodes/call_tools)
            log.info("tool %s timed out: %s", source, exc)
            return Failure("timeout", True, str(exc) or "timeout")
        log.error("tool %s failed unexpectedly: %s", source, redacted_traceback(exc))
        return Failure("unknown", False, type(exc).__name__)

    return classify


async def guarded(
    source: SourceName,
    query: str,
    work: Callable[[], Awaitable[ToolOutcome]],
    *,
    timeout_s: float | None,
    timeout_detail: str | None = None,
    classify: Classify | None = None,
) -> ToolOutcome:
    """The one place a search gets its time limit and its exceptions become error outcomes:
    `work` past `timeout_s` is a "timeout" outcome, any exception the outcome `classify` reads
    from it (default: `default_classify`). Never raises."""
    started = time.perf_counter()
    try:
        async with asyncio.timeout(timeout_s) as limit:
            return await work()
    except Exception as exc:  # a tool must never raise into the graph
        if isinstance(exc, TimeoutError) and limit.expired():
            log.info("tool %s timed out after %.1fs", source, timeout_s or 0.0)
            failure = Failure(
                "timeout", True, timeout_detail or f"no answer within {timeout_s or 0.0:.1f}s"
            )
        else:
            failure = (classify or default_classify(source))(exc)
    return ToolOutcome.error(
        source,
        query,
        failure.kind,
        failure.detail,
        elapsed_ms=(time.perf_counter() - started) * 1000,
    )


@dataclass(frozen=True)
class SourceTool:
    """An allow-listed source: its name is what the model calls, its schema what it may pass.

    `func` may raise: `run` applies the timeout and turns exceptions into error outcomes, reading
    them with `classify` (default: SourceFailure as it is, anything else "unknown").
    """

    name: SourceName
    description: str
    args_schema: type[BaseModel]
    func: Callable[[Any], Awaitable[ToolOutcome]]
    timeout_s: float = 20.0
    classify: Classify | None = None

    def validate(self, raw_args: dict[str, Any]) -> BaseModel:
        """Raises ValidationError for arguments outside the schema; callers record the rejection."""
        return self.args_schema.model_validate(raw_args)

    async def run(
        self,
        args: BaseModel | dict[str, Any],
        *,
        budget_s: float | None = None,
        thresholds: Thresholds | None = None,
    ) -> ToolOutcome:
        """Runs the tool within its timeout, or within `budget_s` (what the question has left)
        when that is shorter; any failure becomes an error outcome, never a raise. A completed
        read is classified here, once, by the run's `thresholds` (default: the tool's own)."""
        query = str(
            getattr(args, "query", None)
            or (args.get("query") if isinstance(args, dict) else "")
            or ""
        )
        try:
            parsed = args if isinstance(args, BaseModel) else self.validate(args)
        except ValidationError as exc:
            log.warning(
                "tool %s rejected arguments: %s", self.name, exc.errors(include_input=False)
            )
            return ToolOutcome.error(self.name, query, "config", "invalid arguments")
        if budget_s is not None and budget_s < self.timeout_s:
            limit, detail = max(0.1, budget_s), "question time budget"
        else:
            limit, detail = self.timeout_s, None
        outcome = await guarded(
            self.name,
            str(getattr(parsed, "query", query)),
            lambda: self.func(parsed),
            timeout_s=limit,
            timeout_detail=detail,
            classify=self.classify,
        )
        return outcome if thresholds is None else outcome.classified(thresholds)

    def as_openai_tool(self) -> dict[str, Any]:
        """The function schema bound to the chat model (built once per tool shape)."""
        return _openai_tool(self.name, self.description, self.args_schema)


@functools.lru_cache(maxsize=64)
def _openai_tool(name: str, description: str, args_schema: type[BaseModel]) -> dict[str, Any]:
    from langchain_core.utils.function_calling import convert_to_openai_tool

    return convert_to_openai_tool(
        {**args_schema.model_json_schema(), "title": name, "description": description}
    )
