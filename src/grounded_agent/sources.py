"""Sources a user brings: any LangChain retriever or vector store as an allow-listed source.

What they return goes into `build_graph(tools={name: source})` beside the built-in sources, and
the name works wherever a source name does. Whatever score the user's store gives (a cosine, a
distance, an inner product, BM25, or none) is kept as `raw_score` only: every passage is scored
again by the agent's calibrated relevance (the shipped embedding model's cosine plus term
coverage, the scale of the built-in knowledge base), so the found and low thresholds mean the
same for every source. Its cost is one embedding of the query and of each candidate passage per
search (benchmarks/bench_sources.py prints it).
"""

from __future__ import annotations

import hashlib
import logging
import re
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from datetime import date, datetime
from typing import Any

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.retrievers import BaseRetriever
from langchain_core.vectorstores import VectorStore
from pydantic import BaseModel, ConfigDict, Field, field_validator

from grounded_agent.context import parse_sources
from grounded_agent.grounding.text import terms
from grounded_agent.principals import Viewer, current_viewer
from grounded_agent.schemas import Finding, SourceName, ToolOutcome
from grounded_agent.store.records import passage_text
from grounded_agent.store.relevance import CalibratedRelevance, TermStats
from grounded_agent.tools._retry import Failure, SourceFailure, classify_exception
from grounded_agent.tools.base import SourceTool

log = logging.getLogger(__name__)

__all__ = [
    "METADATA_KEYS",
    "CorpusStats",
    "SourceArgs",
    "SourceTool",
    "finding_from_document",
    "from_retriever",
    "from_vectorstore",
]

METADATA_KEYS: dict[str, tuple[str, ...]] = {
    "id": ("doc_id", "document_id", "id", "source"),
    "title": ("title", "document_title", "doc_title", "name"),
    "section": ("section", "heading", "header"),
    "page": ("page", "page_number"),
    "url": ("url", "source_url", "link", "source"),
    "version": ("version",),
    "document_date": ("document_date", "date", "last_modified", "updated_at", "created_at"),
    "language": ("language", "lang"),
    "chunk_index": ("chunk_index", "chunk", "start_index"),
}
"""Where a `Document`'s metadata holds what a citation shows, first key present wins. `source`
counts as a URL only when it is one (a file path is an id, and gives the title). Pass
`metadata_keys={"title": "headline"}` to read other names."""

FETCH_K_MIN = 20
"""Candidates a vector store is asked for before the calibrated re-rank keeps `k` (as the
built-in knowledge base does: the nearest by meaning is not always the passage that answers)."""

DEFAULT_TIMEOUT_S = 20.0

_URL = re.compile(r"^https?://[^\s<>\"']+$", re.IGNORECASE)
_WORDS = re.compile(r"\S+")


class SourceArgs(BaseModel):
    """Arguments the model may pass to a source the user brought."""

    model_config = ConfigDict(extra="forbid")

    query: str = Field(min_length=1, max_length=500, description="Search phrase with the key terms.")
    k: int = Field(default=5, ge=1, le=10, description="How many passages to return.")

    @field_validator("query")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("query is blank")
        return value


def _description(name: str, description: str | None) -> str:
    if description:
        return description
    return (
        f"Search {name}, a document collection of the user's own. Returns passages with their "
        "title and section, each with a calibrated relevance score in [0, 1]. Write `query` as "
        "a short, specific search phrase with the key names and terms of the question."
    )


def _checked_name(name: object) -> SourceName:
    if not isinstance(name, str):
        raise TypeError(f"name must be a str, not {type(name).__name__}")
    try:
        (checked,) = parse_sources([name])
    except ValueError as exc:
        raise ValueError(str(exc)) from None
    return checked


class CorpusStats:
    """How many passages of a user's collection hold each term (`TermStats`), counted once from
    its documents: the question's rare words (names, codes, numbers) weigh by their rarity in
    that collection, as they do in the built-in knowledge base. Without it, rarity is general
    English's, and a collection's everyday words (every passage of a kettle shop says "kettle")
    weigh as much as its names (benchmarks/bench_sources.py measures both)."""

    def __init__(self, frequencies: Mapping[str, int], passages: int) -> None:
        self._df = dict(frequencies)
        self.passages = passages

    @classmethod
    def from_documents(
        cls,
        documents: Iterable[Document | str],
        *,
        metadata_keys: Mapping[str, str | Sequence[str]] | None = None,
    ) -> CorpusStats:
        """Counts each passage's terms once (title and section included, as they are searched)."""
        keys = _keys(metadata_keys)
        counts: Counter[str] = Counter()
        n = 0
        for doc in documents:
            if isinstance(doc, str):
                text = doc
            else:
                meta = doc.metadata or {}
                title = next((str(meta[k]) for k in keys["title"] if meta.get(k)), None)
                section = next((str(meta[k]) for k in keys["section"] if meta.get(k)), None)
                text = passage_text(title, section, doc.page_content)
            counts.update(set(terms(text)))
            n += 1
        return cls(counts, n)

    def document_frequencies(self, wanted: Collection[str]) -> tuple[int, dict[str, int]]:
        return self.passages, {t: self._df[t] for t in wanted if self._df.get(t)}

    async def adocument_frequencies(self, wanted: Collection[str]) -> tuple[int, dict[str, int]]:
        return self.document_frequencies(wanted)


def _in_memory_corpus(vectorstore: VectorStore) -> Callable[[], CorpusStats] | None:
    """For a langchain_core InMemoryVectorStore, its own documents, counted again whenever their
    number changes; None for any other store (pass `corpus=` there)."""
    from langchain_core.vectorstores import InMemoryVectorStore

    if not isinstance(vectorstore, InMemoryVectorStore):
        return None
    held: list[tuple[int, CorpusStats]] = []

    def stats() -> CorpusStats:
        size = len(vectorstore.store)
        if not held or held[0][0] != size:
            docs = [Document(page_content=str(v.get("text", "")), metadata=v.get("metadata") or {})
                    for v in list(vectorstore.store.values())]
            held[:] = [(size, CorpusStats.from_documents(docs))]
        return held[0][1]

    return stats


class _LiveStats:
    """TermStats read from a factory at each search (a store whose documents change)."""

    def __init__(self, factory: Callable[[], CorpusStats]) -> None:
        self._factory = factory

    def document_frequencies(self, wanted: Collection[str]) -> tuple[int, dict[str, int]]:
        return self._factory().document_frequencies(wanted)

    async def adocument_frequencies(self, wanted: Collection[str]) -> tuple[int, dict[str, int]]:
        import asyncio

        return await asyncio.to_thread(self._factory().document_frequencies, wanted)


def _stats_of(
    corpus: Iterable[Document | str] | CorpusStats | None,
    keys: Mapping[str, str | Sequence[str]] | None,
    live: Callable[[], CorpusStats] | None = None,
) -> TermStats | None:
    if isinstance(corpus, CorpusStats):
        return corpus
    if corpus is not None:
        return CorpusStats.from_documents(corpus, metadata_keys=keys)
    return _LiveStats(live) if live is not None else None


def from_retriever(
    retriever: BaseRetriever,
    *,
    name: str,
    description: str | None = None,
    metadata_keys: Mapping[str, str | Sequence[str]] | None = None,
    corpus: Iterable[Document | str] | CorpusStats | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    relevance: CalibratedRelevance | None = None,
    access_filter: AccessFilter | None = None,
) -> SourceTool:
    """Any LangChain `BaseRetriever` as a source named `name`. The retriever decides which
    documents come back; the agent scores and orders them and keeps the `k` it was asked for.
    `corpus`: the collection's documents (or `CorpusStats`), so question terms weigh by their
    rarity there (see `CorpusStats`). A retriever that raises or takes longer than `timeout_s`
    gives an error outcome with its kind, never "nothing found". `access_filter(viewer)`: the
    keyword arguments that limit the retriever to what the caller may read (a vector store's
    retriever takes `filter=...`), called for every caller who does not see everything; without
    it the source is public."""
    if not isinstance(retriever, BaseRetriever):
        raise TypeError(
            f"from_retriever expects a langchain_core BaseRetriever, not {type(retriever).__name__}"
        )
    source = _checked_name(name)
    keys = _keys(metadata_keys)

    async def search(args: SourceArgs) -> list[Document]:
        return list(await retriever.ainvoke(args.query, **_access_kwargs(access_filter)))

    stats = _stats_of(corpus, metadata_keys)
    return _source(source, description, search, keys, timeout_s, relevance, stats=stats)


def from_vectorstore(
    vectorstore: VectorStore,
    *,
    name: str,
    description: str | None = None,
    k: int = 5,
    fetch_k: int | None = None,
    metadata_keys: Mapping[str, str | Sequence[str]] | None = None,
    search_kwargs: Mapping[str, Any] | None = None,
    corpus: Iterable[Document | str] | CorpusStats | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    relevance: CalibratedRelevance | None = None,
    access_filter: AccessFilter | None = None,
) -> SourceTool:
    """Any LangChain `VectorStore` as a source named `name`: `fetch_k` nearest passages (default
    four times `k`, at least 20), re-ranked by the agent's calibrated relevance, at most `k`
    kept (fewer where the run or the model asks for fewer). `search_kwargs` go to the store's search as they are (a
    `filter`, say). `corpus`: the collection's documents (or `CorpusStats`) for the rarity of
    question terms; an InMemoryVectorStore's own documents are counted without it. Works
    read-only on a langchain-postgres table made with its defaults. `access_filter(viewer)`:
    search keyword arguments (a `filter`) that keep the store to what the caller may read, merged
    over `search_kwargs` for every caller who does not see everything; without it the source is
    public."""
    if not isinstance(vectorstore, VectorStore):
        raise TypeError(
            f"from_vectorstore expects a langchain_core VectorStore, not {type(vectorstore).__name__}"
        )
    if not 1 <= int(k) <= 10:
        raise ValueError("k must be between 1 and 10")
    source = _checked_name(name)
    keys = _keys(metadata_keys)
    extra = dict(search_kwargs or {})

    async def search(args: SourceArgs) -> list[Document]:
        n = fetch_k or max(min(args.k, int(k)) * 4, FETCH_K_MIN)
        kwargs = {**extra, **_access_kwargs(access_filter)}
        try:
            scored = await vectorstore.asimilarity_search_with_score(args.query, k=n, **kwargs)
        except NotImplementedError:
            return list(await vectorstore.asimilarity_search(args.query, k=n, **kwargs))
        return [_with_raw_score(doc, score) for doc, score in scored]

    stats = _stats_of(corpus, metadata_keys, _in_memory_corpus(vectorstore))
    return _source(source, description, search, keys, timeout_s, relevance, limit=int(k),
                   stats=stats)


AccessFilter = Callable[[Viewer], Mapping[str, Any]]
"""The search keyword arguments that limit a user's store to what a viewer may read."""


def _access_kwargs(access_filter: AccessFilter | None) -> dict[str, Any]:
    """What the run's caller adds to the search: nothing for one who sees everything or where
    the source has no access filter (it is public). A filter that fails raises, so the source
    reports an error rather than reading unfiltered."""
    viewer = current_viewer()
    if access_filter is None or viewer.sees_all:
        return {}
    return dict(access_filter(viewer))


def _with_raw_score(doc: Document, score: Any) -> Document:
    try:
        raw = float(score)
    except (TypeError, ValueError):
        return doc
    return Document(
        page_content=doc.page_content, metadata={**doc.metadata, "_raw_score": raw}, id=doc.id
    )


def _source(
    name: SourceName,
    description: str | None,
    search: Callable[[SourceArgs], Any],
    keys: Mapping[str, tuple[str, ...]],
    timeout_s: float,
    relevance: CalibratedRelevance | None,
    *,
    limit: int = 10,
    stats: TermStats | None = None,
) -> SourceTool:
    scorer: list[CalibratedRelevance] = [relevance] if relevance is not None else []

    def relevance_model() -> CalibratedRelevance:
        if not scorer:  # the shipped embedding model, loaded on the first search
            from grounded_agent.store.embeddings import local_embeddings

            scorer.append(CalibratedRelevance(CachedEmbeddings(local_embeddings()), stats=stats))
        return scorer[0]

    async def run(args: SourceArgs) -> ToolOutcome:
        started = time.perf_counter()
        docs = await search(args)
        if not isinstance(docs, list) or not all(isinstance(d, Document) for d in docs):
            raise SourceFailure(Failure("bad_response", False, "the source returned no Documents"))
        findings = await _scored(
            name, args.query, [d for d in docs if d.page_content.strip()], keys, relevance_model()
        )
        return ToolOutcome.from_items(
            name,
            args.query,
            findings[: min(args.k, limit)],
            elapsed_ms=(time.perf_counter() - started) * 1000,
            ranked=True,  # best answer first, by the calibrated re-rank
        )

    return SourceTool(
        name=name,
        description=_description(name, description),
        args_schema=SourceArgs,
        func=run,
        timeout_s=timeout_s,
        classify=_classify(name),
    )


async def _scored(
    name: SourceName,
    query: str,
    docs: Sequence[Document],
    keys: Mapping[str, tuple[str, ...]],
    relevance: CalibratedRelevance,
) -> list[Finding]:
    """Findings from documents, best answer first, on the calibrated scale."""
    unique: dict[str, Finding] = {}
    for doc in docs:
        finding = finding_from_document(doc, source=name, metadata_keys=keys)
        unique.setdefault(finding.key, finding)
    found = list(unique.values())
    passages = [passage_text(f.title, f.section, f.text) for f in found]
    return [
        found[i].model_copy(update={"score": min(1.0, max(0.0, score))})
        for i, score in await relevance.arank(query, passages)
    ]


def finding_from_document(
    doc: Document,
    *,
    source: str,
    metadata_keys: Mapping[str, str | Sequence[str]] | None = None,
    score: float = 0.0,
) -> Finding:
    """A LangChain `Document` as a citable finding: id, title, section, page, URL, version,
    date, language and chunk from its metadata (`METADATA_KEYS`, or `metadata_keys`); a
    document without a title gets one from its file name or its first words."""
    keys = _keys(metadata_keys)
    meta = dict(doc.metadata or {})

    def pick(field: str) -> Any:
        for key in keys[field]:
            value = meta.get(key)
            if value not in (None, ""):
                return value
        return None

    url = _url(pick("url"))
    doc_id = _text(pick("id")) or (str(doc.id) if doc.id else None) or url or _digest(doc.page_content)
    used = {k for f in keys.values() for k in f}
    return Finding(
        source=source,
        source_id=doc_id[:1000],
        title=_text(pick("title")) or _readable_title(doc_id, doc.page_content),
        text=doc.page_content,
        section=_text(pick("section")),
        version=_text(pick("version")),
        page=_int(pick("page")),
        url=url,
        document_date=_date(pick("document_date")),
        language=_text(pick("language")),
        chunk_index=_chunk(pick("chunk_index"), doc.page_content),
        score=min(1.0, max(0.0, score)),
        raw_score=_float(meta.get("_raw_score")),
        extra={
            k: v for k, v in meta.items()
            if k not in used and k != "_raw_score" and isinstance(v, str | int | float | bool)
        },
    )


def _keys(overrides: Mapping[str, str | Sequence[str]] | None) -> dict[str, tuple[str, ...]]:
    keys = dict(METADATA_KEYS)
    for field, given in (overrides or {}).items():
        if field not in keys:
            raise ValueError(f"metadata_keys: unknown field {field!r}; known: {', '.join(keys)}")
        keys[field] = (given,) if isinstance(given, str) else tuple(given)
    return keys


def _text(value: Any) -> str | None:
    if value is None:
        return None
    text = " ".join(str(value).split())
    return text[:500] or None


def _int(value: Any) -> int | None:
    try:
        number = int(value)
    except (TypeError, ValueError):
        return None
    return number if 0 <= number < 1_000_000 else None


def _float(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) else None


def _url(value: Any) -> str | None:
    text = str(value).strip() if value is not None else ""
    return text if _URL.match(text) and len(text) <= 2000 else None


def _date(value: Any) -> date | None:
    if isinstance(value, datetime):
        return value.date()
    if isinstance(value, date):
        return value
    if isinstance(value, str):
        try:
            return date.fromisoformat(value.strip()[:10])
        except ValueError:
            return None
    return None


def _digest(text: str) -> str:
    return "doc-" + hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()[:16]


def _chunk(value: Any, text: str) -> int:
    """The passage's place in its document; without one, a number from its text, so two
    passages of one document never count as the same finding."""
    number = _int(value)
    if number is not None:
        return number
    return int(hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()[:7], 16)


def _readable_title(doc_id: str, text: str) -> str:
    """A file name made readable ("/docs/zephyr_kettle.md" -> "Zephyr kettle"), else the
    passage's first words."""
    stem = re.split(r"[\\/]", doc_id.rstrip("/\\"))[-1]
    stem = re.sub(r"\.[A-Za-z0-9]{1,5}$", "", stem)
    words = re.sub(r"[_\-.]+", " ", stem).strip()
    if words and not doc_id.startswith("doc-") and not re.fullmatch(r"[0-9a-f\- ]{16,}", words):
        return words[:1].upper() + words[1:120]
    first = _WORDS.findall(text)[:8]
    return (" ".join(first) + ("…" if len(_WORDS.findall(text)) > 8 else ""))[:120] or "Untitled"


def _classify(name: str) -> Callable[[Exception], Failure]:
    """A user's source failed: which kind, from the exception (the detail goes to the logs)."""

    def classify(exc: Exception) -> Failure:
        failure = _failure(exc)
        # an outage is warned once by the graph (nodes/call_tools); a bug here, with its cause
        level = logging.ERROR if failure.kind == "unknown" else logging.INFO
        log.log(level, "source %s failed (%s): %s", name, failure.kind, type(exc).__name__)
        return failure

    return classify


def _failure(exc: Exception) -> Failure:
    if isinstance(exc, SourceFailure):
        return exc.failure
    if isinstance(exc, TimeoutError):
        return Failure("timeout", True, "the source did not answer in time")
    if isinstance(exc, PermissionError):
        return Failure("auth", False, type(exc).__name__)
    if isinstance(exc, ConnectionError):
        return Failure("unavailable", True, type(exc).__name__)
    failure = classify_exception(exc)
    if failure.kind != "unknown":
        return failure
    from grounded_agent.store.errors import StoreTimeout, map_error

    mapped = map_error(exc, "source")  # the database errors of a user's SQL-backed store
    if mapped is None:
        return failure
    return Failure("timeout" if isinstance(mapped, StoreTimeout) else "unavailable", False,
                   type(exc).__name__)


class CachedEmbeddings(Embeddings):
    """The shipped model with the passages it embedded kept (by text, the most recent
    `size`): a user's source returns the same passages for a question's attempts and for
    related questions, and embedding them is most of what rescoring costs."""

    def __init__(self, inner: Embeddings, size: int = 4096) -> None:
        self._inner = inner
        self._size = size
        self._kept: OrderedDict[str, list[float]] = OrderedDict()
        import threading

        self._lock = threading.Lock()

    def embed_query(self, text: str) -> list[float]:
        return self._inner.embed_query(text)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        with self._lock:
            missing = [t for t in dict.fromkeys(texts) if t not in self._kept]
        fresh = self._inner.embed_documents(missing) if missing else []
        with self._lock:
            for t, vec in zip(missing, fresh, strict=True):
                self._kept[t] = vec
            for t in texts:
                if t in self._kept:
                    self._kept.move_to_end(t)
            found = {t: self._kept.get(t) for t in texts}
            while len(self._kept) > self._size:
                self._kept.popitem(last=False)
        done = dict(zip(missing, fresh, strict=True))
        return [found[t] or done[t] for t in texts]
