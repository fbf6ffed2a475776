"""The Python API: ask / aask return the public AgentResult; astream shows progress per node, or
(mode="events") the checked answer sentence by sentence as it forms."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from langchain_core.runnables import Runnable, RunnableConfig
from langgraph.graph.state import CompiledStateGraph
from typing_extensions import TypedDict, Unpack

from grounded_agent.blocking import run_blocking
from grounded_agent.context import Context, context_for, parse_sources
from grounded_agent.inputs import MAX_DOC_ID_CHARS as DOC_ID_LIMIT
from grounded_agent.principals import Viewer, parse_groups, principal_named
from grounded_agent.schemas import (
    AgentResult,
    InvalidQuestion,
    validate_language,
    validate_question,
    validate_text_id,
)
from grounded_agent.streaming import own_task

if TYPE_CHECKING:
    from grounded_agent.store import (
        DocumentDetail,
        DocumentVersion,
        IngestReport,
        KnowledgeStore,
        Removal,
    )

Graph = CompiledStateGraph[Any, Any, Any, Any]


class AskOptions(TypedDict, total=False):
    """What ask, aask, arun and astream accept beside the question."""

    sources: list[str] | str | None
    """Sources to search: built-in (knowledge_base, wikipedia, web) or brought to build_graph;
    default: Context.sources, else the graph's own."""
    language: str | None
    """Language of the answer; default: the question's."""
    context: Context | None
    """Per-run settings (models, thresholds, limits); default: Context()."""
    graph: Graph | None
    """A graph from build_graph; default: the package's `agent`."""
    thread_id: str | None
    """Conversation thread: follow-up questions see the earlier turns (checkpointed)."""
    principal: str | None
    """The caller, as the application authenticated it: a thread belongs to the principal that
    started it (the same thread_id from another principal is another thread), and it reads the
    public documents and those of its `groups` only."""
    groups: list[str] | str | None
    """The principal's groups (a list or "a,b"): documents whose access names one of them are
    read too. Groups without a principal read the same way."""


def _context(options: Mapping[str, Any]) -> Context:
    """The run's Context, with the principal and groups the application gave."""
    try:
        return context_for(
            options.get("context"), options.get("principal"), options.get("groups")
        )
    except ValueError as exc:
        raise InvalidQuestion(str(exc)) from None


def _inputs(question: str, options: AskOptions) -> dict[str, Any]:
    """Validates before any model or tool call, so bad input costs nothing and loses nothing."""
    # every input key is set, None included: in a thread, a key left out would keep the
    # previous turn's value (and `sources` then holds that turn's per-source reports)
    payload: dict[str, Any] = {
        "question": validate_question(question), "sources": None, "language": None
    }
    sources = options.get("sources")
    if sources is not None:  # an empty list is a mistake to report, not a request for defaults
        try:
            payload["sources"] = list(parse_sources(sources))
        except ValueError as exc:
            raise InvalidQuestion(str(exc)) from exc
    payload["language"] = validate_language(options.get("language"))
    if options.get("thread_id") is not None:
        validate_text_id(options.get("thread_id"), "thread_id")
    return payload


def _thread(options: AskOptions) -> str | None:
    """The thread to run on: the caller's own where the application names its principal."""
    thread_id, principal = options.get("thread_id"), options.get("principal")
    if not thread_id or principal is None:
        return thread_id
    try:
        return principal_named(principal).thread(thread_id)
    except ValueError as exc:
        raise InvalidQuestion(str(exc)) from None


def _config(thread_id: str | None) -> RunnableConfig:
    return {"configurable": {"thread_id": thread_id}} if thread_id else {}


@asynccontextmanager
async def _graph_for(graph: Graph | None, thread_id: str | None) -> AsyncIterator[Graph]:
    """The graph to run. A thread on the default graph gets a checkpointed copy on the store's
    database, opened in this event loop (the saver's pool cannot cross loops); a caller's own
    graph is used as given, with whatever checkpointer it was compiled with."""
    if graph is not None:
        yield graph
        return
    from grounded_agent.graph.agent import agent, default_deps

    if not thread_id:
        yield agent
        return
    from grounded_agent.checkpoint import open_checkpointer
    from grounded_agent.graph.builder import compile_graph

    async with open_checkpointer(store=default_deps.get_store()) as saver:
        yield compile_graph(default_deps, checkpointer=saver)


async def aask(question: str, **options: Unpack[AskOptions]) -> AgentResult:
    """Answers one question; raises InvalidQuestion for input the agent refuses."""
    return await arun(question, **options)


def ask(question: str, **options: Unpack[AskOptions]) -> AgentResult:
    """Blocking form of `aask`, for scripts and notebooks without a running event loop."""
    return run_blocking(arun(question, **options))


async def arun(
    question: str,
    *,
    on_step: Callable[[str, dict[str, Any]], None] | None = None,
    on_event: Callable[[dict[str, Any]], None] | None = None,
    **options: Unpack[AskOptions],
) -> AgentResult:
    """`aask` that reports each node's update to `on_step` as it happens (CLI progress), and each
    event of the run (streaming.py: a checked sentence, ...) to `on_event`."""
    payload = _inputs(question, options)
    thread_id = _thread(options)
    context = _context(options)  # a bad principal or group: refused before anything runs
    final: dict[str, Any] = {}
    async with _graph_for(options.get("graph"), thread_id) as g:
        async for mode, chunk in g.astream(
            payload,
            config=_config(thread_id),
            context=context,
            stream_mode=["updates", "values", "custom"],
        ):
            if mode == "values" and isinstance(chunk, dict):
                final = dict(chunk)
            elif mode == "custom":
                if on_event is not None and isinstance(chunk, dict):
                    on_event(chunk)
            elif on_step is not None and isinstance(chunk, dict):
                for node, update in chunk.items():
                    on_step(node, dict(update or {}))
    return AgentResult.model_validate(final)


StreamMode = Literal["updates", "events"]


async def astream(
    question: str, *, mode: StreamMode = "updates", **options: Unpack[AskOptions]
) -> AsyncIterator[tuple[str, dict[str, Any]]]:
    """mode="updates": yields (node, update) as each node finishes; the last update is the
    answer node's (or mark_coverage's). mode="events": yields (kind, event) as the run goes on,
    what a chat client shows: ("source", ...) as each source returns, ("sentence", ...) for each
    sentence of the answer once it is checked, with its citations (while the model still writes
    the next), ("removed", ...) saying how many the check removed, and last ("result", ...) whose
    "result" is the AgentResult as JSON. No raw draft, passage or prompt is ever yielded."""
    payload = _inputs(question, options)
    thread_id = _thread(options)
    context = _context(options)
    async with _graph_for(options.get("graph"), thread_id) as g:
        run = g.astream(
            payload,
            config=_config(thread_id),
            context=context,
            stream_mode=["custom", "values"] if mode == "events" else ["updates"],
        )
        last: dict[str, Any] = {}
        ended = False
        async for kind, chunk in own_task(run):  # a caller that stops reading stops the run
            if kind == "values":
                last = dict(chunk)
            elif kind == "custom":
                ended = ended or chunk["event"] == "result"
                yield str(chunk["event"]), dict(chunk)
            else:
                for node, update in chunk.items():
                    yield node, dict(update or {})
        if mode == "events" and not ended:  # a graph of one's own that sends no events
            yield "result", {"event": "result",
                             "result": AgentResult.model_validate(last).model_dump(mode="json")}


# --- the knowledge base: the CLI's `ingest` and `docs` commands in Python -------------------------


def _store(store: KnowledgeStore | None) -> KnowledgeStore:
    """The given store, else the one the default agent searches (built once per process)."""
    if store is not None:
        return store
    from grounded_agent.graph.agent import default_deps

    return default_deps.get_store()


async def aingest(
    paths: Sequence[str | Path] | str | Path,
    *,
    sync: bool = False,
    access: list[str] | str | None = None,
    store: KnowledgeStore | None = None,
) -> IngestReport:
    """Ingests files and directories (Markdown, text, JSON Lines, PDF, Word, HTML) into the
    knowledge base; `sync` removes documents of a directory whose files are gone. `access`
    (groups, "public" or "private"): who may read the documents that declare no access of
    their own (default: GROUNDED_AGENT_DEFAULT_ACCESS, else everyone)."""
    from grounded_agent.store.ingest import aingest_paths

    items = [paths] if isinstance(paths, (str, Path)) else list(paths)
    return await aingest_paths(
        [Path(p) for p in items], _store(store), sync=sync, access=_access(access)
    )


def ingest(
    paths: Sequence[str | Path] | str | Path,
    *,
    sync: bool = False,
    access: list[str] | str | None = None,
    store: KnowledgeStore | None = None,
) -> IngestReport:
    """Blocking form of `aingest`."""
    from grounded_agent.store.ingest import ingest_paths

    items = [paths] if isinstance(paths, (str, Path)) else list(paths)
    return ingest_paths(
        [Path(p) for p in items], _store(store), sync=sync, access=_access(access)
    )


def _access(value: list[str] | str | None) -> Any:
    """An access argument as ingest reads it; InvalidQuestion naming the rule."""
    if value is None:
        return None
    from grounded_agent.loaders.base import IngestError, parse_access

    try:
        return parse_access(value)
    except IngestError as exc:
        raise InvalidQuestion(str(exc)) from None


MAX_DOC_ID_CHARS = DOC_ID_LIMIT
"""The limit ingest applies to an id (inputs.MAX_DOC_ID_CHARS): whatever went in can be shown
and removed."""


def _viewer(groups: list[str] | str | None) -> Viewer | None:
    """The viewer of a management call: None (everything) without groups."""
    if groups is None:
        return None
    try:
        return Viewer(parse_groups(groups) or ())
    except ValueError as exc:
        raise InvalidQuestion(str(exc)) from None


def list_documents(
    *,
    all_versions: bool = False,
    groups: list[str] | str | None = None,
    store: KnowledgeStore | None = None,
) -> list[DocumentVersion]:
    """The searched version of each document (`all_versions`: every version and its status);
    with `groups`, only what a member of them may read."""
    return _store(store).list_documents(all_versions=all_versions, viewer=_viewer(groups))


def get_document(
    doc_id: str, *, groups: list[str] | str | None = None, store: KnowledgeStore | None = None
) -> DocumentDetail | None:
    """A document's versions and chunks (section, page of each), or None if there is none (or,
    with `groups`, none a member of them may read)."""
    return _store(store).get_document(
        validate_text_id(doc_id, "doc_id", MAX_DOC_ID_CHARS), viewer=_viewer(groups)
    )


def remove_document(
    doc_id: str, *, groups: list[str] | str | None = None, store: KnowledgeStore | None = None
) -> Removal | None:
    """Stops searching a document at once (all its versions); None if there is no such id (or,
    with `groups`, none a member of them may read)."""
    return _store(store).remove_document(
        validate_text_id(doc_id, "doc_id", MAX_DOC_ID_CHARS), viewer=_viewer(groups)
    )


def set_access(
    doc_id: str, groups: list[str] | str | None, *, store: KnowledgeStore | None = None
) -> int:
    """Who may read a document from now on: groups (a list or "a,b"), "public" (or None), or
    "private" (only principals who see everything); nothing is embedded again. Returns the
    chunks changed, 0 when there is no such document."""
    from grounded_agent.loaders.base import IngestError, parse_access

    try:
        access = "public" if groups is None else parse_access(groups)
    except IngestError as exc:
        raise InvalidQuestion(str(exc).removeprefix("invalid access: ")) from None
    return _store(store).set_access(
        validate_text_id(doc_id, "doc_id", MAX_DOC_ID_CHARS),
        None if access == "public" else list(access),
    )


# --- the agent inside a graph of one's own --------------------------------------------------------


def as_node(
    graph: Graph | None = None,
    *,
    question_key: str = "question",
    answer_key: str = "answer",
    status_key: str | None = "status",
    citations_key: str | None = "citations",
    result_key: str | None = None,
    sources: list[str] | None = None,
    context: Context | None = None,
) -> Runnable[Any, dict[str, Any]]:
    """The agent as one node of a user's `StateGraph` (sync and async): it reads the question
    from `question_key` (with `question_key="messages"`, the last human message) and writes the
    checked answer to `answer_key` (as an AI message where that key is "messages"), the status
    to `status_key`, the citations (dicts) to `citations_key` and, if asked, the whole
    `AgentResult` (a dict) to `result_key`; a key set to None is not written. A state without
    the question key is an error naming it, never a silent no-op."""
    from langchain_core.messages import AIMessage, BaseMessage
    from langchain_core.runnables import RunnableLambda

    def question_of(state: Any) -> str:
        value = state.get(question_key) if isinstance(state, dict) else getattr(
            state, question_key, None
        )
        if value is None:
            raise KeyError(
                f"grounded_answer reads the question from the state key {question_key!r}, which "
                "this state lacks or left empty; name the right one: as_node(question_key=...)"
            )
        if question_key == "messages":
            humans = [m for m in value if isinstance(m, BaseMessage) and m.type == "human"]
            return humans[-1].text if humans else ""
        return str(value)

    def update(result: AgentResult) -> dict[str, Any]:
        out: dict[str, Any] = {
            answer_key: [AIMessage(result.answer)] if answer_key == "messages" else result.answer
        }
        if status_key:
            out[status_key] = result.status
        if citations_key:
            out[citations_key] = [c.model_dump(mode="json") for c in result.citations]
        if result_key:
            out[result_key] = result.model_dump(mode="json")
        return out

    async def agrounded_answer(state: Any) -> dict[str, Any]:
        return update(await aask(question_of(state), graph=graph, sources=sources, context=context))

    def grounded_answer(state: Any) -> dict[str, Any]:
        return update(ask(question_of(state), graph=graph, sources=sources, context=context))

    return RunnableLambda(grounded_answer, afunc=agrounded_answer, name="grounded_answer")
