"""The knowledge base: embedded or external PostgreSQL with pgvector, embeddings, ingestion."""

from grounded_agent.store.catalog import DocumentDetail, DocumentVersion, Removal
from grounded_agent.store.errors import StoreError, StoreTimeout, StoreUnavailable
from grounded_agent.store.ingest import IngestReport, aingest_paths, ingest_paths
from grounded_agent.store.relevance import CalibratedRelevance
from grounded_agent.store.settings import StoreSettings
from grounded_agent.store.vectorstore import KnowledgeStore, SearchFilters, StoreHealth, open_store

__all__ = [
    "CalibratedRelevance",
    "DocumentDetail",
    "DocumentVersion",
    "IngestReport",
    "KnowledgeStore",
    "Removal",
    "SearchFilters",
    "StoreError",
    "StoreHealth",
    "StoreSettings",
    "StoreTimeout",
    "StoreUnavailable",
    "aingest_paths",
    "ingest_paths",
    "open_store",
]
