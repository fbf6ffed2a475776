"""What a user brings to build_graph: checked when the graph is built, each wrong part a
TypeError naming what was expected; documents' metadata read into citable findings; models
named `provider:model`; the grounding steps as public functions."""

from __future__ import annotations

from datetime import date
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding, Embeddings
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.retrievers import BaseRetriever
from langchain_core.tools import tool
from langchain_core.vectorstores import InMemoryVectorStore

from grounded_agent import build_graph
from grounded_agent.deps import llm_configured, named_chat_model, provider_of
from grounded_agent.errors import ModelSetupError
from grounded_agent.grounding import check_citations, extractive_answer
from grounded_agent.nodes._common import MissingStateKeys, require_turn
from grounded_agent.sources import finding_from_document, from_retriever, from_vectorstore
from tests.fakes import finding

VS = InMemoryVectorStore(DeterministicFakeEmbedding(size=8))


@tool
def lookup(query: str) -> str:
    """A LangChain tool that returns text."""
    return "text"


@pytest.mark.parametrize(
    ("tools", "expected"),
    [
        ({"my_docs": VS}, r"SourceTool, not InMemoryVectorStore; wrap it: .*from_vectorstore"),
        ({"my_docs": VS.as_retriever()}, r"SourceTool, not VectorStoreRetriever; wrap it: .*from_retriever"),
        ({"my_docs": lookup}, r"returns text the agent cannot cite"),
        ({"my_docs": "docs"}, r"tools\['my_docs'\] must be a grounded_agent SourceTool, not str"),
        (["my_docs"], r"tools must be a dict of source name to SourceTool, not list"),
    ],
    ids=["vectorstore", "retriever", "langchain-tool", "text", "list"],
)
def test_a_wrong_source_is_a_type_error_at_build_time(tools: Any, expected: str) -> None:
    with pytest.raises(TypeError, match=expected):
        build_graph(chat_model=None, tools=tools)


def test_a_source_under_another_or_a_malformed_name_is_refused() -> None:
    with pytest.raises(ValueError, match="is the source 'my_docs': give it the same name"):
        build_graph(chat_model=None, tools={"other": from_vectorstore(VS, name="my_docs")})
    with pytest.raises(ValueError, match="not a source name"):
        from_vectorstore(VS, name="my docs; drop table")
    with pytest.raises(TypeError, match="expects a langchain_core BaseRetriever, not InMemoryVectorStore"):
        from_retriever(VS, name="my_docs")  # type: ignore[arg-type]


def test_a_wrong_store_or_model_is_a_type_error_at_build_time() -> None:
    with pytest.raises(TypeError, match=r"store must be a grounded_agent KnowledgeStore.*from_vectorstore"):
        build_graph(chat_model=None, store=VS)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="chat_model must be a langchain_core BaseChatModel"):
        build_graph(chat_model=42)  # type: ignore[arg-type]


def test_negative_control_right_parts_build() -> None:
    model = GenericFakeChatModel(messages=iter([]))
    assert build_graph(chat_model=model, tools={"my_docs": from_vectorstore(VS, name="my_docs")})


def test_metadata_under_documented_keys_and_a_mapping() -> None:
    doc = Document(
        page_content="Refunds take 14 days.",
        metadata={"title": "Refunds", "section": "Timing", "page": 3, "url": "https://x.org/r",
                  "version": "2", "date": "2026-03-01", "doc_id": "refunds", "chunk_index": 4,
                  "team": "billing"},
    )
    f = finding_from_document(doc, source="my_docs")
    assert (f.source, f.source_id, f.title, f.section, f.page, f.url, f.version,
            f.document_date, f.chunk_index) == (
        "my_docs", "refunds", "Refunds", "Timing", 3, "https://x.org/r", "2",
        date(2026, 3, 1), 4)
    assert f.extra == {"team": "billing"}
    other = Document(page_content="x", metadata={"headline": "Refund rules", "link": "javascript:alert(1)"})
    g = finding_from_document(other, source="s", metadata_keys={"title": "headline"})
    assert g.title == "Refund rules" and g.url is None  # only http(s) is a URL
    with pytest.raises(ValueError, match="unknown field 'titel'"):
        finding_from_document(other, source="s", metadata_keys={"titel": "headline"})


def test_a_document_without_a_title_gets_a_readable_one() -> None:
    from_path = finding_from_document(
        Document(page_content="It holds 1.7 litres.", metadata={"source": "/kb/zephyr_kettle.md"}),
        source="s",
    )
    assert (from_path.title, from_path.source_id) == ("Zephyr kettle", "/kb/zephyr_kettle.md")
    bare = finding_from_document(
        Document(page_content="Support is open Monday to Friday from eight to six, all year."),
        source="s",
    )
    assert bare.title == "Support is open Monday to Friday from eight…"
    # two passages of one file are two findings, not one
    a = finding_from_document(Document(page_content="a", metadata={"source": "f.md"}), source="s")
    b = finding_from_document(Document(page_content="b", metadata={"source": "f.md"}), source="s")
    assert a.key != b.key


def test_provider_model_names() -> None:
    assert provider_of("anthropic:claude-sonnet-4-5") == "anthropic"
    assert provider_of("llama3:8b") is None  # an Ollama tag is part of a model's name
    assert provider_of("gpt-4o-mini") is None
    assert llm_configured("mistralai:mistral-large-latest")
    assert not llm_configured("gpt-4o-mini")  # no key, no base URL


def test_a_missing_provider_package_is_one_line_naming_it() -> None:
    pytest.importorskip("langchain")
    try:
        import langchain_anthropic  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("langchain-anthropic is installed here")
    with pytest.raises(ModelSetupError, match=r"needs the package langchain-anthropic: pip install langchain-anthropic$"):
        named_chat_model("anthropic:claude-sonnet-4-5", timeout_s=5)
    with pytest.raises(ModelSetupError, match="needs the package langchain-anthropic"):
        build_graph(chat_model="anthropic:claude-sonnet-4-5")


def test_an_openai_name_builds_a_chat_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-key")
    model = named_chat_model("openai:gpt-4o-mini", timeout_s=5)
    assert type(model).__name__ == "ChatOpenAI" and model.model_name == "gpt-4o-mini"  # type: ignore[attr-defined]


def test_the_citation_check_with_a_pluggable_judge() -> None:
    sources = [finding(source="my_docs", source_id="p", title="Prices",
                       text="The Zephyr Kettle costs EUR 49.")]
    draft = "The Zephyr Kettle costs EUR 49 [1]. It is the cheapest kettle on the market [1]. See [7]."
    checked = check_citations(draft, sources)
    assert checked.text == "The Zephyr Kettle costs EUR 49 [1]."
    assert [c.title for c in checked.citations] == ["Prices"]
    paraphrase = "A Zephyr Kettle sells for 49 euros [1]."
    assert check_citations(paraphrase, sources).text == ""  # no judge: a paraphrase is doubted
    kept = check_citations(paraphrase, sources, judge=lambda sentence, cited: True)
    assert kept.text == paraphrase
    refused = check_citations(paraphrase, sources, judge=lambda sentence, cited: False)
    assert refused.text == ""
    assert "[1]" in extractive_answer("What does the Zephyr Kettle cost?", sources)


def test_a_node_on_a_state_without_the_agents_turn_raises() -> None:
    with pytest.raises(MissingStateKeys, match="check_grounding needs the state keys turn"):
        require_turn({"question": "q"}, "check_grounding")
    require_turn({"question": "q", "turn": {"attempt": 1}}, "check_grounding")  # control


class _Docs(BaseRetriever):
    def _get_relevant_documents(self, query: str, *, run_manager: Any) -> list[Document]:
        return []


def test_a_retriever_subclass_is_accepted() -> None:
    assert from_retriever(_Docs(), name="my_docs").name == "my_docs"


def test_corpus_statistics_weigh_a_collections_everyday_words_down() -> None:
    """In a kettle shop every passage says "kettle": with the collection's statistics that word
    weighs less than the model name only some passages hold; without them, general English
    weighs them alike (the control)."""
    from grounded_agent.grounding.text import term_weights
    from grounded_agent.sources import CorpusStats

    docs = [Document(page_content=f"The {m} kettle has a {n}-litre jug.", metadata={"title": "Kettles"})
            for m, n in (("Zephyr", 1), ("Boreas", 2), ("Notus", 3), ("Eurus", 4))]
    stats = CorpusStats.from_documents(docs)
    n, dfs = stats.document_frequencies({"kettl", "zephyr", "absent"})
    assert (n, dfs) == (4, {"kettl": 4, "zephyr": 1})
    with_stats = term_weights("zephyr kettle", *stats.document_frequencies({"kettl", "zephyr"}))
    plain = term_weights("zephyr kettle")
    assert with_stats["zephyr"] / with_stats["kettl"] > plain["zephyr"] / plain["kettl"]


def test_an_in_memory_stores_own_documents_are_its_statistics() -> None:
    from grounded_agent.sources import _in_memory_corpus

    vs = InMemoryVectorStore(DeterministicFakeEmbedding(size=8))
    vs.add_documents([Document(page_content="alpha beta"), Document(page_content="alpha gamma")])
    stats = _in_memory_corpus(vs)
    assert stats is not None
    assert stats().document_frequencies({"alpha", "beta"}) == (2, {"alpha": 2, "beta": 1})
    vs.add_documents([Document(page_content="beta delta")])  # counted again when it grows
    assert stats().document_frequencies({"beta"}) == (3, {"beta": 2})
    assert _in_memory_corpus(object()) is None  # type: ignore[arg-type]


def test_passage_embeddings_are_kept_and_reused() -> None:
    from grounded_agent.sources import CachedEmbeddings

    calls: list[list[str]] = []
    fake = DeterministicFakeEmbedding(size=8)

    class Counting(Embeddings):
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            calls.append(list(texts))
            return fake.embed_documents(texts)

        def embed_query(self, text: str) -> list[float]:
            return fake.embed_query(text)

    cached = CachedEmbeddings(Counting(), size=2)
    first = cached.embed_documents(["a", "b"])
    assert cached.embed_documents(["b", "a"]) == [first[1], first[0]]
    assert calls == [["a", "b"]]  # nothing embedded twice
    cached.embed_documents(["c"])  # "b", the least recently used, leaves; "a" stays
    cached.embed_documents(["a", "b"])
    assert calls[-1] == ["b"]
    assert cached.embed_documents(["a"]) == fake.embed_documents(["a"])  # the same vectors
