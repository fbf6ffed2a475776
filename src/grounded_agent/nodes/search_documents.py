"""Search node: one page of documents from the store, with no model call (the node of the
search graph, graph/search.py, which the agent runs as a subgraph and search_api on its own).

For a search it is the result. For a search-and-ask it fixes the selection the answer may draw
on (the page's document ids become the knowledge base's scope); an empty selection ends the run
with not_found and is never widened to the whole knowledge base.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from langgraph.runtime import Runtime

from grounded_agent.context import Context
from grounded_agent.deps import Deps
from grounded_agent.documents import DocumentQuery, no_selection_text
from grounded_agent.nodes._common import ctx_of, step, viewer_of
from grounded_agent.state import turn_of
from grounded_agent.store.pages import read_page


async def search_documents(
    state: Mapping[str, Any], runtime: Runtime[Context], *, deps: Deps
) -> dict[str, Any]:
    query = DocumentQuery.model_validate(state.get("search") or {})
    ctx = ctx_of(runtime)
    store = await asyncio.to_thread(deps.get_store)
    # a listing follows the rule answers follow: what the caller may read, flagged documents
    # left out unless the run includes them
    fields = await read_page(store, query, viewer=viewer_of(ctx),
                             exclude_flagged=ctx.flagged_documents == "exclude")
    documents = fields.get("documents") or {}
    items = list(documents.get("items") or [])
    detail = (
        f"{documents.get('total_items', 0)} document(s) matched ({query.describe()}); "
        f"{len(items)} on page {query.page}"
        if fields["status"] != "unavailable" else "the knowledge base could not be searched"
    )
    trail = [step(state, "search_documents", f"listed:{fields['status']}", detail,
                  total=documents.get("total_items"), page=query.page)]
    if turn_of(state).get("intent") != "search_and_ask":
        return {**fields, "attempts": 1, "trail": trail}
    fields["result_type"] = "combined"
    if fields["status"] == "unavailable":
        return {**fields, "attempts": 1, "trail": trail}
    if not items:
        trail.append(step(state, "search_documents", "empty_selection",
                          "no document matched: nothing is searched outside the criteria"))
        return {
            **fields, "status": "not_found", "answer": no_selection_text(query), "attempts": 1,
            "trail": trail,
        }
    scope = {
        "doc_ids": [i["doc_id"] for i in items],
        "language": query.language,
        "date_from": fields["search"].get("date_from"),
        "date_to": fields["search"].get("date_to"),
    }
    return {
        "result_type": "combined",
        "documents": documents,
        "search": fields["search"],
        "turn": {"scope": {k: v for k, v in scope.items() if v}},
        "trail": trail,
    }
