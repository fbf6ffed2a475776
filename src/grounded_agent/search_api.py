"""Finding documents from Python: `search` / `asearch` list a page of documents with no model call,
through the same search graph the agent runs as its search_documents node (graph/search.py).

A result's `search` holds the normalised parameters; `search(result.search, page=2)` returns the
next page. Given the `previous` result of a combined request, the next page keeps its answer
(answer, citations, confidence...) instead of computing a new one.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import date
from typing import TYPE_CHECKING, Any

from typing_extensions import TypedDict, Unpack

from grounded_agent.blocking import run_blocking
from grounded_agent.context import context_for
from grounded_agent.deps import Deps
from grounded_agent.documents import DocumentQuery, parse_query
from grounded_agent.graph.search import build_search_graph
from grounded_agent.schemas import AgentResult, InvalidQuestion
from grounded_agent.store.pages import search_fields as search_fields  # re-exported

if TYPE_CHECKING:
    from grounded_agent.store import KnowledgeStore

log = logging.getLogger(__name__)

KEPT_FROM_ANSWER = (
    "question", "status", "answer", "citations", "confidence", "attempts", "queries", "sources",
    "warnings", "coverage_limited",
)
"""What a page of a combined result keeps from the answer of its first page."""


def _query(
    text: str | DocumentQuery | Mapping[str, Any] | None, overrides: dict[str, Any]
) -> DocumentQuery:
    if isinstance(text, DocumentQuery | Mapping):
        return parse_query(text if isinstance(text, DocumentQuery) else dict(text), **overrides)
    return parse_query({"text": text}, **overrides)


class SearchOptions(TypedDict, total=False):
    """What search and asearch accept beside the text (keywords override a passed `search`)."""

    language: str | None
    date_from: date | str | None
    date_to: date | str | None
    sort: str | None
    page: int | None
    page_size: int | None
    previous: AgentResult | None
    """A combined result whose answer a later page keeps."""
    store: KnowledgeStore | None
    """Default: the default agent's store."""
    principal: str | None
    """The caller, as the application authenticated it: only the public documents and those of
    its `groups` are listed."""
    groups: list[str] | str | None
    """The principal's groups (a list or "a,b")."""


CRITERIA = ("language", "date_from", "date_to", "sort", "page", "page_size")


async def asearch(
    text: str | DocumentQuery | Mapping[str, Any] | None = None,
    **options: Unpack[SearchOptions],
) -> AgentResult:
    """One page of the active documents that match; raises InvalidQuestion for bad parameters.

    `text` is the words to find, or the `search` of an earlier result (keywords override it).
    """
    query = _query(text, {k: v for k, v in options.items() if k in CRITERIA})
    store = options.get("store")
    if store is None:  # imported here: the default agent is compiled on import
        from grounded_agent.graph.agent import default_deps

        deps = default_deps
    else:
        deps = Deps(chat_model=None, store=store)
    try:
        context = context_for(None, options.get("principal"), options.get("groups"))
    except ValueError as exc:
        raise InvalidQuestion(str(exc)) from None
    fields = await build_search_graph(deps).ainvoke(
        {"search": query.model_dump(mode="json"), "turn": {"intent": "search"}},
        context=context,
    )
    fields.pop("turn", None)  # the search's working values, not a result field
    result: dict[str, Any] = {"question": query.text or "", **fields}
    previous = options.get("previous")
    if previous is not None and previous.result_type == "combined":
        kept = previous.model_dump(mode="json", include=set(KEPT_FROM_ANSWER))
        result = {**result, **kept, "result_type": "combined"}
    return AgentResult.model_validate(result)


def search(
    text: str | DocumentQuery | Mapping[str, Any] | None = None,
    **options: Unpack[SearchOptions],
) -> AgentResult:
    """Blocking form of `asearch`, for scripts and notebooks without a running event loop."""
    return run_blocking(asearch(text, **options))
