"""The knowledge base's scope, enforced on every call: a search-and-ask's selected document ids,
or the router's language and date filters. Applied in code to whatever arguments a call has, so
no tool call (the model's or a fixed one, on any attempt) searches outside it."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ValidationError

from grounded_agent.tools.base import SourceTool

log = logging.getLogger(__name__)

SCOPED_SOURCE = "knowledge_base"
SCOPE_KEYS = ("doc_ids", "language", "date_from", "date_to")


def scope_calls(
    calls: list[tuple[str, SourceTool, BaseModel]], scope: Mapping[str, Any] | None
) -> list[tuple[str, SourceTool, BaseModel]]:
    """The calls with the scope written over their knowledge-base arguments. A knowledge-base
    tool whose arguments cannot carry the scope is not called at all: an unscoped search would
    answer from documents outside the selection."""
    wanted = {k: v for k, v in (scope or {}).items() if k in SCOPE_KEYS and v}
    if not wanted:
        return calls
    out = []
    for call_id, tool, args in calls:
        if tool.name != SCOPED_SOURCE:
            out.append((call_id, tool, args))
            continue
        missing = [k for k in wanted if k not in tool.args_schema.model_fields]
        if missing:
            log.error("knowledge_base takes no %s: the scoped call is not made", ", ".join(missing))
            continue
        try:
            out.append((call_id, tool, tool.validate({**args.model_dump(), **wanted})))
        except ValidationError as exc:
            log.error("scope does not fit the knowledge_base arguments: %s",
                      exc.errors(include_input=False))
    return out
