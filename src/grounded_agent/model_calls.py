"""The one way a node calls the chat model.

`ask_model` checks the question's budget (calls, tokens, time), applies what is left of the time
budget as a timeout, counts usage (a call that raised counts too), and says what the node reports
when the model could not be used: the `model_unavailable` / `budget_exhausted` warnings and the
trail entries its `Fallback` asks for. Nodes only decide what to do with the reply.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage

from grounded_agent.context import Context
from grounded_agent.nodes._common import step
from grounded_agent.redaction import describe, redacted_traceback

log = logging.getLogger(__name__)

MAX_MODEL_CALLS = 5
"""Model calls per question, all nodes together: 2 at best, never more than this."""

MAX_CALL_S = 120.0
"""The longest one model call may take, whatever the time budget leaves."""

MIN_RESERVED_CALL_S = 1.0
"""A call that leaves time for later work (the search) still gets this much."""

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
    deadline = state.get("deadline")
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
) -> ModelReply:
    """One budgeted model call; never raises, the reply says what happened.

    `tools` are bound to the model first (a model that cannot take them fails the call);
    `spent` is usage of this node not yet in state; `reserve` the seconds the call must leave for
    work after it; `fallback` what is reported when there is no reply (None: nothing, the caller
    reports, as `structured_call` does after its last request).
    """
    try:
        check_budget(state, ctx, spent)
        timeout = call_timeout(state, reserve)
    except BudgetExhausted as exc:
        reply = ModelReply(exhausted=exc)
    else:
        try:
            bound = runnable if tools is None else runnable.bind_tools(list(tools))
            message = await asyncio.wait_for(bound.ainvoke(list(messages)), timeout=timeout)
            reply = ModelReply(message=message, usage=usage_of(message))
        except Exception as exc:
            reply = ModelReply(failure=exc, usage=dict(FAILED_CALL))
    if fallback is not None and reply.message is None:
        reply.warnings, reply.trail = fallback.report(
            state, exhausted=reply.exhausted, failure=reply.failure
        )
    return reply
