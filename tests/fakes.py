"""Test doubles: scripted chat models (langchain-core fakes) and scripted source tools."""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from pydantic import BaseModel, Field

from grounded_agent.documents import DocumentItem, DocumentList, DocumentQuery
from grounded_agent.schemas import Finding, SourceName, ToolOutcome
from grounded_agent.tools.base import SourceTool


class ScriptedChatModel(FakeMessagesListChatModel):
    """Replies in order and fails loudly past the script, so a test sees every extra model call."""

    received: list[list[BaseMessage]] = Field(default_factory=list)
    bound_tools: list[Any] = Field(default_factory=list)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.received.append(list(messages))
        if len(self.received) > len(self.responses):
            raise AssertionError(f"unscripted model call #{len(self.received)}")
        return ChatResult(
            generations=[ChatGeneration(message=self.responses[len(self.received) - 1])]
        )

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:  # type: ignore[override]
        self.bound_tools.append(list(tools))
        return self

    @property
    def calls(self) -> int:
        return len(self.received)


def tool_call(name: str, args: dict[str, Any], call_id: str = "call_1") -> AIMessage:
    return AIMessage(
        content="",
        tool_calls=[{"id": call_id, "name": name, "args": args}],
        usage_metadata={"input_tokens": 50, "output_tokens": 10, "total_tokens": 60},
    )


def judged(
    level: str, can_answer: bool, answer: str = "", reason: str = "scripted",
    query: str | None = None,
) -> AIMessage:
    """The draft call's reply when it also judges the confidence (schemas.JudgedDraft)."""
    args: dict[str, Any] = {"level": level, "can_answer": can_answer, "reason": reason,
                            "answer": answer}
    if query is not None:
        args["query"] = query
    return tool_call("JudgedDraft", args, "call_judge")


def text(content: str) -> AIMessage:
    return AIMessage(
        content=content,
        usage_metadata={"input_tokens": 80, "output_tokens": 20, "total_tokens": 100},
    )


def finding(
    source: SourceName = "knowledge_base",
    source_id: str = "doc-1",
    text: str = "",
    score: float = 0.9,
    title: str | None = None,
    **extra: Any,
) -> Finding:
    return Finding(
        source=source,
        source_id=source_id,
        title=title or source_id,
        text=text,
        score=score,
        **extra,
    )


class _Args(BaseModel):
    query: str = Field(min_length=1, max_length=300)
    k: int = Field(default=5, ge=1, le=10)


class ScriptedSource:
    """A source tool whose outcomes are scripted per call; records every query it received (and
    the whole arguments, for a tool with a richer `args_schema` such as KnowledgeBaseArgs)."""

    def __init__(
        self,
        name: SourceName,
        outcomes: Sequence[ToolOutcome | Exception],
        delay_s: float = 0.0,
        args_schema: type[BaseModel] = _Args,
    ) -> None:
        self.name = name
        self.outcomes = list(outcomes)
        self.queries: list[str] = []
        self.args: list[BaseModel] = []
        self.delay_s = delay_s
        self.args_schema = args_schema

    async def __call__(self, args: Any) -> ToolOutcome:
        self.queries.append(args.query)
        self.args.append(args)
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        item = self.outcomes[min(len(self.queries), len(self.outcomes)) - 1]
        if isinstance(item, Exception):
            raise item
        return item.model_copy(update={"query": args.query})

    def tool(self, timeout_s: float = 5.0) -> SourceTool:
        return SourceTool(
            name=self.name,
            description=f"Search {self.name}.",
            args_schema=self.args_schema,
            func=self,
            timeout_s=timeout_s,
        )


class ScriptedDocuments:
    """A store double for the document search: pages over a fixed list of documents (the real
    matching and order are the integration tests' business); records every query."""

    def __init__(self, items: Sequence[DocumentItem], fail: Exception | None = None) -> None:
        self.items = list(items)
        self.fail = fail
        self.queries: list[DocumentQuery] = []
        self.viewers: list[Any] = []
        self.excluded_flagged: list[bool] = []

    async def asearch_documents(
        self, query: DocumentQuery, *, viewer: Any = None, exclude_flagged: bool = False
    ) -> DocumentList:
        self.queries.append(query)
        self.viewers.append(viewer)
        self.excluded_flagged.append(exclude_flagged)
        if self.fail is not None:
            raise self.fail
        start = (query.page - 1) * query.page_size
        return DocumentList.of(self.items[start : start + query.page_size], len(self.items), query)


def document(doc_id: str, title: str | None = None, **fields: Any) -> DocumentItem:
    return DocumentItem(doc_id=doc_id, title=title or doc_id, **fields)


def found(source: SourceName, *items: Finding) -> ToolOutcome:
    return ToolOutcome.from_items(source, "q", list(items))


def not_found(source: SourceName) -> ToolOutcome:
    return ToolOutcome(
        source=source, query="q", status="not_found", coverage="complete", finding_count=0
    )


def failed(source: SourceName, kind: str = "unavailable") -> ToolOutcome:
    return ToolOutcome.error(source, "q", kind, "scripted failure")  # type: ignore[arg-type]


class PacedChatModel(BaseChatModel):
    """A chat model double that streams its reply word by word at a set rate (`token_s` between
    pieces, `pause_s` more after the piece that ends the first sentence), counting the pieces it
    produced; `ainvoke` without streaming waits the same time and returns the whole reply.
    Replies are `replies` in order (the last one repeats); a reply with a tool call streams its
    arguments' JSON word by word, as a server streams a structured reply."""

    replies: list[str | AIMessage]
    token_s: float = 0.0
    pause_s: float = 0.0
    produced: int = 0
    calls: int = 0
    fail_after: int | None = None
    """The stream breaks off (a reset connection) after this many pieces."""
    sentence_ends: list[float] = Field(default_factory=list)
    """time.monotonic() when each sentence of the streamed replies was complete (a piece ending
    in a full stop); the pause follows the first."""

    @property
    def _llm_type(self) -> str:
        return "paced"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:  # type: ignore[override]
        return self

    def _reply(self) -> AIMessage:
        self.calls += 1
        reply = self.replies[min(self.calls, len(self.replies)) - 1]
        return reply if isinstance(reply, AIMessage) else AIMessage(content=reply)

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: CallbackManagerForLLMRun | None = None,
                  **kwargs: Any) -> ChatResult:
        raise NotImplementedError("the paced double is asynchronous")

    async def _agenerate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                         run_manager: Any = None, **kwargs: Any) -> ChatResult:
        reply = self._reply()
        for _ in words(_streamed_text(reply)):  # paced as the stream is, sleep by sleep
            await asyncio.sleep(self.token_s)
            self.produced += 1
        await asyncio.sleep(self.pause_s)
        return ChatResult(generations=[ChatGeneration(message=reply)])

    async def _astream(self, messages: list[BaseMessage], stop: list[str] | None = None,
                       run_manager: Any = None,
                       **kwargs: Any) -> AsyncIterator[ChatGenerationChunk]:
        reply = self._reply()
        call = reply.tool_calls[0] if reply.tool_calls else None
        if call is not None:
            yield ChatGenerationChunk(message=AIMessageChunk(content="", tool_call_chunks=[
                {"name": call["name"], "args": "", "id": call["id"], "index": 0}]))
        pause = self.pause_s
        for i, piece in enumerate(words(_streamed_text(reply))):
            if self.fail_after is not None and i >= self.fail_after:
                raise ConnectionResetError("the model's stream broke off")
            await asyncio.sleep(self.token_s)
            self.produced += 1
            ends = piece.rstrip().endswith((".", "!", "?"))
            if ends:
                self.sentence_ends.append(time.monotonic())
            yield ChatGenerationChunk(message=AIMessageChunk(content=piece) if call is None
                                      else AIMessageChunk(content="", tool_call_chunks=[
                                          {"args": piece, "index": 0}]))
            if ends:
                await asyncio.sleep(pause)
                pause = 0.0


def _streamed_text(reply: AIMessage) -> str:
    """What a reply streams: its text, or its tool call's arguments as JSON."""
    if reply.tool_calls:
        return json.dumps(reply.tool_calls[0]["args"])
    return str(reply.content)


def words(text: str) -> list[str]:
    """A reply cut as a model streams it: each word with the space before it."""
    return re.findall(r"\s*\S+", text)
