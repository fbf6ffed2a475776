"""Every code block of the bring-your-own how-to guides (docs/how-to) runs as a reader would run
it, in order, one namespace per page; a block that cannot run here says why in its first line
("# Not run by the tests: ...")."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.conftest import server_home

pytestmark = [pytest.mark.integration]

HOWTOS = Path(__file__).resolve().parents[2] / "docs" / "how-to"
PAGES = ["your-vector-store.md", "your-retriever.md", "langchain-postgres-table.md",
         "your-model.md", "agent-in-your-graph.md"]
BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", re.MULTILINE | re.DOTALL)
NOT_RUN = "# Not run by the tests:"


def blocks(page: str) -> list[tuple[str, str]]:
    return [(m.group(1), m.group(2)) for m in BLOCK.finditer((HOWTOS / page).read_text("utf-8"))]


@pytest.fixture(scope="module")
def my_docs_database() -> Iterator[str]:
    """The reader's own PostgreSQL with a langchain-postgres table `my_docs` made with that
    package's defaults (what the page assumes the reader has)."""
    from langchain_core.documents import Document
    from langchain_postgres import PGEngine, PGVectorStore

    from grounded_agent.store.embeddings import local_embeddings
    from grounded_agent.store.server import ensure_embedded_server

    with server_home("ga-howto-pg-") as home:
        url = ensure_embedded_server(home).replace("postgresql://", "postgresql+psycopg://", 1)
        engine = PGEngine.from_connection_string(url=url)
        engine.init_vectorstore_table(table_name="my_docs", vector_size=384)
        store = PGVectorStore.create_sync(engine=engine, table_name="my_docs",
                                          embedding_service=local_embeddings())
        store.add_documents([Document(
            page_content=f"The Zephyr Kettle costs EUR 49 in our shop. ({uuid.uuid4().hex[:6]})",
            metadata={"title": "Price list 2026", "source": "prices.md"})])
        yield url


@pytest.mark.parametrize("page", PAGES)
def test_howto_blocks_run(page: str, my_docs_database: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_DOCS_DATABASE_URL", my_docs_database)
    monkeypatch.delenv("GROUNDED_AGENT_SOURCES", raising=False)
    found = blocks(page)
    assert found, f"{page} has no code blocks"
    namespace: dict[str, object] = {"__name__": f"howto_{page}"}
    ran = 0
    for lang, code in found:
        if code.lstrip().startswith(NOT_RUN):
            continue
        assert lang == "python", f"{page}: a {lang} block without a '{NOT_RUN}' line"
        exec(compile(code, f"{page} block {ran + 1}", "exec"), namespace)
        ran += 1
    assert ran >= 1
