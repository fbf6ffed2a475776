"""Tool call node: choose searches (model or fixed routing), validate them, run them concurrently."""

from __future__ import annotations

import asyncio
import logging
import uuid
from datetime import date
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.runtime import Runtime
from pydantic import BaseModel, ValidationError

from grounded_agent.context import Context
from grounded_agent.deps import (
    FAILED_CALL,
    BudgetExhausted,
    Deps,
    check_budget,
    model_unavailable,
    remaining_time,
    usage_of,
)
from grounded_agent.nodes._common import ctx_of, outcomes_of, step
from grounded_agent.prompts.call_tools import CALL_TOOLS_USER
from grounded_agent.schemas import ToolOutcome
from grounded_agent.state import AgentState
from grounded_agent.tools.base import SourceTool

log = logging.getLogger(__name__)

Call = tuple[str, SourceTool, BaseModel]


def _default_args(tool: SourceTool, query: str, ctx: Context) -> BaseModel:
    """Fixed routing: the current query, and the Context's k where the tool takes one."""
    fields = tool.args_schema.model_fields
    raw: dict[str, Any] = {"query": query[:300]}
    for name in ("k", "max_results"):
        if name in fields:
            raw[name] = ctx.top_k
    try:
        return tool.validate(raw)
    except ValidationError:  # a tool with a smaller k limit: its own default then
        return tool.validate({"query": raw["query"]})


def _sources_to_query(state: AgentState, attempt: int) -> list[str]:
    """Attempt 1 asks every requested source; a re-query skips sources that failed technically."""
    requested = list(state.get("requested") or [])
    if attempt == 1:
        return requested
    failed = {o.source for o in outcomes_of(state) if o.status == "error"}
    return [s for s in requested if s not in failed]


def search_reserve(state: AgentState, ctx: Context) -> float:
    """Seconds kept for the sources after the tool-choosing call: one tool timeout, at most half
    of what is left."""
    return min(ctx.tool_timeout_s, remaining_time(state) / 2)


async def call_tools(state: AgentState, runtime: Runtime[Context], *, deps: Deps) -> dict[str, Any]:
    """Only allow-listed tools with schema-valid arguments run; everything else is recorded."""
    ctx = ctx_of(runtime)
    attempt = int(state.get("attempt") or 1)
    query = str(state.get("query") or state["question"])
    wanted = _sources_to_query(state, attempt)
    # the first call builds the default tools and loads the embedding model: not on the loop
    tools = await asyncio.to_thread(deps.available_tools, ctx, wanted)
    trail: list[dict[str, Any]] = []
    warnings: list[dict[str, Any]] = []
    usage: dict[str, int] = {}
    rejected: list[dict[str, Any]] = []
    calls: list[Call] = []
    tool_messages: list[ToolMessage] = []
    outcomes: list[tuple[str, ToolOutcome]] = []

    for name in wanted:
        if name not in tools:  # requested, but this deployment has no such tool
            outcomes.append(
                ("", ToolOutcome.error(name, query, "config", "source not configured"))  # type: ignore[arg-type]
            )

    model = deps.model(ctx)
    rounds_used = sum(
        1 for t in state.get("trail") or [] if t.get("decision") == "model_chose_tools"
    )
    ai_message: AIMessage | None = None
    if model is not None and attempt == 1 and tools and rounds_used < ctx.max_model_rounds:
        try:
            check_budget(state, ctx)
            bound = model.bind_tools([t.as_openai_tool() for t in tools.values()])
            ai_message = await asyncio.wait_for(
                bound.ainvoke(
                    [
                        SystemMessage(
                            ctx.call_tools_system_prompt.format(
                                today=date.today().isoformat(), sources=", ".join(tools)
                            )
                        ),
                        HumanMessage(
                            CALL_TOOLS_USER.format(question=state["question"], query=query)
                        ),
                    ]
                ),
                # the search itself keeps its time: a slow model must not make a source look down
                timeout=max(1.0, remaining_time(state) - search_reserve(state, ctx)),
            )
            assert isinstance(ai_message, AIMessage)
            usage = usage_of(ai_message)
            trail.append(
                step(
                    state,
                    "call_tools",
                    "model_chose_tools",
                    f"{len(ai_message.tool_calls)} tool call(s) proposed",
                )
            )
        except BudgetExhausted as exc:
            trail.append(step(state, "call_tools", "budget_exhausted", str(exc)))
            warnings.append(
                {"kind": "budget_exhausted", "detail": "model budget spent; fixed routing used"}
            )
        except Exception:
            log.warning("tool-choosing model call failed; fixed routing used", exc_info=True)
            trail.append(step(state, "call_tools", "model_failed", "fixed routing used"))
            warnings.append(
                model_unavailable(
                    "the search step", "every requested source was searched with the question"
                )
            )
            usage = dict(FAILED_CALL)
            ai_message = None

    chosen: set[str] = set()
    if ai_message is not None:
        for tc in ai_message.tool_calls:
            call_id = tc.get("id") or f"call_{uuid.uuid4().hex[:8]}"
            name = tc.get("name", "")
            reason = None
            tool = tools.get(name)  # type: ignore[call-overload]
            parsed: BaseModel | None = None
            if tool is None:
                reason = f"tool {name!r} is not allowed"
            elif name in chosen:
                reason = f"{name} was already called in this attempt"
            elif len(calls) >= ctx.max_tool_calls_per_attempt:
                reason = f"more than {ctx.max_tool_calls_per_attempt} tool calls in one attempt"
            else:
                try:
                    parsed = tool.validate(dict(tc.get("args") or {}))
                except ValidationError as exc:
                    fields = ", ".join(".".join(map(str, e["loc"])) for e in exc.errors())
                    reason = f"invalid arguments for {name}: {fields}"
            if reason is not None or tool is None or parsed is None:
                rejected.append({"name": name, "reason": reason, "attempt": attempt})
                tool_messages.append(
                    ToolMessage(
                        content=f"REJECTED: {reason}. This call was not executed.",
                        tool_call_id=call_id,
                        name=name or "unknown",
                        status="error",
                    )
                )
                trail.append(
                    step(state, "call_tools", "rejected_tool_call", reason or "", tool=name)
                )
                warnings.append({"kind": "rejected_tool_call", "detail": reason or ""})
                continue
            calls.append((call_id, tool, parsed))
            chosen.add(name)

    # every requested source is read, so the report can say what was and was not searched
    for name, tool in tools.items():
        if name in chosen:
            continue
        if len(calls) >= ctx.max_tool_calls_per_attempt:
            rejected.append({"name": name, "reason": "tool-call cap reached", "attempt": attempt})
            trail.append(
                step(state, "call_tools", "skipped_source", "tool-call cap reached", tool=name)
            )
            continue
        calls.append((f"call_{uuid.uuid4().hex[:8]}", tool, _default_args(tool, query, ctx)))

    async def run(call: Call) -> tuple[str, ToolOutcome]:
        call_id, tool, args = call
        return call_id, await tool.run(args, budget_s=remaining_time(state))

    outcomes.extend(await asyncio.gather(*(run(c) for c in calls)))
    synthetic = AIMessage(
        content="",
        tool_calls=[
            {"id": cid, "name": tool.name, "args": args.model_dump(mode="json")}
            for cid, tool, args in calls
        ],
    )
    messages: list[Any] = []
    if ai_message is not None:
        # the model's own calls plus the fixed ones it left out, as one turn of the dialog
        messages.append(
            AIMessage(
                content=ai_message.content,
                tool_calls=[
                    *ai_message.tool_calls,
                    *[
                        tc
                        for tc in synthetic.tool_calls
                        if tc["id"] not in {t.get("id") for t in ai_message.tool_calls}
                    ],
                ],
                id=ai_message.id,
            )
        )
    elif calls:
        messages.append(synthetic)
    messages.extend(tool_messages)
    for _, outcome in outcomes:
        trail.append(
            step(
                state,
                "call_tools",
                f"{outcome.source}:{outcome.status}",
                _describe(outcome),
                source=outcome.source,
                status=outcome.status,
                error_kind=outcome.error_kind,
                best_score=outcome.best_score,
                finding_count=outcome.finding_count,
                ms=round(outcome.elapsed_ms),
            )
        )
        if outcome.status == "error":
            log.warning(
                "source %s failed (%s): %s", outcome.source, outcome.error_kind, outcome.detail
            )
    update: dict[str, Any] = {
        "outcomes": [
            {**o.model_dump(mode="json", exclude={"detail"}), "attempt": attempt, "call_id": cid}
            for cid, o in outcomes
        ],
        "messages": messages,
        "queries": [query] if query not in (state.get("queries") or []) else [],
        "rejected_calls": rejected,
        "trail": trail,
        "warnings": warnings,
    }
    if usage:
        update["usage"] = usage
    return update


def _describe(outcome: ToolOutcome) -> str:
    """User-safe summary of an outcome: no error details, those go to the logs."""
    if outcome.status == "error":
        return f"{outcome.source} could not be searched ({outcome.error_kind})"
    best = outcome.best_score
    return f"{outcome.finding_count} passage(s)" + (
        f", best relevance {best:.2f}" if best is not None else ""
    )
