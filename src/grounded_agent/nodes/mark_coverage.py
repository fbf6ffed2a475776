"""Coverage node: says whether a combined answer rests on every matching document or on part.

An answer drawn from one page of a search, and within it from the passages the budget let in,
is not an analysis of everything that matched; `coverage_limited` and a note say so.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage
from langgraph.runtime import Runtime

from grounded_agent.context import Context
from grounded_agent.documents import DocumentList, coverage_text
from grounded_agent.nodes._common import step
from grounded_agent.state import AgentState, fresh, turn_of
from grounded_agent.streaming import final_result, result_event

ANSWERED = ("answered", "answered_with_caveat", "partial")


async def mark_coverage(state: AgentState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Limited: more documents matched than the page holds, or (for an answer) some document
    of the page gave no passage to the evidence it was written from."""
    documents = DocumentList.model_validate(state.get("documents") or {})
    page_ids = {i.doc_id for i in documents.items}
    used = {
        e.source_id for e in turn_of(state).get("evidence") or []
        if e.source == "knowledge_base" and e.source_id in page_ids
    }
    answered = state.get("status") in ANSWERED and bool(state.get("citations"))
    limited = documents.has_more or (answered and len(used) < len(page_ids))
    answer = str(state.get("answer") or "")
    if limited and answered:
        answer = f"{answer}\n\n{coverage_text(documents, len(used))}"
    elif limited:
        answer = (
            f"{answer}\n\nNote: only the {len(page_ids)} document(s) of page {documents.page} of "
            f"{documents.total_pages} ({documents.total_items} matched) were searched."
        )
    detail = f"answer drew on {len(used)} of {len(page_ids)} document(s) of the page; " + (
        f"{documents.total_items} matched in all"
    )
    update: dict[str, Any] = {
        "coverage_limited": limited,
        "answer": answer,
        "trail": [step(state, "mark_coverage", "limited" if limited else "complete", detail)],
    }
    if answer != state.get("answer"):  # the chat's message says what the answer says
        update["messages"] = fresh([AIMessage(answer)])
    runtime.stream_writer(result_event(final_result(state, update)))
    return update
