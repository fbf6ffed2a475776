"""Sources a user brings (grounded_agent.sources): a LangChain vector store, its retriever, and a
langchain-postgres table made with that package's defaults in another PostgreSQL, each as a
named source of the offline agent, with the shipped embeddings. Real parts throughout: the
stores, the embedding model, the database; nothing is mocked."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.retrievers import BaseRetriever
from langchain_core.vectorstores import InMemoryVectorStore
from langgraph.graph import END, START, MessagesState, StateGraph
from typing_extensions import TypedDict

from grounded_agent import InvalidQuestion, aask, as_node, build_graph
from grounded_agent.sources import from_retriever, from_vectorstore
from grounded_agent.store.embeddings import local_embeddings
from tests.fakes import ScriptedSource, not_found
from tests.integration.conftest import server_home

pytestmark = [pytest.mark.integration]

DOCS = [
    Document(
        page_content="The Zephyr Kettle holds 1.7 litres and boils a full jug in under four "
        "minutes. Its base has a 360-degree connector and an automatic shut-off.",
        metadata={"source": "manuals/zephyr_kettle.md", "section": "Specifications"},
    ),
    Document(
        page_content="The Zephyr Kettle costs EUR 49 in our shop; the matching Zephyr Toaster "
        "costs EUR 59.",
        metadata={"title": "Price list 2026", "source": "prices/price_list.md", "version": "3",
                  "date": "2026-01-15"},
    ),
    Document(
        page_content="Parking at the Lumen office is free for the first 90 minutes. After that, "
        "each started hour costs EUR 2.50.",
        metadata={"title": "Office parking", "source": "office/parking.md"},
    ),
    Document(
        page_content="The support desk is open Monday to Friday from 8:00 to 18:00 CET and can "
        "be reached by phone at +49 30 1234567.",
        metadata={"title": "Support hours", "url": "https://example.org/support"},
    ),
]

ANSWERABLE = [
    ("How much does the Zephyr Kettle cost?", "EUR 49", "Price list 2026"),
    ("How many litres does the Zephyr Kettle hold?", "1.7 litres", "Zephyr kettle"),
    ("When is the support desk open?", "8:00 to 18:00", "Support hours"),
]
OFF_TOPIC = ["Who won the football world cup in 1998?", "What is the boiling point of mercury?"]


@pytest.fixture(scope="module")
def embeddings() -> Embeddings:
    """The user's own embedding function: here the shipped model, as a user might pick it."""
    return local_embeddings()


@pytest.fixture(scope="module")
def vectorstore(embeddings: Embeddings) -> InMemoryVectorStore:
    vs = InMemoryVectorStore(embeddings)
    vs.add_documents(DOCS)
    return vs


async def _check_answers(graph: Any, source: str) -> None:
    for question, expected, title in ANSWERABLE:
        result = await aask(question, graph=graph)
        assert result.status == "answered", (question, result.answer)
        assert expected in result.answer, (question, result.answer)
        assert [c.title for c in result.citations] == [title]
        assert {c.source for c in result.citations} == {source}
        assert [(s.source, s.status) for s in result.sources] == [(source, "found")]
    for question in OFF_TOPIC:
        result = await aask(question, graph=graph)
        assert result.status == "not_found", (question, result.answer)
        assert not result.citations
        assert [(s.source, s.coverage) for s in result.sources] == [(source, "complete")]


async def test_a_vector_store_is_a_named_source(vectorstore: InMemoryVectorStore) -> None:
    graph = build_graph(chat_model=None, tools={"my_docs": from_vectorstore(vectorstore, name="my_docs")})
    await _check_answers(graph, "my_docs")


async def test_its_retriever_is_a_named_source(vectorstore: InMemoryVectorStore) -> None:
    source = from_retriever(vectorstore.as_retriever(search_kwargs={"k": 4}), name="handbook")
    await _check_answers(build_graph(chat_model=None, tools={"handbook": source}), "handbook")


async def test_the_name_works_as_any_source_name(vectorstore: InMemoryVectorStore) -> None:
    """Named in ask's sources, beside a built-in one, each with its own report; a name the
    graph does not have is refused with the names it has."""
    graph = build_graph(
        chat_model=None,
        tools={
            "my_docs": from_vectorstore(vectorstore, name="my_docs"),
            "wikipedia": ScriptedSource("wikipedia", [not_found("wikipedia")]).tool(),
        },
    )
    result = await aask("How much does the Zephyr Kettle cost?", graph=graph,
                        sources=["my_docs", "wikipedia"])
    assert {s.source: s.status for s in result.sources} == {"my_docs": "found",
                                                             "wikipedia": "not_found"}
    assert "EUR 49" in result.answer
    with pytest.raises(InvalidQuestion, match=r"unknown source.*'intranet'.*my_docs"):
        await aask("How much does the Zephyr Kettle cost?", graph=graph, sources=["intranet"])


async def test_a_price_question_the_documents_do_not_price_abstains(embeddings: Embeddings) -> None:
    """Issue 45: without the price list, nothing states what the kettle costs; the kettle's
    passage shares every key term and holds figures (1.7 litres, four minutes, a 360-degree
    connector), none of them money, so the offline agent abstains, while the capacity question
    on the same passage is still answered (control)."""
    vs = InMemoryVectorStore(embeddings)
    vs.add_documents([d for d in DOCS if d.metadata.get("source") != "prices/price_list.md"])
    graph = build_graph(chat_model=None, tools={"my_docs": from_vectorstore(vs, name="my_docs")})
    cost = await aask("How much does the Zephyr Kettle cost?", graph=graph)
    assert cost.status not in ("answered", "answered_with_caveat", "partial"), cost.answer
    assert "360-degree" not in (cost.answer or "") and not cost.citations
    litres = await aask("How many litres does the Zephyr Kettle hold?", graph=graph)
    assert litres.status == "answered", litres.answer
    assert "1.7 litres" in litres.answer


class _Broken(BaseRetriever):
    """A user's retriever whose backend is down, or hangs."""

    error: Any = None
    delay_s: float = 0.0

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        raise NotImplementedError  # only the async path is used

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
    ) -> list[Document]:
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        if self.error is not None:
            raise self.error
        return DOCS[:1]


@pytest.mark.parametrize(
    ("retriever", "kind"),
    [
        (_Broken(error=ConnectionRefusedError("connection refused")), "unavailable"),
        (_Broken(error=PermissionError("403")), "auth"),
        (_Broken(error=RuntimeError("index corrupt")), "unknown"),
        (_Broken(delay_s=5.0), "timeout"),
    ],
    ids=["refused", "denied", "bug", "hangs"],
)
async def test_a_retriever_that_fails_is_an_error_never_not_found(
    retriever: _Broken, kind: str
) -> None:
    graph = build_graph(
        chat_model=None, tools={"my_docs": from_retriever(retriever, name="my_docs", timeout_s=0.5)}
    )
    result = await aask("How much does the Zephyr Kettle cost?", graph=graph)
    (report,) = result.sources
    assert (report.status, report.error_kind, report.coverage) == ("error", kind, "unavailable")
    assert report.finding_count is None
    assert result.status == "unavailable"
    assert "could not be searched" in result.answer
    assert "index corrupt" not in result.answer and "refused" not in result.answer


async def test_negative_control_a_working_retriever_reports_complete() -> None:
    """The same retriever without its fault: found with complete coverage, so the test above
    would fail if a failure were reported as an empty read."""
    graph = build_graph(chat_model=None, tools={"my_docs": from_retriever(_Broken(), name="my_docs")})
    result = await aask("How many litres does the Zephyr Kettle hold?", graph=graph)
    assert [(s.status, s.coverage) for s in result.sources] == [("found", "complete")]


async def test_a_users_source_reads_as_the_caller(vectorstore: InMemoryVectorStore) -> None:
    """access_filter gets the run's caller (groups and principal) and its filter runs inside the
    store's search; a caller who sees everything is not filtered; a filter that fails is the
    source's error, never an unfiltered or an empty read."""
    seen: list[Any] = []

    def only_prices(viewer: Any) -> dict[str, Any]:
        seen.append(viewer)
        allowed = "sales" in (viewer.groups or ())
        return {"filter": lambda doc: allowed or "price" not in doc.metadata.get("source", "")}

    graph = build_graph(chat_model=None, tools={"my_docs": from_vectorstore(
        vectorstore, name="my_docs", access_filter=only_prices)})
    question = "How much does the Zephyr Kettle cost?"
    sales = await aask(question, graph=graph, principal="bob", groups=["sales"])
    assert "EUR 49" in (sales.answer or "")
    legal = await aask(question, graph=graph, principal="alice", groups=["legal"])
    assert "EUR 49" not in legal.model_dump_json()
    assert "Price list 2026" not in [c.title for c in legal.citations]
    assert [(v.principal, v.groups) for v in seen] == [("bob", ("sales",)), ("alice", ("legal",))]
    everyone = await aask(question, graph=graph)
    assert "EUR 49" in (everyone.answer or "") and len(seen) == 2  # not asked: sees everything

    def broken(viewer: Any) -> dict[str, Any]:
        raise RuntimeError("the directory service is down")

    graph = build_graph(chat_model=None, tools={"my_docs": from_vectorstore(
        vectorstore, name="my_docs", access_filter=broken)})
    failed = await aask(question, graph=graph, principal="bob", groups=["sales"])
    assert [(s.status, s.coverage) for s in failed.sources] == [("error", "unavailable")]
    assert "directory service" not in failed.model_dump_json()


@pytest.fixture(scope="module")
def other_postgres() -> Iterator[str]:
    """Another PostgreSQL than the agent's (its own data directory and server)."""
    from grounded_agent.store.server import ensure_embedded_server

    with server_home("ga-other-pg-") as home:
        yield ensure_embedded_server(home)


@pytest.fixture
async def langchain_postgres_table(
    other_postgres: str, embeddings: Embeddings
) -> AsyncIterator[Any]:
    """A table made by langchain-postgres with its defaults, filled by langchain-postgres."""
    from langchain_postgres import PGEngine, PGVectorStore

    url = other_postgres.replace("postgresql://", "postgresql+psycopg://", 1)
    engine = PGEngine.from_connection_string(url=url)
    table = f"user_docs_{uuid.uuid4().hex[:8]}"
    await engine.ainit_vectorstore_table(table_name=table, vector_size=384)
    store = await PGVectorStore.create(engine=engine, table_name=table, embedding_service=embeddings)
    await store.aadd_documents(DOCS)
    yield store
    await engine.adrop_table(table)
    await engine.close()


async def test_an_existing_langchain_postgres_table_is_a_source(langchain_postgres_table: Any) -> None:
    """Read-only, without the project's columns, terms table or full-text index."""
    source = from_vectorstore(langchain_postgres_table, name="pg_docs")
    await _check_answers(build_graph(chat_model=None, tools={"pg_docs": source}), "pg_docs")


class _UserState(TypedDict, total=False):
    query: str
    reply: str
    verdict: str
    refs: list[dict[str, Any]]
    after: str


async def test_the_agent_inside_a_users_state_graph(vectorstore: InMemoryVectorStore) -> None:
    """Status, answer and citations land in the user's own keys; the user's next node reads them."""
    agent = build_graph(chat_model=None, tools={"my_docs": from_vectorstore(vectorstore, name="my_docs")})

    def after(state: _UserState) -> dict[str, str]:
        return {"after": f"{state['verdict']}: {len(state['refs'])} source(s)"}

    builder = StateGraph(_UserState)
    builder.add_node("ground", as_node(agent, question_key="query", answer_key="reply",
                                       status_key="verdict", citations_key="refs"))
    builder.add_node("after", after)
    builder.add_edge(START, "ground")
    builder.add_edge("ground", "after")
    builder.add_edge("after", END)
    out = await builder.compile().ainvoke({"query": "How much does the Zephyr Kettle cost?"})
    assert "EUR 49" in out["reply"] and out["verdict"] == "answered"
    assert [r["title"] for r in out["refs"]] == ["Price list 2026"]
    assert out["after"] == "answered: 1 source(s)"

    chat = StateGraph(MessagesState)
    chat.add_node("ground", as_node(agent, question_key="messages", answer_key="messages",
                                    status_key=None, citations_key=None))
    chat.add_edge(START, "ground")
    chat.add_edge("ground", END)
    msgs = (await chat.compile().ainvoke({"messages": [("user", "When is the support desk open?")]}))
    assert msgs["messages"][-1].type == "ai" and "8:00 to 18:00" in msgs["messages"][-1].text

    with pytest.raises(KeyError, match="'question'"):
        await as_node(agent).ainvoke({"query": "x"})


async def test_a_store_with_other_embeddings_is_scored_on_the_same_scale() -> None:
    """The user's store embeds with a function of its own (here one that knows no meaning at
    all); its scores are not the agent's: every passage is scored again by the calibrated
    relevance, so the same questions are answered and the same off-topic ones declined."""
    from langchain_core.embeddings import DeterministicFakeEmbedding

    vs = InMemoryVectorStore(DeterministicFakeEmbedding(size=64))
    vs.add_documents(DOCS)
    graph = build_graph(chat_model=None, tools={"my_docs": from_vectorstore(vs, name="my_docs")})
    await _check_answers(graph, "my_docs")
