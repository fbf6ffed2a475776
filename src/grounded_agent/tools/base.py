"""The one shape every source tool has: validated arguments in, a ToolOutcome out, never an exception."""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import BaseModel, ValidationError

from grounded_agent.schemas import SourceName, ToolOutcome

log = logging.getLogger(__name__)


class RelevanceScorer(Protocol):
    """Maps (query, passages) to calibrated relevance in [0, 1], the same scale for every source.

    `cosine` lets a caller pass similarities it already has (pgvector); without it the scorer
    embeds the passages itself.
    """

    def score(
        self, query: str, texts: Sequence[str], cosine: Sequence[float] | None = None
    ) -> list[float]: ...


@dataclass(frozen=True)
class SourceTool:
    """An allow-listed source: its name is what the model calls, its schema what it may pass."""

    name: SourceName
    description: str
    args_schema: type[BaseModel]
    func: Callable[[Any], Awaitable[ToolOutcome]]
    timeout_s: float = 20.0

    def validate(self, raw_args: dict[str, Any]) -> BaseModel:
        """Raises ValidationError for arguments outside the schema; callers record the rejection."""
        return self.args_schema.model_validate(raw_args)

    async def run(self, args: BaseModel | dict[str, Any]) -> ToolOutcome:
        """Runs the tool within its timeout; any failure becomes an error outcome, never a raise."""
        query = str(
            getattr(args, "query", None)
            or (args.get("query") if isinstance(args, dict) else "")
            or ""
        )
        started = time.perf_counter()
        try:
            parsed = args if isinstance(args, BaseModel) else self.validate(args)
            return await asyncio.wait_for(self.func(parsed), timeout=self.timeout_s)
        except ValidationError as exc:
            log.warning(
                "tool %s rejected arguments: %s", self.name, exc.errors(include_input=False)
            )
            return ToolOutcome.error(self.name, query, "config", "invalid arguments")
        except TimeoutError:
            log.warning("tool %s timed out after %.1fs", self.name, self.timeout_s)
            return ToolOutcome.error(
                self.name,
                query,
                "timeout",
                f"no answer within {self.timeout_s:.1f}s",
                elapsed_ms=(time.perf_counter() - started) * 1000,
            )
        except Exception as exc:  # a tool must never raise into the graph
            log.exception("tool %s failed unexpectedly", self.name)
            return ToolOutcome.error(
                self.name,
                query,
                "unknown",
                type(exc).__name__,
                elapsed_ms=(time.perf_counter() - started) * 1000,
            )

    def as_openai_tool(self) -> dict[str, Any]:
        """The function schema bound to the chat model (built once per tool shape)."""
        return _openai_tool(self.name, self.description, self.args_schema)


@functools.lru_cache(maxsize=64)
def _openai_tool(name: str, description: str, args_schema: type[BaseModel]) -> dict[str, Any]:
    from langchain_core.utils.function_calling import convert_to_openai_tool

    return convert_to_openai_tool(
        {**args_schema.model_json_schema(), "title": name, "description": description}
    )
