"""The knowledge_base tool: the company's own documents, searched with calibrated relevance."""

from __future__ import annotations

import logging
import time
from datetime import date
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field, model_validator

from grounded_agent.schemas import DEFAULT_THRESHOLDS, Thresholds, ToolOutcome
from grounded_agent.tools._retry import Failure, RetryPolicy, run_with_retries
from grounded_agent.tools.base import SourceTool, default_classify, guarded

if TYPE_CHECKING:
    from grounded_agent.store.records import SearchFilters
    from grounded_agent.store.vectorstore import KnowledgeStore

log = logging.getLogger(__name__)

DESCRIPTION = """Search the organisation's own knowledge base: its product documentation, price \
lists, client contracts, service-level agreements and policies. Use it first for any question \
about the company, its products, prices, customers, contracts or rules. Returns passages with \
their document id, title, section, version and date, each with a calibrated relevance score \
in [0, 1] (higher answers the question better). Only the current version of each document is \
searched. Write `query` as a short, specific search phrase with the key names and terms of the \
question (for example "Pro plan monthly price per user"), not as a conversation. Optional \
filters: `language` (ISO code such as "en"), `doc_ids` (restrict to known document ids), \
`date_from` / `date_to` (document date range, YYYY-MM-DD)."""


class KnowledgeBaseArgs(BaseModel):
    """Arguments the model may pass to knowledge_base."""

    model_config = ConfigDict(extra="forbid")

    query: str = Field(
        min_length=1, max_length=500, description="Search phrase with the key terms."
    )
    k: int = Field(default=5, ge=1, le=10, description="How many passages to return.")
    language: str | None = Field(
        default=None, max_length=16, description="Only documents in this language (ISO code)."
    )
    doc_ids: list[str] | None = Field(
        default=None, max_length=50, description="Only these document ids."
    )
    date_from: date | None = Field(default=None, description="Documents dated on or after.")
    date_to: date | None = Field(default=None, description="Documents dated on or before.")

    @model_validator(mode="after")
    def _not_blank(self) -> KnowledgeBaseArgs:
        if not self.query.strip():
            raise ValueError("query is blank")
        if self.date_from and self.date_to and self.date_from > self.date_to:
            raise ValueError("date_from is after date_to")
        return self

    def filters(self) -> SearchFilters | None:
        from grounded_agent.store.records import SearchFilters

        if not (self.language or self.doc_ids or self.date_from or self.date_to):
            return None
        return SearchFilters(
            language=self.language,
            doc_ids=self.doc_ids,
            date_from=self.date_from,
            date_to=self.date_to,
        )


def _store_failure(exc: Exception) -> Failure:
    """A store that cannot be reached is "unavailable"; its timeouts are "timeout" (default)."""
    from grounded_agent.store.errors import StoreUnavailable

    if isinstance(exc, StoreUnavailable):
        log.info("knowledge_base unavailable: %s", exc)  # the graph warns (nodes/call_tools)
        return Failure("unavailable", False, str(exc))
    return default_classify("knowledge_base")(exc)


async def _read(
    store: KnowledgeStore,
    query: str,
    k: int,
    filters: SearchFilters | None,
    found_threshold: float,
    low_threshold: float,
) -> ToolOutcome:
    """One knowledge-base read; raises what the store raises (see `_store_failure`)."""
    started = time.perf_counter()

    def elapsed() -> float:
        return (time.perf_counter() - started) * 1000

    items = await store.asearch(query, k=k, filters=filters)
    return ToolOutcome.from_items(
        "knowledge_base",
        query,
        items,
        thresholds=Thresholds(found_threshold, low_threshold),
        elapsed_ms=elapsed(),
        ranked=True,  # the store orders by which passage answers, not by relevance alone
    )


async def search_knowledge_base(
    store: KnowledgeStore,
    query: str,
    k: int = 5,
    filters: SearchFilters | None = None,
    *,
    found_threshold: float = DEFAULT_THRESHOLDS.found,
    low_threshold: float = DEFAULT_THRESHOLDS.low,
) -> ToolOutcome:
    """One knowledge-base read as a ToolOutcome; a failed read is an error, never "no results"."""
    return await guarded(
        "knowledge_base",
        query,
        lambda: _read(store, query, k, filters, found_threshold, low_threshold),
        timeout_s=None,
        classify=_store_failure,
    )


KB_RETRY = RetryPolicy(max_retries=1, backoff_s=0.2)
"""A read that timed out is tried once more if the tool's budget still has room; a database
that refuses connections is not (it fails fast, and again)."""

def _kb_failure(exc: BaseException) -> Failure:
    from grounded_agent.store.errors import StoreUnavailable

    if isinstance(exc, StoreUnavailable):
        return Failure("unavailable", False, str(exc))
    if isinstance(exc, TimeoutError):
        return Failure("timeout", True, str(exc) or "no answer in time")
    if isinstance(exc, Exception):
        return default_classify("knowledge_base")(exc)
    raise exc


def _without_flagged(filters: SearchFilters | None) -> SearchFilters:
    from grounded_agent.store.records import SearchFilters

    return (filters or SearchFilters()).model_copy(update={"exclude_flagged": True})


def make_knowledge_base_tool(
    store: KnowledgeStore,
    *,
    timeout_s: float = 12.0,
    found_threshold: float = DEFAULT_THRESHOLDS.found,
    low_threshold: float = DEFAULT_THRESHOLDS.low,
    policy: RetryPolicy = KB_RETRY,
    exclude_flagged: bool = False,
) -> SourceTool:
    """The allow-listed knowledge_base tool bound to `store`; a timed-out read is retried by the
    shared rule (`tools._retry`) within `timeout_s`. `exclude_flagged`: documents the
    ingest-time screening flagged are never read (Context.flagged_documents)."""

    async def run(args: KnowledgeBaseArgs) -> ToolOutcome:
        # each read may take what is left of the budget (a cold first search creates the
        # schema and warms the pools); a retry happens when a timeout leaves time for one,
        # as the database's own statement timeout (query_timeout_s) does
        async def attempt(remaining: float) -> ToolOutcome:
            filters = args.filters()
            if exclude_flagged:
                filters = _without_flagged(filters)
            return await _read(store, args.query, args.k, filters, found_threshold, low_threshold)

        return await run_with_retries(
            attempt,
            classify=_kb_failure,
            policy=policy,
            budget_s=timeout_s * 0.95,  # inside the tool's own timeout
            label="knowledge_base",
        )

    return SourceTool(
        name="knowledge_base",
        description=DESCRIPTION,
        args_schema=KnowledgeBaseArgs,
        func=run,
        timeout_s=timeout_s,
        classify=_store_failure,
    )
