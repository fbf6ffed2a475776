"""Wiring only: nodes, edges and limits of the grounded answer graph."""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import TYPE_CHECKING, Any

from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph

from grounded_agent.context import Context
from grounded_agent.deps import AUTO, Deps, checked_tools
from grounded_agent.graph.routing import (
    route_after_answer,
    route_after_check,
    route_after_confidence,
    route_after_draft,
    route_after_grounding,
    route_after_reformulation,
    route_after_request,
    route_after_search,
)
from grounded_agent.graph.search import build_search_graph
from grounded_agent.nodes.answer import answer
from grounded_agent.nodes.call_tools import call_tools
from grounded_agent.nodes.check_citations import check_citations
from grounded_agent.nodes.check_grounding import check_grounding
from grounded_agent.nodes.draft_answer import draft_answer
from grounded_agent.nodes.mark_coverage import mark_coverage
from grounded_agent.nodes.prepare_question import prepare_question
from grounded_agent.nodes.reformulate_query import reformulate_query
from grounded_agent.nodes.route_request import route_request
from grounded_agent.nodes.score_confidence import score_confidence
from grounded_agent.nodes.translate_answer import translate_answer
from grounded_agent.schemas import AgentResult
from grounded_agent.state import AgentState, InputState

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel
    from langgraph.types import Checkpointer

    from grounded_agent.schemas import SourceName
    from grounded_agent.store import KnowledgeStore
    from grounded_agent.tools.base import SourceTool

RECURSION_LIMIT = 20
"""Steps per run: 15 at most (routing, a document search, two attempts, draft, check,
translation, answer, the coverage note) plus slack; the attempt cap is enforced in code too."""


def build_graph(
    *,
    chat_model: BaseChatModel | str | None = AUTO,
    store: KnowledgeStore | None = None,
    tools: Mapping[SourceName, SourceTool] | None = None,
    checkpointer: Checkpointer = None,
) -> CompiledStateGraph[Any, Context, Any, Any]:
    """The graph with its parts injected; anything not passed is built on first use. A wrong
    part is a TypeError here, naming what was expected.

    chat_model: any BaseChatModel; a "provider:model" name (LangChain's init_chat_model); None
    forces offline mode; "auto" (the default) picks ChatOpenAI when OPENAI_API_KEY or
    OPENAI_BASE_URL is set (or GROUNDED_AGENT_MODEL names a provider). `store` backs the
    built-in knowledge_base. `tools` adds sources under their names (grounded_agent.sources),
    or replaces the built-in source of that name; a run searches them by default.
    """
    return compile_graph(
        Deps(chat_model=chat_model, store=store, tools=checked_tools(tools)),
        checkpointer=checkpointer,
    )


def compile_graph(
    deps: Deps, *, checkpointer: Checkpointer = None
) -> CompiledStateGraph[Any, Context, Any, Any]:
    """The wiring, over parts held in `deps` (shared by the default graph and its threads)."""
    builder = StateGraph(
        AgentState, context_schema=Context, input_schema=InputState, output_schema=AgentResult
    )
    builder.add_node("prepare_question", partial(prepare_question, deps=deps))
    builder.add_node("call_tools", partial(call_tools, deps=deps))
    builder.add_node("check_grounding", partial(check_grounding, deps=deps))
    builder.add_node("score_confidence", partial(score_confidence, deps=deps))
    builder.add_node("reformulate_query", partial(reformulate_query, deps=deps))
    builder.add_node("draft_answer", partial(draft_answer, deps=deps))
    builder.add_node("check_citations", partial(check_citations, deps=deps))
    builder.add_node("translate_answer", partial(translate_answer, deps=deps))
    builder.add_node("answer", answer)
    builder.add_node("route_request", partial(route_request, deps=deps))
    builder.add_node("search_documents", build_search_graph(deps))  # a subgraph
    builder.add_node("mark_coverage", mark_coverage)

    # validate input and start a clean turn before anything is spent
    builder.add_edge(START, "prepare_question")
    # every turn is routed: a list of documents, a question, or both
    builder.add_edge("prepare_question", "route_request")
    # a question -> the sources; a search (alone or before a question) -> the document search
    builder.add_conditional_edges("route_request", route_after_request)
    # search-and-ask with a selection -> the sources within it; otherwise the page is the result
    builder.add_conditional_edges("search_documents", route_after_search)
    # every search result is classified before anyone reads it
    builder.add_edge("call_tools", "check_grounding")
    # usable -> score; nothing usable -> rewrite once; every source failed -> answer (unavailable)
    builder.add_conditional_edges("check_grounding", route_after_grounding)
    # HIGH/MEDIUM -> draft; LOW -> rewrite if an attempt is left; NOT_RELEVANT -> answer at once
    builder.add_conditional_edges("score_confidence", route_after_confidence)
    # a new query goes back to the tools; a repeat of a tried one goes to the answer
    builder.add_conditional_edges("reformulate_query", route_after_reformulation)
    # every draft is checked before anyone reads it; an abstention has nothing to check
    builder.add_conditional_edges("draft_answer", route_after_draft)
    # the checked answer is translated only when asked for in another language than the sources'
    builder.add_conditional_edges("check_citations", route_after_check)
    builder.add_edge("translate_answer", "answer")
    # the answer ends the run; a search-and-ask answer first says how much it covered
    builder.add_conditional_edges("answer", route_after_answer)
    builder.add_edge("mark_coverage", END)
    return builder.compile(checkpointer=checkpointer, name="GroundedAgent").with_config(
        recursion_limit=RECURSION_LIMIT, metadata={SOURCES_KEY: deps.source_names()}
    )


SOURCES_KEY = "grounded_agent_sources"
"""Where a compiled graph records the sources it can search (its config's metadata)."""


def source_names_of(graph: Any) -> list[str] | None:
    """The sources a graph from build_graph can search; None for any other graph."""
    config = getattr(graph, "config", None) or {}
    names = (config.get("metadata") or {}).get(SOURCES_KEY)
    return list(names) if isinstance(names, list) else None
