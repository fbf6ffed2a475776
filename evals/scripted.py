"""A chat model for benchmarks that answers each agent step the way the agent's own logic would.

It recognises the step by its system prompt: it calls the knowledge base with the question,
rewrites with the local rewrite, and answers extractively from the numbered sources. The answer
step that also judges (the local signals left the level open) sees
no relevance, only the numbered sources: it rates HIGH when a sentence can be quoted, LOW
otherwise, and answers in the same reply. So a run takes the path the agent's decisions give,
and the number of model calls is what the graph spends on that path. `latency_s` adds a
non-blocking delay per call (an API round trip); zero measures orchestration alone.
"""

from __future__ import annotations

import asyncio
import html
import re
import time
import uuid
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field

from grounded_agent.grounding.extractive import extractive_draft
from grounded_agent.nodes.reformulate_query import local_rewrite
from grounded_agent.prompts.answer import ANSWER_SYSTEM, JUDGED_ANSWER_SYSTEM
from grounded_agent.prompts.call_tools import CALL_TOOLS_SYSTEM
from grounded_agent.prompts.reformulate_query import REFORMULATE_QUERY_SYSTEM
from grounded_agent.schemas import Finding

_QUESTION = re.compile(r"<question>\s*(.*?)\s*</question>", re.DOTALL)
_PASSAGE = re.compile(
    r'<passage source="([^"]*)" id="([^"]*)" title="([^"]*)" relevance="([\d.]+)">\n(.*?)\n</passage>',
    re.DOTALL,
)
_TRIED = re.compile(r"<tried_queries>\s*(.*?)\s*</tried_queries>", re.DOTALL)
_SOURCE = re.compile(r'<source n="(\d+)" title="([^"]*)"[^>]*>\n(.*?)\n</source>', re.DOTALL)
"""The escaped block prompts.sources renders: no `"` in attributes, no `</source>` in text."""


def _head(prompt: str) -> str:
    return prompt.strip().splitlines()[0][:60] if prompt.strip() else ""


_STEPS = {
    _head(CALL_TOOLS_SYSTEM): "call_tools",
    _head(REFORMULATE_QUERY_SYSTEM): "reformulate_query",
    _head(ANSWER_SYSTEM): "answer",
    _head(JUDGED_ANSWER_SYSTEM): "answer",  # the answer step that also judges the confidence
}


def _text(messages: list[BaseMessage]) -> str:
    return "\n".join(m.content if isinstance(m.content, str) else str(m.content) for m in messages)


def _step(messages: list[BaseMessage]) -> str:
    system = messages[0].content if messages and isinstance(messages[0].content, str) else ""
    head = _head(system)
    for prefix, step in _STEPS.items():
        if prefix and head.startswith(prefix[:40]):
            return step
    return "unknown"


class DecisionFollowingModel(BaseChatModel):
    """Scripted by the agent's own decisions; counts its calls per step."""

    latency_s: float = 0.0
    calls: dict[str, int] = Field(default_factory=dict)

    @property
    def _llm_type(self) -> str:
        return "decision-following"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self

    def _reply(self, messages: list[BaseMessage]) -> AIMessage:
        step = _step(messages)
        self.calls[step] = self.calls.get(step, 0) + 1
        text = _text(messages)
        found = _QUESTION.search(text)
        question = found.group(1).strip() if found else text[-300:]
        usage = {"input_tokens": len(text) // 4, "output_tokens": 20, "total_tokens": len(text) // 4 + 20}
        if step == "call_tools":
            return AIMessage(content="", usage_metadata=usage, tool_calls=[{
                "id": f"call_{uuid.uuid4().hex[:8]}", "name": "knowledge_base",
                "args": {"query": question[:300]}}])
        if step == "reformulate_query":
            block = _TRIED.search(text)
            tried = [q for q in (block.group(1).splitlines() if block else []) if q.strip()]
            return AIMessage(content=local_rewrite(question, tried), usage_metadata=usage)
        if step == "answer":
            sources = [
                Finding(source="knowledge_base", source_id=f"s{n}", title=html.unescape(title),
                        text=html.unescape(body), score=1.0)
                for n, title, body in _SOURCE.findall(text)
            ]
            draft = extractive_draft(question, sources)
            if not text.startswith(JUDGED_ANSWER_SYSTEM[:60]):
                return AIMessage(content=draft, usage_metadata=usage)
            # the sources block carries no relevance: a quotable sentence is an answer, else LOW
            level = "HIGH" if draft else "LOW"
            return AIMessage(content="", usage_metadata=usage, tool_calls=[{
                "id": f"call_{uuid.uuid4().hex[:8]}", "name": "JudgedDraft",
                "args": {"level": level, "reason": "scripted", "can_answer": bool(draft),
                         "answer": draft}}])
        return AIMessage(content="", usage_metadata=usage)

    def _generate(
        self, messages: list[BaseMessage], stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any,
    ) -> ChatResult:
        if self.latency_s:
            time.sleep(self.latency_s)
        return ChatResult(generations=[ChatGeneration(message=self._reply(messages))])

    async def _agenerate(
        self, messages: list[BaseMessage], stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None, **kwargs: Any,
    ) -> ChatResult:
        if self.latency_s:
            await asyncio.sleep(self.latency_s)
        return ChatResult(generations=[ChatGeneration(message=self._reply(messages))])
