"""The one way a node calls the chat model.

`ask_model` checks the question's budget (calls, tokens, time), applies what is left of the time
budget as a timeout, counts usage (a call that raised counts too), and says what the node reports
when the model could not be used: the `model_unavailable` / `budget_exhausted` warnings and the
trail entries its `Fallback` asks for. Nodes only decide what to do with the reply.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, message_chunk_to_message
from langgraph.constants import TAG_NOSTREAM

from grounded_agent.context import Context
from grounded_agent.redaction import describe, redacted_traceback
from grounded_agent.state import turn_of
from grounded_agent.trail import step

log = logging.getLogger(__name__)

MAX_MODEL_CALLS = 5
"""Model calls per question, all nodes together: 2 at best, never more than this."""

MAX_CALL_S = 120.0
"""The longest one model call may take, whatever the time budget leaves."""

MIN_RESERVED_CALL_S = 1.0
"""A call that leaves time for later work (the search) still gets this much."""

INTERNAL = [TAG_NOSTREAM]
"""Tags of every model call a node makes: its raw output stays out of LangGraph's `messages`
stream (clients see the checked answer, streamed as the answer node's message)."""

NO_CHUNKS = "No generation chunks were returned"
"""What langchain-core raises when a streamed request's response held no event."""

FAILED_CALL: dict[str, int] = {"llm_calls": 1, "input_tokens": 0, "output_tokens": 0}
"""A model call that raised still counts against the call cap."""


class BudgetExhausted(Exception):
    """The question's model-call, token or time budget is spent; callers fall back to local logic."""


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


def add_usage(usage: dict[str, int], spent: Mapping[str, int]) -> None:
    for k, v in spent.items():
        usage[k] = usage.get(k, 0) + v


def remaining_time(state: Mapping[str, Any]) -> float:
    deadline = turn_of(state).get("deadline")
    return float("inf") if deadline is None else float(deadline) - time.time()


def check_budget(
    state: Mapping[str, Any], ctx: Context, spent: Mapping[str, int] | None = None
) -> None:
    """Raises BudgetExhausted when one more model call would break a limit of the question."""
    usage = dict(state.get("usage") or {})
    add_usage(usage, spent or {})
    calls = usage.get("llm_calls", 0)
    if calls >= min(MAX_MODEL_CALLS, ctx.max_model_calls):
        raise BudgetExhausted(f"model calls {calls} reached the cap")
    tokens = usage.get("input_tokens", 0) + usage.get("output_tokens", 0)
    if tokens >= ctx.token_budget:
        raise BudgetExhausted(f"token budget {ctx.token_budget} spent ({tokens})")
    if remaining_time(state) <= 0:
        raise BudgetExhausted("time budget spent")


def ai_text(message: BaseMessage) -> str:
    """The text of a model reply, whatever content shape the provider used."""
    if isinstance(message, AIMessage) and isinstance(message.content, list):
        return "".join(
            part.get("text", "") if isinstance(part, dict) else str(part)
            for part in message.content
        )
    return str(message.content)


@dataclass(frozen=True)
class Fallback:
    """What a node does when the model cannot be used, as the user and the trail are told.

    `where` set: a failed call warns `model_unavailable` ("... at {where}; {instead}").
    `budget_warning` set: a spent budget warns `budget_exhausted` with that detail.
    `trail` set: both cases add a trail entry (`budget_exhausted` with the reason, or
    `model_failed` with this detail).
    """

    node: str
    instead: str
    where: str | None = None
    budget_warning: str | None = None
    trail: str | None = None

    def report(
        self,
        state: Mapping[str, Any],
        *,
        exhausted: BudgetExhausted | None = None,
        failure: BaseException | None = None,
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """The warnings and trail entries for a call that could not be made or failed."""
        warnings: list[dict[str, Any]] = []
        trail: list[dict[str, Any]] = []
        if exhausted is not None:
            log.info("%s: no model budget left (%s); %s", self.node, exhausted, self.instead)
            if self.trail is not None:
                trail.append(step(state, self.node, "budget_exhausted", str(exhausted)))
            if self.budget_warning is not None:
                warnings.append({"kind": "budget_exhausted", "detail": self.budget_warning})
        elif failure is not None:
            log.warning("%s: model call failed (%s); %s", self.node, describe(failure), self.instead)
            log.debug("%s: model call failure\n%s", self.node, redacted_traceback(failure))
            if self.trail is not None:
                trail.append(step(state, self.node, "model_failed", self.trail))
            if self.where is not None:
                warnings.append(model_unavailable(self.where, self.instead))
        return warnings, trail


@dataclass
class ModelReply:
    """One model call: the reply, or why there is none; the usage to add; what to report."""

    message: BaseMessage | None = None
    usage: dict[str, int] = field(default_factory=dict)
    exhausted: BudgetExhausted | None = None
    failure: BaseException | None = None
    warnings: list[dict[str, Any]] = field(default_factory=list)
    trail: list[dict[str, Any]] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "" if self.message is None else ai_text(self.message)


def call_timeout(state: Mapping[str, Any], reserve: float | None = None) -> float:
    """What is left of the time budget for one call; with `reserve`, minus what later work keeps
    (but at least MIN_RESERVED_CALL_S)."""
    left = remaining_time(state)
    if left <= 0:
        raise BudgetExhausted("time budget spent")
    if reserve is not None:
        return max(MIN_RESERVED_CALL_S, left - reserve)
    return min(left, MAX_CALL_S)


async def ask_model(
    runnable: Any,
    messages: Sequence[Any],
    *,
    state: Mapping[str, Any],
    ctx: Context,
    fallback: Fallback | None = None,
    tools: Sequence[Any] | None = None,
    spent: Mapping[str, int] | None = None,
    reserve: float | None = None,
    max_tokens: int | None = None,
    on_chunk: Callable[[BaseMessage], None] | None = None,
) -> ModelReply:
    """One budgeted model call; never raises, the reply says what happened.

    `tools` are bound to the model first (a model that cannot take them fails the call), and a
    reply that writes a call of one of them as JSON text instead of a tool call is read as that
    call (`text_tool_calls`); `spent` is usage of this node not yet in state; `reserve` the
    seconds the call must leave for work after it; `max_tokens` the step's output limit (a
    reply that runs on is cut there, not at the timeout); `on_chunk` streams the reply, each
    chunk handed over as it arrives (cancelling the call closes the model's stream, so no
    further tokens are generated); `fallback` what is reported when there
    is no reply (None: nothing, the caller reports, as `structured_call` does after its last
    request). No call waits longer than Context.model_timeout_s.
    """
    try:
        check_budget(state, ctx, spent)
        timeout = min(call_timeout(state, reserve), ctx.model_timeout_s)
    except BudgetExhausted as exc:
        reply = ModelReply(exhausted=exc)
    else:
        try:
            bound = runnable if tools is None else runnable.bind_tools(list(tools))
            if max_tokens is not None:
                bound = bound.bind(max_tokens=max_tokens)
            message = await asyncio.wait_for(
                _reply(bound.with_config(tags=INTERNAL), list(messages), on_chunk), timeout=timeout)
            if tools is not None and isinstance(message, AIMessage) and not message.tool_calls:
                message = text_tool_calls(message, tool_names(tools))
            reply = ModelReply(message=message, usage=usage_of(message))
        except Exception as exc:
            reply = ModelReply(failure=exc, usage=dict(FAILED_CALL))
    if fallback is not None and reply.message is None:
        reply.warnings, reply.trail = fallback.report(
            state, exhausted=reply.exhausted, failure=reply.failure
        )
    return reply


async def _reply(
    runnable: Any, messages: list[Any], on_chunk: Callable[[BaseMessage], None] | None
) -> BaseMessage:
    """The model's reply, streamed chunk by chunk to `on_chunk` when it is given."""
    if on_chunk is None:
        message: BaseMessage = await runnable.ainvoke(messages)
        return message
    whole: Any = None
    try:
        async for chunk in runnable.astream(messages):
            whole = chunk if whole is None else whole + chunk
            on_chunk(chunk)
    except ValueError as exc:
        if whole is not None or NO_CHUNKS not in str(exc):
            raise
        # a server that ignores `stream` (one JSON body where events were asked for) is asked
        # once more the way every other call asks
        log.info("the server sent no stream (%s); asked without streaming", describe(exc))
        message = await runnable.ainvoke(messages)
        return message
    if whole is None:
        return AIMessage(content="")
    return message_chunk_to_message(whole)


def tool_names(tools: Sequence[Any]) -> list[str]:
    """The names of tools as offered to the model (OpenAI tool specs or schema classes)."""
    names: list[str] = []
    for tool in tools:
        if isinstance(tool, Mapping):
            function = tool.get("function")
            name = function.get("name") if isinstance(function, Mapping) else tool.get("name")
        else:
            name = getattr(tool, "name", None) or getattr(tool, "__name__", None)
        if isinstance(name, str) and name:
            names.append(name)
    return names


def _json_values(text: str) -> list[Any]:
    """Every JSON value in a text that starts with `{` or `[` (fenced, bare or after prose)."""
    decoder = json.JSONDecoder()
    found: list[Any] = []
    i = 0
    while i < len(text):
        start = min((p for p in (text.find("{", i), text.find("[", i)) if p != -1), default=-1)
        if start == -1:
            break
        try:
            value, end = decoder.raw_decode(text, start)
        except ValueError:
            i = start + 1
            continue
        found.append(value)
        i = end
    return found


def _as_call(obj: Any, allowed: Sequence[str]) -> dict[str, Any] | None:
    """{"name": tool, "arguments"|"parameters"|"args": {...}} naming an offered tool; the
    arguments may be a JSON string. Anything else is no call."""
    if not isinstance(obj, Mapping):
        return None
    if isinstance(obj.get("function"), Mapping):  # {"type": "function", "function": {...}}
        obj = obj["function"]
    name = obj.get("name")
    if not isinstance(name, str) or name not in allowed:
        return None
    args: Any = next((obj[k] for k in ("arguments", "parameters", "args") if k in obj), {})
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError:
            return None
    if not isinstance(args, Mapping):
        return None
    return {"name": name, "args": dict(args), "id": f"call_{uuid.uuid4().hex[:8]}",
            "type": "tool_call"}


def text_tool_calls(message: AIMessage, allowed: Sequence[str]) -> AIMessage:
    """A reply that wrote its tool calls as JSON text, as one with those tool calls.

    Servers that ignore a named `tool_choice` (llama.cpp's server) leave small models writing
    the call as text. Only objects naming one of the offered tools become calls; their arguments
    are validated by the caller as every tool call is (the allow-list and each tool's schema).
    """
    calls = []
    for value in _json_values(ai_text(message)):
        for obj in value if isinstance(value, list) else [value]:
            call = _as_call(obj, allowed)
            if call is not None:
                calls.append(call)
    if not calls:
        return message
    log.info("read %d tool call(s) written as text", len(calls))
    return AIMessage(content="", tool_calls=calls, id=message.id,
                     usage_metadata=getattr(message, "usage_metadata", None),
                     response_metadata=message.response_metadata)
