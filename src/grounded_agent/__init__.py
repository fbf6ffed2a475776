"""grounded-agent: answers only from evidence it retrieved, and cites every claim to it."""

from __future__ import annotations

import os
from typing import Any

from grounded_agent.api import (
    aask,
    aingest,
    as_node,
    ask,
    astream,
    get_document,
    ingest,
    list_documents,
    remove_document,
    set_access,
)
from grounded_agent.context import Context
from grounded_agent.documents import DocumentItem, DocumentList, DocumentQuery
from grounded_agent.graph.builder import build_graph
from grounded_agent.schemas import AgentResult, Citation, Finding, InvalidQuestion, ToolOutcome
from grounded_agent.search_api import asearch, search

# ONNX Runtime (the embedding model, the offline judge) writes its telemetry session id to
# $TMPDIR/.ses unless this is set: a run leaves nothing in temporary folders. Every ONNX Runtime
# import in the package is lazy, so this line runs first.
os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")

__all__ = [
    "AgentResult",
    "Citation",
    "Context",
    "DocumentItem",
    "DocumentList",
    "DocumentQuery",
    "Finding",
    "InvalidQuestion",
    "ToolOutcome",
    "aask",
    "agent",
    "aingest",
    "as_node",
    "asearch",
    "ask",
    "astream",
    "build_graph",
    "get_document",
    "ingest",
    "list_documents",
    "remove_document",
    "search",
    "set_access",
]


def __getattr__(name: str) -> Any:
    """`agent`, the default compiled graph, is built on first access, not at import."""
    if name == "agent":
        from grounded_agent.graph.agent import agent

        return agent
    raise AttributeError(name)
