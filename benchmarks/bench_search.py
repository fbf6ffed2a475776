"""Document search benchmarks: search latency on the SQuAD knowledge base, and model calls per
intent (search, ask, search-and-ask, next page) with scripted models.

    python benchmarks/bench_search.py [--queries 300] [--kb PATH] [--json]

Part 1 ingests ../shared/eval/squad/kb_corpus.jsonl (1,204 documents) into a table of its own in
the embedded store, with deterministic fake embeddings (the document search reads no
embedding, so the model's 46 s of embedding would measure nothing), then times
`KnowledgeStore.asearch_documents` end to end (the process loop, SQL, snippets): text queries
from the corpus's titles and words, every sort, pages 1 to 3, language and date filters. It is
skipped with a message when the corpus is absent. Part 2 needs nothing but the package.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import sys
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, BaseMessage
from pydantic import BaseModel, Field

from grounded_agent import aask, asearch, build_graph
from grounded_agent.context import Context
from grounded_agent.documents import DocumentItem, DocumentList, DocumentQuery
from grounded_agent.schemas import Finding, ToolOutcome
from grounded_agent.tools.base import SourceTool

ROOT = Path(__file__).resolve().parents[1]
SQUAD_KB = ROOT.parent / "shared" / "eval" / "squad" / "kb_corpus.jsonl"


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


# --- part 1: latency on SQuAD -------------------------------------------------------------------


def _queries(kb: Path, n: int, seed: int = 7) -> list[DocumentQuery]:
    rng = random.Random(seed)
    docs = [json.loads(line) for line in kb.read_text(encoding="utf-8").splitlines() if line]
    out = []
    for i in range(n):
        doc = rng.choice(docs)
        words = [w.strip(".,;:()\"'") for w in doc["text"].split() if len(w) > 6]
        kind = i % 6
        text = None
        if kind in (0, 1):
            text = doc["title"].replace("_", " ")
        elif kind in (2, 3):
            text = rng.choice(words) if words else doc["title"]
        elif kind == 4 and len(words) > 1:
            text = " ".join(rng.sample(words, 2))
        sort = rng.choice(["newest", "oldest", "relevance"]) if text else rng.choice(
            ["newest", "oldest"])
        params: dict[str, Any] = {"text": text, "sort": sort, "page": 1 + i % 3,
                                  "page_size": rng.choice([10, 20, 50])}
        if i % 5 == 0:
            params["language"] = "en"
        if i % 7 == 0:
            params.update(date_from="2020-01-01", date_to="2026-12-31")
        out.append(DocumentQuery.model_validate(params))
    return out


async def search_latency(kb: Path, n: int) -> dict[str, Any]:
    from langchain_core.embeddings import DeterministicFakeEmbedding

    from grounded_agent.store import aingest_paths, open_store

    store = open_store(embeddings=DeterministicFakeEmbedding(size=384),
                       table_name=f"bench_docs_{uuid.uuid4().hex[:10]}")
    try:
        started = time.perf_counter()
        report = await aingest_paths([kb], store)
        ingest_s = time.perf_counter() - started
        queries = _queries(kb, n)
        for q in queries[:10]:  # warm the pool and the plan cache
            await store.asearch_documents(q)
        times, hits = [], []
        for q in queries:
            t0 = time.perf_counter()
            page = await store.asearch_documents(q)
            times.append((time.perf_counter() - t0) * 1000)
            hits.append(page.total_items)
        text_times = [t for t, q in zip(times, queries, strict=True) if q.text]
        return {
            "documents": report.documents,
            "chunks": report.chunks,
            "ingest_s": round(ingest_s, 1),
            "queries": len(times),
            "p50_ms": round(percentile(times, 50), 1),
            "p95_ms": round(percentile(times, 95), 1),
            "max_ms": round(max(times), 1),
            "text_p50_ms": round(percentile(text_times, 50), 1),
            "text_p95_ms": round(percentile(text_times, 95), 1),
            "median_matches": statistics.median(hits),
        }
    finally:
        await store.adrop()
        await store.aclose()


# --- part 2: model calls per intent -------------------------------------------------------------


class Scripted(FakeMessagesListChatModel):
    """Replies in order; counts its calls."""

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:  # type: ignore[override]
        return self


def call(name: str, args: dict[str, Any]) -> AIMessage:
    return AIMessage(content="", tool_calls=[{"id": "c1", "name": name, "args": args}])


def judged(level: str, ok: bool) -> AIMessage:
    """The draft call's reply when it also judges (the local signals left the level open)."""
    answer = str(ANSWER.content) if ok else ""
    return call("JudgedDraft", {"level": level, "can_answer": ok, "reason": "scripted",
                                "answer": answer})


TEXT = "The Pro plan costs 49 EUR per user per month. It includes priority support."


class _Args(BaseModel):
    query: str = Field(min_length=1)
    k: int = 5
    doc_ids: list[str] | None = None
    language: str | None = None


def kb_tool(score: float) -> SourceTool:
    async def run(args: _Args) -> ToolOutcome:
        items = [Finding(source="knowledge_base", source_id=d, title="Pricing", text=TEXT,
                         score=score) for d in (args.doc_ids or ["pricing"])[:2]]
        return ToolOutcome.from_items("knowledge_base", args.query, items)

    return SourceTool(name="knowledge_base", description="Search.", args_schema=_Args, func=run)


class Documents:
    def __init__(self, n: int) -> None:
        self.items = [DocumentItem(doc_id=f"d{i}", title=f"Price list {i}") for i in range(n)]

    async def asearch_documents(self, q: DocumentQuery) -> DocumentList:
        start = (q.page - 1) * q.page_size
        return DocumentList.of(self.items[start:start + q.page_size], len(self.items), q)


ANSWER = AIMessage(content="The Pro plan costs 49 EUR per user per month [1].")
SCENARIOS: dict[str, list[tuple[str, str, list[BaseMessage], float, int]]] = {
    # intent: [(name, request, scripted replies, passage relevance, matching documents)]
    "search": [
        ("valid arguments", "Find price lists", [call("search_documents", {"text": "price"})],
         0.9, 3),
        ("one refused call", "Find price lists",
         [call("search_documents", {"page": 0}), call("search_documents", {"text": "price"})],
         0.9, 3),
    ],
    "ask": [
        ("found", "What does the Pro plan cost per month?",
         [call("knowledge_base", {"query": "Pro plan price"}), ANSWER], 0.93, 3),
        ("judged", "How much is Pro?",
         [call("knowledge_base", {"query": "Pro"}), judged("HIGH", True)], 0.7, 3),
        ("low, rewritten", "How much is Pro?",
         [call("knowledge_base", {"query": "Pro"}), judged("LOW", False),
          AIMessage(content="Pro plan price"), judged("HIGH", True)], 0.7, 3),
    ],
    "search_and_ask": [
        ("found", "Find the price lists and say what Pro costs",
         [call("search_and_ask", {"text": "price", "query": "Pro plan price per month"}), ANSWER],
         0.93, 3),
        ("judged", "Find the price lists and say what Pro costs",
         [call("search_and_ask", {"text": "price", "query": "Pro"}), judged("HIGH", True)],
         0.7, 3),
        ("empty selection", "Find the 2019 price lists and say what Pro cost",
         [call("search_and_ask", {"text": "price", "query": "Pro"})], 0.9, 0),
    ],
}


async def calls_per_intent() -> dict[str, Any]:
    out: dict[str, Any] = {}
    ctx = Context(sources=["knowledge_base"])
    for intent, cases in SCENARIOS.items():
        counts = {}
        for name, request, replies, score, n_docs in cases:
            model = Scripted(responses=replies)
            graph = build_graph(chat_model=model, store=Documents(n_docs),  # type: ignore[arg-type]
                                tools={"knowledge_base": kb_tool(score)})
            result = await aask(request, graph=graph, context=ctx)
            counts[name] = result.usage.llm_calls
        out[intent] = {"per_case": counts, "mean": round(statistics.mean(counts.values()), 2),
                       "worst": max(counts.values())}
    page = await asearch(DocumentQuery(text="price", page=2, page_size=2),
                         store=Documents(3))  # type: ignore[arg-type]
    out["next_page"] = {"per_case": {"page 2": page.usage.llm_calls},
                        "mean": page.usage.llm_calls, "worst": page.usage.llm_calls}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--kb", type=Path, default=SQUAD_KB)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    report: dict[str, Any] = {}
    if args.kb.exists():
        report["latency"] = asyncio.run(search_latency(args.kb, args.queries))
    else:
        print(f"search latency skipped: {args.kb} is absent (the SQuAD knowledge base lives "
              "outside the project, in ../shared/eval/squad)", file=sys.stderr)
    report["model_calls"] = asyncio.run(calls_per_intent())
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    lat = report.get("latency")
    if lat:
        print(f"Document search on {lat['documents']} documents ({lat['chunks']} chunks), "
              f"{lat['queries']} queries: p50 {lat['p50_ms']} ms, p95 {lat['p95_ms']} ms, "
              f"max {lat['max_ms']} ms (with text: p50 {lat['text_p50_ms']} ms, "
              f"p95 {lat['text_p95_ms']} ms); median matches {lat['median_matches']}")
    print("Model calls per intent (scripted models):")
    for intent, row in report["model_calls"].items():
        cases = ", ".join(f"{k} {v}" for k, v in row["per_case"].items())
        print(f"  {intent:15s} mean {row['mean']}, worst {row['worst']}  ({cases})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
