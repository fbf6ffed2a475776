"""Injected parts of the graph (chat model, store, tools), each built once and kept.

The budgeted way to call the model is `grounded_agent.llm.calls`."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import re
import threading
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from langchain_core.language_models import BaseChatModel

from grounded_agent.context import Context, is_source_name
from grounded_agent.errors import ModelSetupError
from grounded_agent.grounding.judge import Judge, SentenceJudge, load_judge
from grounded_agent.grounding.judge.local import local_judge_for
from grounded_agent.llm.calls import MAX_MODEL_CALLS as MAX_MODEL_CALLS  # re-exported
from grounded_agent.schemas import SOURCE_NAMES, SourceName, Thresholds
from grounded_agent.tools.base import SourceTool

if TYPE_CHECKING:
    from grounded_agent.store import KnowledgeStore

log = logging.getLogger(__name__)

AUTO: Literal["auto"] = "auto"
"""`chat_model="auto"`: ChatOpenAI when OPENAI_API_KEY or OPENAI_BASE_URL is set, else offline."""

TOOL_CACHE_SIZE = 8
"""Tool sets kept per process (one per Wikipedia language and timeout in use)."""

MODEL_CACHE_SIZE = 8
"""Chat models kept per process (one per model name, base URL and timeout in use)."""


PROVIDERS = frozenset({
    "anthropic", "anthropic_bedrock", "azure_ai", "azure_openai", "baseten", "bedrock",
    "bedrock_converse", "cohere", "deepseek", "fireworks", "google_anthropic_vertex",
    "google_genai", "google_vertexai", "groq", "huggingface", "ibm", "litellm", "mistralai",
    "nvidia", "ollama", "openai", "openrouter", "perplexity", "together", "upstage", "xai",
})
"""The `provider:` prefixes `init_chat_model` knows (langchain 1.x); any other colon is part of
a model's name (an Ollama tag such as "llama3:8b" at an OpenAI-compatible base URL)."""


def provider_of(model: str) -> str | None:
    """"anthropic:claude-sonnet-4-5" -> "anthropic"; None for a plain model name."""
    prefix, sep, rest = model.partition(":")
    return prefix if sep and rest.strip() and prefix in PROVIDERS else None


def llm_configured(model: str | None = None) -> bool:
    """LLM mode needs a key, or a base URL of a local OpenAI-compatible server that needs none,
    or a model named with its provider (`provider:model`, whose package reads its own key)."""
    name = model if model is not None else os.environ.get("GROUNDED_AGENT_MODEL", "")
    provider = provider_of(name)
    if provider is not None and provider != "openai":
        return True
    return bool(os.environ.get("OPENAI_API_KEY") or os.environ.get("OPENAI_BASE_URL"))


def named_chat_model(model: str, *, timeout_s: float) -> BaseChatModel:
    """A `provider:model` name through LangChain's `init_chat_model`; a missing provider package
    is a one-line ModelSetupError naming it."""
    try:
        from langchain.chat_models import init_chat_model
    except ImportError as exc:  # pragma: no cover - a dependency of the package
        raise ModelSetupError("provider:model names need the package langchain") from exc
    provider = provider_of(model) or "openai"
    try:
        return init_chat_model(model, temperature=0, timeout=timeout_s, max_retries=1)
    except ImportError as exc:
        package = _missing_package(exc, provider)
        raise ModelSetupError(
            f"the model {model!r} needs the package {package}: pip install {package}"
        ) from None
    except (ValueError, TypeError) as exc:
        raise ModelSetupError(f"the model {model!r} cannot be set up: {str(exc)[:200]}") from None


def _missing_package(exc: ImportError, provider: str) -> str:
    found = re.search(r"pip install (?:-U )?([A-Za-z0-9_.\-]+)", str(exc))
    return found.group(1) if found else "langchain-" + provider.replace("_", "-")


def _model_timeout(ctx: Context) -> float:
    """The HTTP client's limit: one call's timeout (ask_model applies the tighter of it and
    what the time budget leaves)."""
    return min(ctx.time_budget_s, ctx.model_timeout_s)


def _model_key(ctx: Context) -> tuple[Hashable, ...]:
    """What makes one default chat model differ from another, read at each call: model name,
    base URL and timeout, (as a digest) the key, so a changed environment builds anew, and the
    event loop it runs on (its HTTP connections belong to one loop)."""
    secret = hashlib.sha256((os.environ.get("OPENAI_API_KEY") or "").encode()).hexdigest()
    base_url = os.environ.get("OPENAI_BASE_URL") or None
    return (ctx.model, base_url, _model_timeout(ctx), llm_configured(ctx.model), secret,
            _loop_id())


def _loop_id() -> int | None:
    try:
        return id(asyncio.get_running_loop())
    except RuntimeError:
        return None


def default_chat_model(ctx: Context) -> BaseChatModel | None:
    """ChatOpenAI when a key or base URL is set, a `provider:model` through init_chat_model,
    else None: the agent then runs offline."""
    if not llm_configured(ctx.model):
        return None
    provider = provider_of(ctx.model)
    if provider is not None and provider != "openai":
        return named_chat_model(ctx.model, timeout_s=_model_timeout(ctx))
    import httpx

    return _portable_chat_openai()(
        model=ctx.model.removeprefix("openai:"),
        base_url=os.environ.get("OPENAI_BASE_URL") or None,
        api_key=os.environ.get("OPENAI_API_KEY") or "not-needed",
        temperature=0,
        timeout=_model_timeout(ctx),
        max_retries=1,
        stream_usage=True,  # token counts (and the token budget) also when streaming
        # its own connections: langchain-openai's shared client belongs to the first event loop
        # that used it, and an async caller's loop is not the blocking API's (blocking.py)
        http_async_client=httpx.AsyncClient(timeout=_model_timeout(ctx)),
    )


_PORTABLE: type[BaseChatModel] | None = None


def _portable_chat_openai() -> type[BaseChatModel]:
    """ChatOpenAI whose requests every OpenAI-compatible server accepts (built on first use:
    langchain-openai is imported only when a model is configured).

    - No `"content": null`: langchain-openai sends it for an assistant turn that only calls
      tools, and llama-cpp-python answers such a request with HTTP 500; an empty string means
      the same to every server.
    - With OPENAI_BASE_URL set (a local or self-hosted server), the token limit goes out as
      `max_tokens`, the name llama.cpp, llama-cpp-python, Ollama and vLLM all read;
      langchain-openai renames it `max_completion_tokens`, which only OpenAI's own API requires.
    """
    global _PORTABLE
    if _PORTABLE is None:
        from langchain_openai import ChatOpenAI

        class PortableChatOpenAI(ChatOpenAI):
            def _get_request_payload(
                self, input_: Any, *, stop: list[str] | None = None, **kwargs: Any
            ) -> dict[str, Any]:
                payload: dict[str, Any] = super()._get_request_payload(
                    input_, stop=stop, **kwargs
                )
                return portable_payload(payload, local=bool(os.environ.get("OPENAI_BASE_URL")))

        _PORTABLE = PortableChatOpenAI
    return _PORTABLE


def portable_payload(payload: dict[str, Any], *, local: bool) -> dict[str, Any]:
    """A chat-completions request body as every OpenAI-compatible server accepts it (see
    `_portable_chat_openai`)."""
    for message in payload.get("messages") or []:
        if isinstance(message, dict) and "content" in message and message["content"] is None:
            message["content"] = ""
    if local and "max_completion_tokens" in payload:
        payload["max_tokens"] = payload.pop("max_completion_tokens")
    return payload


def checked_tools(tools: object) -> dict[SourceName, SourceTool] | None:
    """`build_graph(tools=...)` as given, or a TypeError naming what each entry should be."""
    if tools is None:
        return None
    if not isinstance(tools, Mapping):
        raise TypeError(f"tools must be a dict of source name to SourceTool, not {type(tools).__name__}")
    out: dict[SourceName, SourceTool] = {}
    for name, tool in tools.items():
        if not is_source_name(name):
            raise ValueError(
                f"tools: {name!r} is not a source name (a letter, then up to 63 letters, digits, "
                "'_' or '-')"
            )
        if not isinstance(tool, SourceTool):
            raise TypeError(f"tools[{name!r}] must be a grounded_agent SourceTool, not "
                            f"{type(tool).__name__}{_wrap_hint(tool, name)}")
        if tool.name != name:
            raise ValueError(f"tools[{name!r}] is the source {tool.name!r}: give it the same name")
        out[name] = tool
    return out


def _wrap_hint(part: object, name: str) -> str:
    """How to make a source of what was given instead."""
    from langchain_core.retrievers import BaseRetriever
    from langchain_core.tools import BaseTool
    from langchain_core.vectorstores import VectorStore

    if isinstance(part, BaseRetriever):
        return f"; wrap it: grounded_agent.sources.from_retriever(retriever, name={name!r})"
    if isinstance(part, VectorStore):
        return f"; wrap it: grounded_agent.sources.from_vectorstore(vectorstore, name={name!r})"
    if isinstance(part, BaseTool):
        return ("; a LangChain tool returns text the agent cannot cite: wrap the retriever "
                f"behind it with grounded_agent.sources.from_retriever(retriever, name={name!r})")
    return ""


def default_store() -> KnowledgeStore:
    from grounded_agent.store import open_store

    return open_store()


@dataclass
class Deps:
    """What `build_graph` injects. Anything left unset is built on first use, never at import."""

    chat_model: BaseChatModel | str | None = AUTO
    store: KnowledgeStore | None = None
    tools: dict[SourceName, SourceTool] | None = None
    judge: Judge | None = None
    """The offline judge; unset, the shipped one (loaded once per process)."""
    local_judge_factory: Callable[[Context, Judge], SentenceJudge | None] = local_judge_for
    """Offline, opt-in: the judge that decides in the shipped one's place for a run (None: the
    shipped one alone); the default reads Context.local_judge_url."""
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _tool_cache: dict[tuple[Any, ...], dict[SourceName, SourceTool]] = field(
        default_factory=dict, repr=False
    )
    _model_cache: dict[tuple[Hashable, ...], BaseChatModel | None] = field(
        default_factory=dict, repr=False
    )
    _local_judge_cache: dict[tuple[Hashable, ...], SentenceJudge | None] = field(
        default_factory=dict, repr=False
    )

    def __post_init__(self) -> None:
        """A wrong part fails here, when the graph is built, naming what was expected; a model
        named as text is built now, so a missing provider package says so at once."""
        self.tools = checked_tools(self.tools)
        if isinstance(self.chat_model, str) and self.chat_model != AUTO:
            self.chat_model = named_chat_model(self.chat_model, timeout_s=Context().model_timeout_s)
        elif not (self.chat_model is None or self.chat_model == AUTO
                  or isinstance(self.chat_model, BaseChatModel)):
            raise TypeError(
                "chat_model must be a langchain_core BaseChatModel, a 'provider:model' name, "
                f"'auto' or None (offline), not {type(self.chat_model).__name__}"
            )
        if self.store is not None:
            from langchain_core.retrievers import BaseRetriever
            from langchain_core.vectorstores import VectorStore

            # a KnowledgeStore, or a stand-in with its search (tests inject scripted ones)
            searches = ("asearch", "asearch_documents")
            if isinstance(self.store, VectorStore | BaseRetriever) or not any(
                callable(getattr(self.store, name, None)) for name in searches
            ):
                raise TypeError(
                    "store must be a grounded_agent KnowledgeStore (open_store()), not "
                    f"{type(self.store).__name__}; bring a vector store or retriever of your own "
                    "as a source: tools={'my_docs': grounded_agent.sources.from_vectorstore(vs, "
                    "name='my_docs')}"
                )

    def model(self, ctx: Context) -> BaseChatModel | None:
        """The injected chat model, or the default one (`default_chat_model`), built once per model name, base URL and
        timeout (a ChatOpenAI per call would rebuild its client every time)."""
        if not isinstance(self.chat_model, str):  # injected: a model, or None for offline
            return self.chat_model
        model: BaseChatModel | None = self._cached(
            self._model_cache, _model_key(ctx), lambda: default_chat_model(ctx), MODEL_CACHE_SIZE
        )
        return model

    def thresholds(self, ctx: Context) -> Thresholds:
        """The run's cut-offs (Context.run_thresholds: lower with a model that judges the weaker
        passages itself)."""
        return ctx.run_thresholds(with_model=self.model(ctx) is not None)

    def _cached(self, cache: dict[Any, Any], key: Any, build: Callable[[], Any], size: int) -> Any:
        """`cache[key]`, built outside the lock on a miss; the `size` most recent entries kept."""
        with self._lock:
            found = key in cache
            value = cache.pop(key, None)
        if not found:
            value = build()
        with self._lock:
            cache[key] = value
            while len(cache) > size:
                cache.pop(next(iter(cache)))
        return value

    def get_judge(self) -> Judge:
        with self._lock:
            if self.judge is None:
                self.judge = load_judge()
            return self.judge

    def get_local_judge(self, ctx: Context) -> SentenceJudge | None:
        """The run's local judge (Context.local_judge_*), built once per setting and kept (its
        HTTP client keeps the connection to the server); None where the run names none."""
        if not ctx.local_judge_url.strip():
            return None
        key = (ctx.local_judge_url, ctx.local_judge_max_candidates, ctx.local_judge_timeout_s,
               ctx.local_judge_veto, ctx.local_judge_margin, ctx.local_judge_prompt)
        judge: SentenceJudge | None = self._cached(
            self._local_judge_cache, key,
            lambda: self.local_judge_factory(ctx, self.get_judge()), MODEL_CACHE_SIZE)
        return judge

    def get_store(self) -> KnowledgeStore:
        with self._lock:
            if self.store is None:
                self.store = default_store()
            return self.store

    def source_names(self) -> list[SourceName]:
        """Every source this graph can search: the built-in ones, and those brought to it."""
        return [*(n for n in SOURCE_NAMES if n not in (self.tools or {})), *(self.tools or {})]

    def default_sources(self) -> list[SourceName]:
        """What a run searches when neither its input nor its Context names sources: the
        sources brought to build_graph that are not built in (a user who brings a retriever
        means it), else the knowledge base (or the one brought in its place)."""
        own = [n for n in self.tools or {} if n not in SOURCE_NAMES]
        return own or ["knowledge_base"]

    def available_tools(self, ctx: Context, names: Sequence[str]) -> dict[SourceName, SourceTool]:
        """The allow-list for this run: the named sources, each the tool brought under its name
        or the built-in one (built only when a run names it)."""
        given = {n: t for n, t in (self.tools or {}).items() if n in names}
        if all(n in given for n in names):
            return given
        # thresholds are applied again by check_grounding, so tools need not vary with them;
        # the key holds only what a client may change, and the cache keeps a few entries
        key = (ctx.wikipedia_language, ctx.tool_timeout_s, ctx.flagged_documents)
        cached = self._cached(self._tool_cache, key, lambda: self._default_tools(ctx), TOOL_CACHE_SIZE)
        return {n: given.get(n) or cached[n] for n in names if n in given or n in cached}

    def _default_tools(self, ctx: Context) -> dict[SourceName, SourceTool]:
        from grounded_agent.store.relevance import CalibratedRelevance
        from grounded_agent.tools.knowledge_base import make_knowledge_base_tool
        from grounded_agent.tools.web_search import make_web_search_tool
        from grounded_agent.tools.wikipedia import make_wikipedia_tool

        store = self.get_store()
        from grounded_agent.grounding.text import warm_up

        warm_up()  # word lists and stemmer load here, not inside a search's timeout
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
            "knowledge_base": make_knowledge_base_tool(
                store, timeout_s=ctx.tool_timeout_s,
                exclude_flagged=ctx.flagged_documents == "exclude",
            ),
            "wikipedia": make_wikipedia_tool(
                outside, language=ctx.wikipedia_language, timeout_s=ctx.tool_timeout_s
            ),
            "web": make_web_search_tool(
                outside,
                api_key=None,  # read from TAVILY_API_KEY at each call, never stored
                timeout_s=ctx.tool_timeout_s,
            ),
        }
