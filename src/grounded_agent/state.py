"""Graph state: what goes in and what the nodes share (what comes out is schemas.AgentResult).

Values are plain JSON-able dicts (dumps of the models in schemas.py) so the same state crosses
checkpoints, LangServe, Studio and the CLI without custom serialisers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal, NotRequired, Required

from langchain_core.messages import AnyMessage
from langgraph.graph.message import add_messages
from typing_extensions import TypedDict

from grounded_agent.schemas import (
    AnswerStatus,
    Citation,
    Confidence,
    Finding,
    Pointer,
    ResultType,
    SourceReport,
    ToolCallRecord,
)

Grounding = Literal["usable", "all_failed", "nothing_usable"]
"""What check_grounding found: usable evidence, every source failed, or nothing usable."""

RESET = "__reset__"
"""First element of a list update (or a key of a usage update) that starts the value afresh."""


def fresh(items: list[Any] | None = None) -> list[Any]:
    """An update that replaces a list channel instead of extending it: a new turn starts clean."""
    return [RESET, *(items or [])]


def extend_or_reset(left: list[Any] | None, right: list[Any] | None) -> list[Any]:
    """Appends; an update that starts with RESET replaces the list."""
    if not right:
        return list(left or [])
    if isinstance(right[0], str) and right[0] == RESET:
        return list(right[1:])
    return [*(left or []), *right]


def add_usage(left: dict[str, int] | None, right: dict[str, int] | None) -> dict[str, int]:
    """Sums usage counters; an update holding the RESET key starts from zero."""
    base = {"llm_calls": 0, "input_tokens": 0, "output_tokens": 0}
    right = dict(right or {})
    if not right.pop(RESET, False):
        base.update(left or {})
    for key, value in right.items():
        base[key] = base.get(key, 0) + int(value)
    return base


def replace_messages(left: list[AnyMessage] | None, right: list[Any] | None) -> list[AnyMessage]:
    """add_messages, except that an update starting with RESET drops the previous turn's dialog."""
    if right and isinstance(right[0], str) and right[0] == RESET:
        return add_messages([], list(right[1:]))  # type: ignore[return-value]
    return add_messages(left or [], right or [])  # type: ignore[return-value, arg-type]


DraftHow = Literal["model", "extractive", "abstained"]
"""Who wrote the draft: the model, the extract of the evidence, or nobody (the model abstained)."""


class Draft(TypedDict, total=False):
    """The answer between its nodes: its extract (score_confidence), drafted (draft_answer),
    checked (check_citations), maybe translated (translate_answer); the answer node reports it."""

    text: str
    how: DraftHow
    replied: bool
    """The model replied: only a model's checked draft is translated."""
    write_in: str | None
    """The sources' language when the answer was asked for in another one."""
    citations: list[Citation]
    """Set by the citation check: the draft's citations, renumbered."""
    extract: str
    """The evidence quoted (extractive.extractive_draft), built once by score_confidence: the
    offline scorer, the judge's veto and the draft without a model all read this one."""
    judge: bool
    """Set by score_confidence when the local signals left the confidence open and a model is
    there: the draft call returns the judgement with the answer (one call, not two), and the
    offline verdict (`offline`) is kept if the judgement fails."""
    streamed: list[str]
    """The sentences emitted while the model drafted (streaming.SentenceStream): the answer
    node emits the checked answer's others after them."""
    sentences: list[tuple[str, list[int]]]
    """Set by the citation check: the kept sentences, markers renumbered, with their numbers."""
    offline: Confidence
    """Set when the model judges the evidence: the offline verdict for the same evidence. Where the
    model's draft cannot stand, it is the outcome (its extract, or no answer where it answers
    nothing) and the level reported: never the model's more confident one."""


class InputState(TypedDict):
    """What a caller sends: the question, optionally the sources and the answer language."""

    question: Required[str]
    sources: NotRequired[list[str] | None]
    language: NotRequired[str | None]


class Turn(TypedDict, total=False):
    """The working values of one turn: prepare_question starts a new one whole, the nodes after it
    update the fields they change (merge_turn)."""

    run_id: str
    requested: list[str]
    """The sources this turn searches (the input's `sources`, parsed)."""
    deadline: float
    attempt: int
    attempt_cap: int
    offline: bool
    intent: Literal["ask", "search", "search_and_ask"]
    routed_calls: list[dict[str, Any]] | None
    scope: dict[str, Any] | None
    query: str
    outcomes: list[ToolCallRecord]
    rejected_calls: list[dict[str, Any]]
    evidence: list[Finding]
    grounding: Grounding
    draft: Draft | None
    rewrite: str | None
    """The second search's query the model's LOW confidence judgement proposed (reformulate_query
    takes it instead of asking the model again); None otherwise."""


def merge_turn(left: Turn | None, right: Mapping[str, Any] | None) -> Turn:
    """A node's update to the turn: the fields it holds replace the held ones (a node that adds
    outcomes writes the whole list); an update holding the RESET key is a new turn and replaces
    the old one whole."""
    if not right:
        return dict(left or {})  # type: ignore[return-value]
    update = dict(right)
    if update.pop(RESET, False):
        return update  # type: ignore[return-value]
    return {**(left or {}), **update}  # type: ignore[typeddict-item]


def new_turn(**fields: Any) -> dict[str, Any]:
    """The update that starts a turn: every earlier working value is dropped."""
    return {RESET: True, "outcomes": [], "rejected_calls": [], "evidence": [], "draft": None,
            **fields}


def turn_of(state: Mapping[str, Any]) -> Turn:
    """The turn's working values (empty before prepare_question has run)."""
    return state.get("turn") or {}  # type: ignore[return-value]


class AgentState(TypedDict, total=False):
    """Everything the nodes share: the input, this turn's working values, the output contract's
    fields, and the thread's history. `sources` holds the requested names on input and the
    per-source reports on output: one public name for both, as the contract asks; the nodes read
    the requested names from the turn (`requested`)."""

    # input
    question: str
    sources: list[str] | list[SourceReport] | None
    language: str | None
    # this turn's working values, replaced whole by the next turn
    turn: Annotated[Turn, merge_turn]
    messages: Annotated[list[AnyMessage], replace_messages]
    # output (AgentResult)
    confidence: Confidence
    queries: Annotated[list[str], extend_or_reset]
    status: AnswerStatus
    answer: str
    citations: list[Citation]
    closest: list[Pointer]
    attempts: int
    warnings: Annotated[list[dict[str, Any]], extend_or_reset]
    trail: Annotated[list[dict[str, Any]], extend_or_reset]
    usage: Annotated[dict[str, int], add_usage]
    result_type: ResultType
    documents: dict[str, Any] | None
    search: dict[str, Any] | None
    coverage_limited: bool
    # across turns of a thread
    history: Annotated[list[dict[str, Any]], extend_or_reset]
