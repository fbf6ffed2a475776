"""One page of a document search as result fields: the same for the Python API, the CLI, the
endpoint and the graph's search node, so each of them reads pages through here."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from grounded_agent.documents import DocumentList, DocumentQuery, listing_text
from grounded_agent.untrusted.display import shown_documents

if TYPE_CHECKING:
    from grounded_agent.principals import Viewer
    from grounded_agent.store import KnowledgeStore

log = logging.getLogger(__name__)


def search_fields(
    query: DocumentQuery, documents: DocumentList | None, error_kind: str | None = None
) -> dict[str, Any]:
    """The result fields of a document search (a page, or a failed read): the same for the
    Python API, the CLI, the endpoint and the graph's search node."""
    norm = query.normalised()
    if documents is None:
        kind = error_kind or "unknown"
        return {
            "result_type": "search",
            "status": "unavailable",
            "answer": "The knowledge base could not be searched "
            f"({kind}); nothing is known about which documents match.",
            "documents": None,
            "search": norm.model_dump(mode="json"),
            "sources": [{"source": "knowledge_base", "status": "error",
                         "coverage": "unavailable", "error_kind": kind, "finding_count": None}],
        }
    # titles and snippets are the documents' text: neutralised like every answer (display.py)
    documents = DocumentList.model_validate(shown_documents(documents.model_dump(mode="json")))
    return {
        "result_type": "search",
        "status": "answered" if documents.total_items else "not_found",
        "answer": listing_text(norm, documents),
        "documents": documents.model_dump(mode="json"),
        "search": norm.model_dump(mode="json"),
        "sources": [{"source": "knowledge_base",
                     "status": "found" if documents.total_items else "not_found",
                     "coverage": "complete", "error_kind": None,
                     "finding_count": documents.total_items}],
    }


def error_kind_of(exc: Exception) -> str:
    """A store failure as an error kind a user may see (the detail goes to the log)."""
    from grounded_agent.store.errors import StoreTimeout

    log.warning("document search failed: %s", exc)
    return "timeout" if isinstance(exc, StoreTimeout | TimeoutError) else "unavailable"


async def read_page(
    store: KnowledgeStore,
    query: DocumentQuery,
    *,
    viewer: Viewer | None = None,
    exclude_flagged: bool = False,
) -> dict[str, Any]:
    """One page as result fields; a store that fails gives `unavailable`, never an empty page."""
    from grounded_agent.store.errors import StoreError

    try:
        documents = await store.asearch_documents(
            query, viewer=viewer, exclude_flagged=exclude_flagged
        )
    except (StoreError, TimeoutError) as exc:
        return search_fields(query, None, error_kind_of(exc))
    return search_fields(query, documents)
