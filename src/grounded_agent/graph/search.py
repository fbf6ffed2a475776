"""The document search as its own graph: one page of documents from the store, no model.

The agent runs it as its `search_documents` node (a subgraph) for a search or a search-and-ask;
`search` / `asearch` (the Python API, the CLI, the endpoint's page requests) run the same graph
on its own. One path, one contract: `result_type`, and the next page from a result's `search`
without a model call.
"""

from __future__ import annotations

from functools import partial
from typing import Annotated, Any

from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from typing_extensions import TypedDict

from grounded_agent.context import Context
from grounded_agent.deps import Deps
from grounded_agent.nodes.search_documents import search_documents
from grounded_agent.state import Turn, extend_or_reset, merge_turn


class SearchInput(TypedDict, total=False):
    """What a search reads: the parameters (a DocumentQuery as JSON) and what they are for."""

    search: dict[str, Any] | None
    turn: Annotated[Turn, merge_turn]
    """The asking turn: its intent (search or search_and_ask) and run id."""


class SearchOutput(TypedDict, total=False):
    """A page as result fields; for a search-and-ask with a selection, the scope instead of an
    answer (the agent's question answering goes on within it)."""

    result_type: str
    status: str
    answer: str
    documents: dict[str, Any] | None
    search: dict[str, Any] | None
    sources: list[dict[str, Any]]
    turn: Annotated[Turn, merge_turn]
    """The turn with the scope a search-and-ask answers within."""
    attempts: int
    trail: Annotated[list[dict[str, Any]], extend_or_reset]


class SearchState(SearchInput, SearchOutput, total=False):
    """Input and output: the search graph has no working state of its own."""


def build_search_graph(deps: Deps) -> CompiledStateGraph[Any, Context, Any, Any]:
    """The search graph over `deps`' store (its input and output schemas are the contract)."""
    builder = StateGraph(
        SearchState, context_schema=Context, input_schema=SearchInput, output_schema=SearchOutput
    )
    builder.add_node("search_documents", partial(search_documents, deps=deps))
    # one page from the store; a search-and-ask's selection becomes the scope
    builder.add_edge(START, "search_documents")
    builder.add_edge("search_documents", END)
    return builder.compile(name="DocumentSearch")
