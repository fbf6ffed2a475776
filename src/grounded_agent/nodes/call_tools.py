"""Tool call node: the searches route_request's model call chose (checked against the allow-list,
the per-attempt cap and each tool's schema), fixed calls for the sources it left out, all run
concurrently. It asks no model: tool choice belongs to route_request alone."""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage
from langgraph.runtime import Runtime
from pydantic import BaseModel, ValidationError

from grounded_agent.context import Context
from grounded_agent.deps import Deps
from grounded_agent.llm.calls import remaining_time
from grounded_agent.nodes._common import ctx_of, outcomes_of, require_turn, step, viewer_of
from grounded_agent.nodes._scope import scope_calls
from grounded_agent.principals import reading_as
from grounded_agent.schemas import SourceName, Thresholds, ToolCallRecord, ToolOutcome
from grounded_agent.state import AgentState, turn_of
from grounded_agent.streaming import Writer, source_event
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
    requested = list(turn_of(state).get("requested") or [])
    if attempt == 1:
        return requested
    failed = {o.source for o in outcomes_of(state) if o.status == "error"}
    return [s for s in requested if s not in failed]


async def call_tools(state: AgentState, runtime: Runtime[Context], *, deps: Deps) -> dict[str, Any]:
    """Only allow-listed tools with schema-valid arguments run; everything else is recorded."""
    require_turn(state, "call_tools")
    ctx = ctx_of(runtime)
    turn = turn_of(state)
    attempt = int(turn.get("attempt") or 1)
    query = str(turn.get("query") or state["question"])
    wanted = _sources_to_query(state, attempt)
    # the first call builds the default tools and loads the embedding model: not on the loop
    tools = await asyncio.to_thread(deps.available_tools, ctx, wanted)
    outcomes: list[tuple[str, ToolOutcome]] = [
        ("", ToolOutcome.error(name, query, "config", "source not configured"))
        for name in wanted
        if name not in tools  # requested, but this deployment has no such tool
    ]
    routed = turn.get("routed_calls") if attempt == 1 else None  # a re-query: fixed calls
    ai_message = AIMessage(content="", tool_calls=routed) if routed is not None else None
    review = _Review(state, ctx, tools, attempt)
    if ai_message is not None:
        review.trail.append(
            step(state, "call_tools", "model_chose_tools",
                 f"{len(ai_message.tool_calls)} tool call(s) proposed")
        )
        review.model_calls(ai_message)
    review.fixed_calls(query)  # every requested source is read, so the report says what was
    review.calls = scope_calls(review.calls, turn.get("scope"))  # the selection, in code
    thresholds = deps.thresholds(ctx)
    write = runtime.stream_writer
    # every source reads as the caller: the knowledge base filters by its groups in SQL, and a
    # source brought by the user can read `principals.current_viewer()` to do the same
    with reading_as(viewer_of(ctx)):
        outcomes.extend(await asyncio.gather(*(_run(c, state, thresholds, write)
                                               for c in review.calls)))
    for _, outcome in outcomes:
        review.trail.append(_outcome_step(state, outcome))
    records = [
        ToolCallRecord(attempt=attempt, call_id=cid, outcome=o.model_copy(update={"detail": None}))
        for cid, o in outcomes
    ]
    changed = {"outcomes": [*(turn.get("outcomes") or []), *records],
               "rejected_calls": [*(turn.get("rejected_calls") or []), *review.rejected]}
    return {
        "turn": changed,
        "queries": [query] if query not in (state.get("queries") or []) else [],
        "trail": review.trail,
        "warnings": review.warnings,
    }


@dataclass
class _Review:
    """The calls of one attempt: the model's, checked against the allow-list, the per-attempt
    cap and each tool's schema, then the fixed calls for the sources it left out."""

    state: AgentState
    ctx: Context
    tools: dict[SourceName, SourceTool]
    attempt: int
    trail: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[dict[str, Any]] = field(default_factory=list)
    calls: list[Call] = field(default_factory=list)
    rejected: list[dict[str, Any]] = field(default_factory=list)
    chosen: set[str] = field(default_factory=set)

    def model_calls(self, ai_message: AIMessage) -> None:
        for tc in ai_message.tool_calls:
            call_id = tc.get("id") or f"call_{uuid.uuid4().hex[:8]}"
            name = tc.get("name", "")
            tool = self.tools.get(name)
            reason, parsed = self._check(name, tool, dict(tc.get("args") or {}))
            if reason is not None or tool is None or parsed is None:
                self._reject(name, reason)
                continue
            self.calls.append((call_id, tool, parsed))
            self.chosen.add(name)

    def _check(
        self, name: str, tool: SourceTool | None, args: dict[str, Any]
    ) -> tuple[str | None, BaseModel | None]:
        """Why a proposed call may not run (None: it may), and its validated arguments."""
        cap = self.ctx.max_tool_calls_per_attempt
        if tool is None:
            return f"tool {name!r} is not allowed", None
        if name in self.chosen:
            return f"{name} was already called in this attempt", None
        if len(self.calls) >= cap:
            return f"more than {cap} tool calls in one attempt", None
        try:
            return None, tool.validate(args)
        except ValidationError as exc:
            fields = ", ".join(".".join(map(str, e["loc"])) for e in exc.errors())
            return f"invalid arguments for {name}: {fields}", None

    def _reject(self, name: str, reason: str | None) -> None:
        self.rejected.append({"name": name, "reason": reason, "attempt": self.attempt})
        self.trail.append(
            step(self.state, "call_tools", "rejected_tool_call", reason or "", tool=name)
        )
        self.warnings.append({"kind": "rejected_tool_call", "detail": reason or ""})

    def fixed_calls(self, query: str) -> None:
        for name, tool in self.tools.items():
            if name in self.chosen:
                continue
            if len(self.calls) >= self.ctx.max_tool_calls_per_attempt:
                reason = "tool-call cap reached"
                self.rejected.append({"name": name, "reason": reason, "attempt": self.attempt})
                self.trail.append(
                    step(self.state, "call_tools", "skipped_source", reason, tool=name)
                )
                continue
            args = _default_args(tool, query, self.ctx)
            self.calls.append((f"call_{uuid.uuid4().hex[:8]}", tool, args))


async def _run(
    call: Call, state: AgentState, thresholds: Thresholds, write: Writer
) -> tuple[str, ToolOutcome]:
    """One call within what the question has left; the tool's own layer applies its timeout,
    turns every failure into an outcome and classifies a completed read by the run's thresholds
    (the only classification: check_grounding reads the status as it is)."""
    call_id, tool, args = call
    outcome = await tool.run(args, budget_s=remaining_time(state), thresholds=thresholds)
    # what a client is told as each source returns: its name and status, never its passages
    write(source_event(outcome.source, outcome.status, len(outcome.items), outcome.coverage))
    return call_id, outcome


def _outcome_step(state: AgentState, outcome: ToolOutcome) -> dict[str, Any]:
    # the one warning of a source outage: the layers below log theirs at INFO (for -v)
    if outcome.status == "error":
        log.warning("source %s failed (%s): %s", outcome.source, outcome.error_kind, outcome.detail)
    elif outcome.coverage == "partial":
        log.warning("source %s read in part: %s", outcome.source, outcome.detail)
    return step(
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


def _describe(outcome: ToolOutcome) -> str:
    """User-safe summary of an outcome: no error details, those go to the logs."""
    if outcome.status == "error":
        return f"{outcome.source} could not be searched ({outcome.error_kind})"
    best = outcome.best_score
    return f"{outcome.finding_count} passage(s)" + (
        f", best relevance {best:.2f}" if best is not None else ""
    )
