"""Structured output across OpenAI-compatible servers: function calling, json_schema or JSON text.

Servers differ in what they accept: OpenAI takes both tools and `response_format` json_schema; vLLM
without a tool parser refuses tools; Ollama refuses tools for many models; others ignore both and
reply with text. So the method is chosen in code, per call:

1. function calling (the schema as the one tool, `tool_choice` naming it): what the agent has
   always sent, and what most servers with tools support;
2. `response_format` json_schema, when the server refused the tool (a 400, 422 or 501, or
   another 4xx/5xx whose message names a part of the request; see `_refused`);
3. plain text with a JSON instruction, when json_schema was refused too, when a reply carried
   no structure at all (the server ignored the tool or the format), or when a reply to the tool
   request carried no tool call: a server that ignores a named `tool_choice` (llama.cpp's) leaves
   a small model writing text, often a call of the dialog's earlier tool, and the same request
   again gets the same text back.

Whatever comes back is read leniently: a tool call of the schema, a call whose arguments are not
valid JSON, a JSON object in the content (bare, in a code fence, after prose, or wrapped as
{"name": ..., "arguments": ...}); enum values case-insensitively. A method that worked after
another was refused or ignored is remembered per endpoint and model, so later questions start
there.

Every request goes through `model_calls.ask_model`: it counts as one model call against the
question's budget, refused or not, and is made only when the budget allows it. A reply that
cannot be read is retried at most once (PARSE_TRIES); a technical failure (429, 5xx, timeout, a
malformed body) ends the attempt at once: a broken service is not asked again.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import typing
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.utils.function_calling import convert_to_openai_function
from pydantic import BaseModel, ValidationError

from grounded_agent.context import Context
from grounded_agent.llm.calls import BudgetExhausted, add_usage, ai_text, ask_model, check_budget

log = logging.getLogger(__name__)

Method = Literal["function_calling", "json_schema", "json_text"]
METHODS: tuple[Method, ...] = ("function_calling", "json_schema", "json_text")

PARSE_TRIES = 2
"""Replies that could not be read before the call gives up (the caller then decides, e.g. LOW)."""

MAX_CALLS = 3
"""Requests one structured call may make, refusals included; the question's cap still applies."""

REFUSED_STATUS = frozenset({400, 422, 501})
"""HTTP statuses that mean "this request shape is not supported here", not "the service failed"."""

OUTAGE_STATUS = frozenset({401, 403, 404, 408, 429, 502, 503, 504})
"""Statuses that say the service cannot serve now, whatever the request's shape."""

_REQUEST_PARTS = ("response_format", "json_schema", "json_object", "tool_choice", "tools",
                  "tool_call", "function", "grammar", "schema", "messages", "content")
"""Words of an error message that name a part of the request, so another shape may work."""

_NOT_A_METHOD_PROBLEM = ("context length", "context_length", "maximum context", "too many tokens",
                         "prompt is too long", "contextoverflow")

M = TypeVar("M", bound=BaseModel)

# langchain-openai warns on a refused json_schema and advises function calling: this module has
# tried that already and falls back on its own, so the advice would only mislead in the logs
warnings.filterwarnings(
    "ignore", message="This model does not support OpenAI's structured output", category=UserWarning
)


@dataclass
class StructuredResult(Generic[M]):
    """What a structured call produced; exactly one of parsed / failure / exhausted, or none of
    them when every reply was unreadable."""

    parsed: M | None = None
    method: Method | None = None
    failure: BaseException | None = None
    """The service failed technically (429, 5xx, timeout, malformed body): not asked again."""
    exhausted: BudgetExhausted | None = None
    """The question's model budget did not allow the next request."""
    calls: int = 0
    tried: list[str] = field(default_factory=list)
    """Per request: method and what happened (parsed, refused, no_structure, invalid, failed)."""


# --- which method to start with, per endpoint and model -----------------------------------------

_START: dict[tuple[str, str, str], Method] = {}
_START_LOCK = threading.Lock()
_START_MAX = 64


def _endpoint_key(model: Any) -> tuple[str, str, str] | None:
    """(class, base URL, model name) for models that talk to an endpoint; None for others (test
    doubles), whose capabilities are not remembered."""
    base = getattr(model, "openai_api_base", None)
    name = getattr(model, "model_name", None) or getattr(model, "model", None)
    if base is None and name is None:
        return None
    return (type(model).__name__, str(base or ""), str(name or ""))


def start_method(model: Any) -> Method:
    key = _endpoint_key(model)
    if key is None:
        return METHODS[0]
    with _START_LOCK:
        return _START.get(key, METHODS[0])


def _keep(memory: dict[Any, Any], key: Any, value: Any) -> None:
    """One entry learnt about an endpoint, the oldest forgotten past _START_MAX."""
    with _START_LOCK:
        memory.pop(key, None)
        memory[key] = value
        while len(memory) > _START_MAX:
            memory.pop(next(iter(memory)))


def remember_method(model: Any, method: Method) -> None:
    key = _endpoint_key(model)
    if key is not None:
        _keep(_START, key, method)


_PLAIN: dict[tuple[str, str, str, str], None] = {}
"""(endpoint, schema) pairs whose structured replies could not be read and where the caller
asked in its own plain shape instead (the judged draft's free-text answer: nodes/_judged.py)."""


def plain_first(model: Any, schema: type[BaseModel]) -> bool:
    """The caller should ask this endpoint in its plain shape at once: structured replies of this
    schema could not be read there before."""
    key = _endpoint_key(model)
    with _START_LOCK:
        return key is not None and (*key, schema.__name__) in _PLAIN


def remember_plain(model: Any, schema: type[BaseModel]) -> None:
    key = _endpoint_key(model)
    if key is not None:
        _keep(_PLAIN, (*key, schema.__name__), None)


def forget_methods() -> None:
    """Forgets what was learnt about every endpoint (tests)."""
    with _START_LOCK:
        _START.clear()
        _PLAIN.clear()


# --- lenient reading ----------------------------------------------------------------------------

_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)


def _json_objects(text: str) -> list[Any]:
    """JSON objects in a text: the whole text, fenced blocks, then each balanced {...} span."""
    found: list[Any] = []
    candidates = [text.strip(), *(m.strip() for m in _FENCE.findall(text))]
    for c in candidates:
        try:
            found.append(json.loads(c))
        except ValueError:
            continue
    if found:
        return found
    decoder = json.JSONDecoder()
    i = text.find("{")
    while i != -1:
        try:
            obj, end = decoder.raw_decode(text, i)
        except ValueError:
            i = text.find("{", i + 1)
            continue
        found.append(obj)
        i = text.find("{", end)
    return found


_SCHEMA_KEYS = frozenset({"properties", "description", "title", "type", "required"})


def _same_name(written: Any, name: str) -> bool:
    """A name as a model wrote it: small models change its case or separators
    ("confidenceJudgement", "confidence_judgement")."""
    return isinstance(written, str) and _name_key(written) == _name_key(name)


def _name_key(name: str) -> str:
    return re.sub(r"[\W_]+", "", name).lower()


def _unwrap(obj: Any, name: str) -> Any:
    """{"name": X, "arguments": {...}} or {X: {...}} as written by models imitating a tool call."""
    if isinstance(obj, list) and len(obj) == 1:
        obj = obj[0]
    if not isinstance(obj, dict):
        return obj
    if len(obj) == 1:
        (key, inner), = obj.items()
        if _same_name(key, name) and isinstance(inner, dict):
            return inner
    if isinstance(obj.get("properties"), dict) and set(obj) <= _SCHEMA_KEYS:
        # the values written in the shape of the JSON schema the instruction showed
        return obj["properties"]
    for key in ("arguments", "parameters", "args"):
        inner = obj.get(key)
        named = obj.get("name")
        if (named is None or _same_name(named, name)) and isinstance(inner, dict) and len(obj) <= 3:
            return inner
        if isinstance(inner, str) and _same_name(named, name):
            try:
                return json.loads(inner)
            except ValueError:
                return obj
    return obj


def _literal_values(annotation: Any) -> tuple[str, ...]:
    if typing.get_origin(annotation) is Literal:
        return tuple(v for v in typing.get_args(annotation) if isinstance(v, str))
    return ()


def _coerce(schema: type[BaseModel], data: Mapping[str, Any]) -> dict[str, Any]:
    """Enum-like string fields matched case- and separator-insensitively ("not relevant")."""
    out = dict(data)
    for name, info in schema.model_fields.items():
        choices = _literal_values(info.annotation)
        value = out.get(name)
        if choices and isinstance(value, str) and value not in choices:
            key = re.sub(r"[\s\-]+", "_", value.strip()).upper()
            match = [c for c in choices if c.upper() == key]
            if match:
                out[name] = match[0]
    return out


@dataclass
class _Reading(Generic[M]):
    parsed: M | None = None
    structure: bool = False  # something shaped like an answer came back, valid or not
    error: str = ""


def _validate(schema: type[M], obj: Any) -> _Reading[M]:
    obj = _unwrap(obj, schema.__name__)
    if not isinstance(obj, dict):
        return _Reading(structure=True, error="not a JSON object")
    try:
        return _Reading(schema.model_validate(_coerce(schema, obj)), structure=True)
    except ValidationError as exc:
        return _Reading(structure=True, error=f"invalid: {exc.error_count()} error(s)")


def read_structured(message: BaseMessage, schema: type[M]) -> _Reading[M]:
    """The schema's object in a reply, wherever the server put it."""
    name = schema.__name__
    reading: _Reading[M] = _Reading()
    if isinstance(message, AIMessage):
        calls = [tc for tc in message.tool_calls if _same_name(tc.get("name"), name)]
        for tc in calls or message.tool_calls:
            reading = _validate(schema, tc.get("args") or {})
            if reading.parsed is not None:
                return reading
        for bad in message.invalid_tool_calls:
            raw_args = bad.get("args") or ""
            for obj in _json_objects(raw_args) if isinstance(raw_args, str) else []:
                reading = _validate(schema, obj)
                if reading.parsed is not None:
                    return reading
            reading = _Reading(structure=True, error="tool call arguments are not JSON")
        parsed = message.additional_kwargs.get("parsed")
        if parsed is not None:
            got = _validate(schema, parsed.model_dump() if isinstance(parsed, BaseModel) else parsed)
            if got.parsed is not None:
                return got
    for obj in _json_objects(ai_text(message)):
        got = _validate(schema, obj)
        if got.parsed is not None or not reading.structure:
            reading = got
        if got.parsed is not None:
            return got
    return reading


# --- the call -----------------------------------------------------------------------------------


def _calls_a_tool(message: BaseMessage) -> bool:
    """The reply is a tool call (valid or not), not text: the server took the tool."""
    return isinstance(message, AIMessage) and bool(message.tool_calls or message.invalid_tool_calls)


def _refused(exc: BaseException) -> bool:
    """The server refused the request's shape (tools, response_format): another method may work.

    A 400, 422 or 501 says so by its status; any other 4xx or 5xx only when its message names a
    part of the request (llama-cpp-python answers a json_schema it does not take with a 500
    "only 'text' or 'json_object'"). A 503, a gateway error, a rate limit or an auth failure
    names the service's state, not the request: an outage, not asked again.
    """
    if isinstance(exc, NotImplementedError):
        return True
    status = getattr(exc, "status_code", None)
    if status is None:
        status = getattr(getattr(exc, "response", None), "status_code", None)
    if not isinstance(status, int):
        return False
    text = f"{type(exc).__name__} {exc}".lower()
    if any(k in text for k in _NOT_A_METHOD_PROBLEM):
        return False
    if status in REFUSED_STATUS:
        return True
    if status in OUTAGE_STATUS or not 400 <= status < 600:
        return False
    said = _error_message(exc).lower()
    return any(k in said for k in _REQUEST_PARTS)


def _error_message(exc: BaseException) -> str:
    """What the server said, without the JSON envelope around it (whose keys would name
    "message" and "type" in every error)."""
    body = getattr(exc, "body", None)
    error = body.get("error", body) if isinstance(body, Mapping) else body
    if isinstance(error, Mapping):
        return str(error.get("message") or error.get("detail") or "")
    if isinstance(error, str):
        return error
    return str(exc)


def json_instruction(schema: type[BaseModel]) -> str:
    return (
        "Reply with one JSON object and nothing else (no prose, no code fence), with exactly "
        f"these fields, following this JSON schema:\n{json.dumps(schema.model_json_schema())}"
    )


def _with_instruction(messages: Sequence[BaseMessage], schema: type[BaseModel]) -> list[BaseMessage]:
    """The JSON instruction joined to the last user message (some chat templates refuse two user
    turns in a row)."""
    out = list(messages)
    note = json_instruction(schema)
    if out and isinstance(out[-1], HumanMessage) and isinstance(out[-1].content, str):
        out[-1] = HumanMessage(f"{out[-1].content}\n\n{note}")
    else:
        out.append(HumanMessage(note))
    return out


def _runnable(model: Any, schema: type[BaseModel], method: Method) -> Any:
    if method == "function_calling":
        return model.bind_tools([schema], tool_choice=schema.__name__)
    if method == "json_schema":
        function = convert_to_openai_function(schema)
        return model.bind(
            response_format={
                "type": "json_schema",
                "json_schema": {
                    "name": function["name"],
                    "description": function.get("description", ""),
                    "schema": function["parameters"],
                    "strict": False,
                },
            }
        )
    return model


async def structured_call(
    model: Any,
    schema: type[M],
    messages: Sequence[BaseMessage],
    *,
    state: Mapping[str, Any],
    ctx: Context,
    usage: dict[str, int],
    parse_tries: int = PARSE_TRIES,
    max_calls: int = MAX_CALLS,
    max_tokens: int | None = None,
    on_chunk: Callable[[BaseMessage], None] | None = None,
) -> StructuredResult[M]:
    """One structured judgement from `model`, whatever the server supports.

    `usage` is the caller's running count for this node: each request adds one call (and its
    tokens when it returned), and the budget is checked against it before every request.
    `max_tokens` the reply's limit (a judgement's by default; a judged draft's is longer);
    `on_chunk` streams each request's reply (model_calls.ask_model).
    """
    result: StructuredResult[M] = StructuredResult()
    first = start_method(model)
    method: Method = first
    unreadable = 0
    while result.calls < max_calls:
        try:  # before the method is chosen, so a spent budget records no "not_offered" step
            check_budget(state, ctx, usage)
        except BudgetExhausted as exc:
            result.exhausted = exc
            return result
        prompt = _with_instruction(messages, schema) if method == "json_text" else list(messages)
        try:
            runnable = _runnable(model, schema, method)
        except NotImplementedError:  # the client itself offers no such method: nothing was sent
            result.tried.append(f"{method}:not_offered")
            method = METHODS[METHODS.index(method) + 1]
            continue
        reply = await ask_model(runnable, prompt, state=state, ctx=ctx, spent=usage,
                                max_tokens=max_tokens or ctx.judgement_max_tokens,
                                on_chunk=on_chunk)
        if reply.exhausted is not None:
            result.exhausted = reply.exhausted
            return result
        result.calls += 1
        add_usage(usage, reply.usage)
        if reply.message is None:
            nxt = METHODS.index(method) + 1
            if reply.failure is not None and _refused(reply.failure) and nxt < len(METHODS):
                log.info("structured output: %s refused (%s); trying %s", method,
                         type(reply.failure).__name__, METHODS[nxt])
                result.tried.append(f"{method}:refused")
                method = METHODS[nxt]
                continue
            result.tried.append(f"{method}:failed")
            result.failure = reply.failure
            return result
        reading = read_structured(reply.message, schema)
        if reading.parsed is not None:
            result.tried.append(f"{method}:parsed")
            result.parsed, result.method = reading.parsed, method
            if method != first:
                remember_method(model, method)
            return result
        unreadable += 1
        result.tried.append(f"{method}:{'invalid' if reading.structure else 'no_structure'}")
        log.warning("structured output via %s could not be read (%d of %d): %s", method,
                    unreadable, parse_tries, reading.error or "no JSON and no tool call")
        if unreadable >= parse_tries:
            return result
        ignored_tool = method == "function_calling" and not _calls_a_tool(reply.message)
        if (ignored_tool or not reading.structure) and method != "json_text":
            # the server ignored the tool or the format: ask in words, the most portable way
            # (the same request again would get the same text back)
            method = "json_text"
    return result
