"""A one-node graph that reports how LangGraph Server hands the caller to a graph: what
`config["configurable"]["langgraph_auth_user"]` is and how its fields read (test_langgraph_auth)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict

from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph


class Probe(TypedDict, total=False):
    question: str
    seen: dict[str, Any]


def look(state: Probe, config: RunnableConfig) -> dict[str, Any]:
    user = config["configurable"].get("langgraph_auth_user")
    seen: dict[str, Any] = {"type": type(user).__name__, "is_none": user is None}
    if user is not None:
        seen.update(
            is_dict=isinstance(user, dict),
            is_mapping=isinstance(user, Mapping),
            identity=user.identity,
            item_groups=list(user["groups"]),
            item_sees_all=user["sees_all"],
            get_groups=list(user.get("groups") or []),
            get_sees_all=user.get("sees_all"),
            attr_groups=list(getattr(user, "groups", None) or []),
            attr_sees_all=getattr(user, "sees_all", None),
            as_dict=dict(user),
        )
    return {"seen": seen}


probe = StateGraph(Probe).add_node(look).add_edge(START, "look").add_edge("look", END).compile(
    name="probe"
)
