"""Small helpers the nodes share: the run's Context, the tool outcomes in state, and the trail
entry (`step`, which lives in trail.py so that llm.calls can write one too)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langgraph.config import get_config
from langgraph.runtime import Runtime

from grounded_agent.context import (
    CLIENT_CONFIGURABLE,
    SERVER_CONFIGURABLE,
    Context,
    context_from_config,
)
from grounded_agent.grounding.extractive import extractive_draft
from grounded_agent.principals import EVERYONE, Viewer
from grounded_agent.schemas import Finding, ToolOutcome
from grounded_agent.state import turn_of
from grounded_agent.trail import step as step


def ctx_of(runtime: Runtime[Context] | None) -> Context:
    """The run's Context. Callers that pass none (LangServe passes only `config`) get one built
    from config["configurable"], limited to the keys a client may set."""
    ctx = getattr(runtime, "context", None) if runtime is not None else None
    if isinstance(ctx, Context):
        return ctx
    if isinstance(ctx, dict):
        return context_from_config(ctx)
    return context_from_config(_configurable(), allowed=CLIENT_CONFIGURABLE | SERVER_CONFIGURABLE)


def _configurable() -> dict[str, Any]:
    try:
        return dict(get_config().get("configurable") or {})
    except RuntimeError:  # outside a runnable context
        return {}


def viewer_of(ctx: Context) -> Viewer:
    """What this run's reads may return. Under LangGraph Server with the project's
    authentication (serve/langgraph_auth.py) the authenticated user decides, whatever the run's
    context says (a client may set that); elsewhere the Context's principal and groups, which the
    endpoint sets from the caller's key and a Python application from its own users."""
    user = _configurable().get("langgraph_auth_user")
    if user is not None:
        sees_all, groups = _user_field(user, "sees_all"), _user_field(user, "groups")
        if sees_all is not None or groups is not None:
            if sees_all is True:
                return EVERYONE
            identity = _user_field(user, "identity")
            return Viewer(tuple(str(g) for g in (groups or ())),
                          None if identity is None else str(identity))
    return ctx.viewer


def _user_field(user: Any, name: str) -> Any:
    """A field of LangGraph's authenticated user (a mapping or an object, by version)."""
    if isinstance(user, Mapping):
        return user.get(name)
    try:
        return user[name]
    except (KeyError, TypeError, IndexError):
        return getattr(user, name, None)


def offline_extract(draft: Mapping[str, Any], question: str, evidence: list[Finding]) -> str:
    """Offline's answer for the evidence: the extract score_confidence built for it (held in the
    draft), else built now."""
    extract = draft.get("extract")
    return extract if extract is not None else extractive_draft(question, evidence)


def nonempty(**fields: Any) -> dict[str, Any]:
    """The fields of a state update that hold something: an empty `usage` or `warnings` is left
    out rather than written."""
    return {k: v for k, v in fields.items() if v}


def outcomes_of(state: Mapping[str, Any], attempt: int | None = None) -> list[ToolOutcome]:
    """The tool outcomes in state, optionally of one attempt only."""
    return [
        r.outcome
        for r in turn_of(state).get("outcomes") or []
        if attempt is None or r.attempt == attempt
    ]


_RANK = {"found": 3, "low_relevance": 2, "not_found": 1, "error": 0}


def final_outcomes(state: Mapping[str, Any]) -> dict[str, ToolOutcome]:
    """Per source, its most informative outcome over the attempts: what the source report shows.

    A source read completely once stays read even if a later re-query fails.
    """
    best: dict[str, ToolOutcome] = {}
    for outcome in outcomes_of(state):
        held = best.get(outcome.source)
        if held is None or _RANK[outcome.status] >= _RANK[held.status]:
            best[outcome.source] = outcome
    return best


def is_repeat(query: str, tried: list[str]) -> bool:
    """A query that only differs from a tried one in case and spacing (the reformulation node
    and its outgoing edge ask the same thing)."""
    norm = " ".join(query.lower().split())
    return any(norm == " ".join(t.lower().split()) for t in tried)


class MissingStateKeys(KeyError):
    """A node of this graph run on a state that lacks the keys it reads: an error, not a run that
    writes its results to channels nobody reads."""


def require_turn(state: Mapping[str, Any], node: str) -> None:
    """`node` reads the turn prepare_question starts (and the question); in a graph whose state
    lacks them it would do nothing, silently. Use the agent as one node (grounded_agent.as_node)
    or the functions of grounded_agent.grounding there instead."""
    missing = [k for k in ("question", "turn") if not state.get(k)]
    if missing:
        raise MissingStateKeys(
            f"{node} needs the state keys {', '.join(missing)} of grounded_agent.state.AgentState; "
            "in a graph of your own, add the agent as one node (grounded_agent.as_node) or call "
            "grounded_agent.grounding's functions"
        )
