"""Injected parts of the graph (chat model, store, tools) and the budgeted way to call the model."""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage

from grounded_agent.context import Context
from grounded_agent.schemas import SourceName
from grounded_agent.tools.base import SourceTool

if TYPE_CHECKING:
    from grounded_agent.store import KnowledgeStore

log = logging.getLogger(__name__)

MAX_MODEL_CALLS = 5
"""Model calls per question, all nodes together: 2 at best, never more than this."""

_AUTO: Any = object()

TOOL_CACHE_SIZE = 8
"""Tool sets kept per process (one per Wikipedia language and timeout in use)."""


class BudgetExhausted(Exception):
    """The question's model-call, token or time budget is spent; callers fall back to local logic."""


def llm_configured() -> bool:
    """LLM mode needs a key, or a base URL of a local OpenAI-compatible server that needs none."""
    return bool(os.environ.get("OPENAI_API_KEY") or os.environ.get("OPENAI_BASE_URL"))


def default_chat_model(ctx: Context) -> BaseChatModel | None:
    """ChatOpenAI when a key or base URL is set, else None: the agent then runs offline."""
    if not llm_configured():
        return None
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(
        model=ctx.model,
        base_url=os.environ.get("OPENAI_BASE_URL") or None,
        api_key=os.environ.get("OPENAI_API_KEY") or "not-needed",
        temperature=0,
        timeout=min(ctx.time_budget_s, 30.0),
        max_retries=1,
        stream_usage=True,  # token counts (and the token budget) also when streaming
    )


def default_store() -> KnowledgeStore:
    from grounded_agent.store import open_store

    return open_store()


@dataclass
class Deps:
    """What `build_graph` injects. Anything left unset is built on first use, never at import."""

    chat_model: BaseChatModel | Any | None = _AUTO
    store: KnowledgeStore | None = None
    tools: dict[SourceName, SourceTool] | None = None
    store_factory: Callable[[], KnowledgeStore] = default_store
    chat_model_factory: Callable[[Context], BaseChatModel | None] = default_chat_model
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _tool_cache: dict[tuple[Any, ...], dict[SourceName, SourceTool]] = field(
        default_factory=dict, repr=False
    )

    def model(self, ctx: Context) -> BaseChatModel | None:
        if self.chat_model is _AUTO:
            return self.chat_model_factory(ctx)
        return self.chat_model  # type: ignore[no-any-return,unused-ignore]

    def get_store(self) -> KnowledgeStore:
        with self._lock:
            if self.store is None:
                self.store = self.store_factory()
            return self.store

    def available_tools(self, ctx: Context, names: Sequence[str]) -> dict[SourceName, SourceTool]:
        """The allow-list for this run: injected tools, or the default ones for the named sources."""
        if self.tools is not None:
            return {n: t for n, t in self.tools.items() if n in names}
        # thresholds are applied again by check_grounding, so tools need not vary with them;
        # the key holds only what a client may change, and the cache keeps a few entries
        key = (ctx.wikipedia_language, ctx.tool_timeout_s)
        with self._lock:
            cached = self._tool_cache.pop(key, None)
        if cached is None:
            cached = self._default_tools(ctx)
        with self._lock:
            self._tool_cache[key] = cached
            while len(self._tool_cache) > TOOL_CACHE_SIZE:
                self._tool_cache.pop(next(iter(self._tool_cache)))
        return {n: t for n, t in cached.items() if n in names}

    def _default_tools(self, ctx: Context) -> dict[SourceName, SourceTool]:
        from grounded_agent.store.relevance import CalibratedRelevance
        from grounded_agent.tools.knowledge_base import make_knowledge_base_tool
        from grounded_agent.tools.web_search import make_web_search_tool
        from grounded_agent.tools.wikipedia import make_wikipedia_tool

        store = self.get_store()
        if store.settings.embeddings == "local":
            # load the local model now (about 8 s the first time), outside any tool's timeout
            try:
                store.embeddings.embed_query("warm-up")
            except Exception:  # the search itself will report what is wrong
                log.warning("embedding model warm-up failed", exc_info=True)
        # web and Wikipedia passages: the same embeddings and calibration, with general-language
        # term rarity instead of the knowledge base's statistics (no database round trip)
        outside = CalibratedRelevance(store.embeddings, stats=None)
        # the tools classify with their default thresholds; check_grounding applies the run's
        return {
            "knowledge_base": make_knowledge_base_tool(store, timeout_s=ctx.tool_timeout_s),
            "wikipedia": make_wikipedia_tool(
                outside, language=ctx.wikipedia_language, timeout_s=ctx.tool_timeout_s
            ),
            "web": make_web_search_tool(
                outside,
                api_key=None,  # read from TAVILY_API_KEY at each call, never stored
                timeout_s=ctx.tool_timeout_s,
            ),
        }


FAILED_CALL: dict[str, int] = {"llm_calls": 1, "input_tokens": 0, "output_tokens": 0}
"""A model call that raised still counts against the call cap."""


def model_unavailable(step_name: str, fallback: str) -> dict[str, str]:
    """The warning a user sees when a step fell back because the model could not be reached."""
    return {
        "kind": "model_unavailable",
        "detail": f"the language model could not be reached at {step_name}; {fallback}",
    }


def usage_of(message: BaseMessage) -> dict[str, int]:
    """Usage counters of one model reply (providers that report none count as zero tokens)."""
    meta = getattr(message, "usage_metadata", None) or {}
    return {
        "llm_calls": 1,
        "input_tokens": int(meta.get("input_tokens", 0) or 0),
        "output_tokens": int(meta.get("output_tokens", 0) or 0),
    }


def check_budget(
    state: Mapping[str, Any], ctx: Context, spent: dict[str, int] | None = None
) -> None:
    """Raises BudgetExhausted when one more model call would break a limit of the question."""
    usage = dict(state.get("usage") or {})
    for k, v in (spent or {}).items():
        usage[k] = usage.get(k, 0) + v
    calls = usage.get("llm_calls", 0)
    if calls >= min(MAX_MODEL_CALLS, ctx.max_model_calls):
        raise BudgetExhausted(f"model calls {calls} reached the cap")
    tokens = usage.get("input_tokens", 0) + usage.get("output_tokens", 0)
    if tokens >= ctx.token_budget:
        raise BudgetExhausted(f"token budget {ctx.token_budget} spent ({tokens})")
    if remaining_time(state) <= 0:
        raise BudgetExhausted("time budget spent")


def remaining_time(state: Mapping[str, Any]) -> float:
    deadline = state.get("deadline")
    return float("inf") if deadline is None else float(deadline) - time.time()


def ai_text(message: BaseMessage) -> str:
    """The text of a model reply, whatever content shape the provider used."""
    if isinstance(message, AIMessage) and isinstance(message.content, list):
        return "".join(
            part.get("text", "") if isinstance(part, dict) else str(part)
            for part in message.content
        )
    return str(message.content)


async def call_model(runnable: Any, messages: list[Any], state: Mapping[str, Any]) -> Any:
    """One model call inside what is left of the question's time budget."""
    left = remaining_time(state)
    if left <= 0:
        raise BudgetExhausted("time budget spent")
    return await asyncio.wait_for(runnable.ainvoke(messages), timeout=min(left, 120.0))
