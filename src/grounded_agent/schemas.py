"""Pydantic models at the edges: what a tool reports, what a citation holds, what a user gets."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

from grounded_agent.documents import DocumentList, DocumentQuery
from grounded_agent.errors import InvalidQuestion as InvalidQuestion
from grounded_agent.inputs import text_problem

SOURCE_NAME_PATTERN = r"^[A-Za-z][A-Za-z0-9_-]{0,63}$"
"""What a source may be called: a chat model's tool name (letters, digits, `_`, `-`; 64 at
most), starting with a letter."""

SourceName = Annotated[str, StringConstraints(pattern=SOURCE_NAME_PATTERN)]
"""A built-in source (`SOURCE_NAMES`) or one the user brought (`grounded_agent.sources`)."""

SOURCE_NAMES: tuple[str, ...] = ("knowledge_base", "wikipedia", "web")
"""The built-in sources."""

OutcomeStatus = Literal["found", "low_relevance", "not_found", "error"]
ErrorKind = Literal[
    "timeout", "rate_limit", "auth", "config", "unavailable", "bad_response", "unknown"
]
Coverage = Literal["complete", "partial", "unavailable"]

ResultType = Literal["answer", "search", "combined"]
"""answer: a grounded answer; search: a page of documents; combined: both, the answer drawn only
from the documents of that page."""

AnswerStatus = Literal["answered", "answered_with_caveat", "partial", "not_found", "unavailable"]
ConfidenceLevel = Literal["HIGH", "MEDIUM", "LOW", "NOT_RELEVANT"]
WarningKind = Literal[
    "stale_source",
    "low_relevance",
    "source_unavailable",
    "citation_removed",
    "unsupported_sentence",
    "rejected_tool_call",
    "budget_exhausted",
    "offline_mode",
    "model_unavailable",
]


@dataclass(frozen=True)
class Thresholds:
    """Calibrated-relevance cut-offs: at or above `found` a passage answers, below `low` it does
    not count. The defaults are Context's; a run passes its own to every classification."""

    found: float = 0.75
    low: float = 0.55


DEFAULT_THRESHOLDS = Thresholds()


class Finding(BaseModel):
    """One retrieved passage with everything needed to cite it."""

    model_config = ConfigDict(frozen=True)

    source: SourceName
    source_id: str = Field(description="Stable id of the cited document: doc_id, page URL.")
    title: str
    text: str
    section: str | None = None
    version: str | None = None
    page: int | None = None
    url: str | None = None
    document_date: date | None = None
    indexed_at: datetime | None = None
    language: str | None = None
    chunk_index: int | None = None
    score: float = Field(
        ge=0.0,
        le=1.0,
        description="Calibrated relevance; the run's Thresholds decide what answers.",
    )
    raw_score: float | None = Field(
        default=None, description="The backend's own score (cosine...)."
    )
    extra: dict[str, Any] = Field(default_factory=dict)

    @property
    def key(self) -> str:
        """Identity of the passage, to deduplicate findings across attempts."""
        return f"{self.source}:{self.source_id}:{self.chunk_index if self.chunk_index is not None else ''}"


class ToolOutcome(BaseModel):
    """What one source call produced. Status and coverage are facts apart from the findings.

    `finding_count` is a number only when the read completed: an unfinished read cannot say how
    many findings there are, and must never be taken for zero.
    """

    model_config = ConfigDict(frozen=True)

    source: SourceName
    query: str
    status: OutcomeStatus
    coverage: Coverage
    error_kind: ErrorKind | None = None
    finding_count: int | None = None
    items: list[Finding] = Field(default_factory=list)
    detail: str | None = Field(
        default=None, description="Technical detail for logs, never for users."
    )
    elapsed_ms: float = 0.0

    @model_validator(mode="after")
    def _consistent(self) -> ToolOutcome:
        if self.status == "error":
            if self.error_kind is None:
                raise ValueError("an error outcome needs an error_kind")
            if self.coverage == "complete":
                raise ValueError("an error outcome cannot have complete coverage")
            if self.finding_count is not None:
                raise ValueError("an error outcome has no finding_count")
        else:
            if self.error_kind is not None:
                raise ValueError("error_kind is only for error outcomes")
        if self.coverage != "complete" and self.finding_count is not None:
            raise ValueError("finding_count is only known when the read completed")
        if self.status in ("found", "low_relevance") and not self.items:
            raise ValueError(f"a {self.status} outcome needs items")
        return self

    @property
    def failed(self) -> bool:
        return self.status == "error"

    @property
    def best_score(self) -> float | None:
        return max((i.score for i in self.items), default=None)

    def classified(self, thresholds: Thresholds) -> ToolOutcome:
        """This outcome judged by `thresholds`; an error stays an error."""
        if self.status == "error":
            return self
        return self.model_copy(update={"status": classify(self.items, thresholds)})

    @classmethod
    def error(
        cls,
        source: SourceName,
        query: str,
        kind: ErrorKind,
        detail: str | None = None,
        *,
        elapsed_ms: float = 0.0,
    ) -> ToolOutcome:
        return cls(
            source=source,
            query=query,
            status="error",
            coverage="unavailable",
            error_kind=kind,
            detail=detail,
            elapsed_ms=elapsed_ms,
        )

    @classmethod
    def from_items(
        cls,
        source: SourceName,
        query: str,
        items: list[Finding],
        *,
        thresholds: Thresholds = DEFAULT_THRESHOLDS,
        elapsed_ms: float = 0.0,
        ranked: bool = False,
    ) -> ToolOutcome:
        """A completed read, classified by its best relevance score. Items keep the source's own
        order when it has `ranked` them (best answer first), else go best score first."""
        ranked_items = list(items) if ranked else sorted(items, key=lambda i: i.score, reverse=True)
        return cls(
            source=source,
            query=query,
            status=classify(ranked_items, thresholds),
            coverage="complete",
            finding_count=len(ranked_items),
            items=ranked_items,
            elapsed_ms=elapsed_ms,
        )


    @classmethod
    def partial_read(
        cls,
        source: SourceName,
        query: str,
        items: list[Finding],
        *,
        detail: str,
        thresholds: Thresholds = DEFAULT_THRESHOLDS,
        elapsed_ms: float = 0.0,
    ) -> ToolOutcome:
        """A read that stopped part-way: what was read is usable and classified, but coverage is
        partial and `finding_count` unknown, so absence is never concluded from it."""
        ranked_items = sorted(items, key=lambda i: i.score, reverse=True)
        return cls(
            source=source,
            query=query,
            status=classify(ranked_items, thresholds),
            coverage="partial",
            items=ranked_items,
            detail=detail,
            elapsed_ms=elapsed_ms,
        )


class ToolCallRecord(BaseModel):
    """A tool outcome as the graph keeps it: the attempt and the call that produced it ("" for a
    requested source that no call reached). Technical details stay in the logs, not in state."""

    model_config = ConfigDict(frozen=True)

    attempt: int
    call_id: str = ""
    outcome: ToolOutcome


def classify(items: list[Finding], thresholds: Thresholds) -> OutcomeStatus:
    """found / low_relevance / not_found by the best calibrated score of a completed read."""
    best = max((i.score for i in items), default=None)
    if best is None or best < thresholds.low:
        return "not_found"
    return "found" if best >= thresholds.found else "low_relevance"


class Citation(BaseModel):
    n: int
    source: SourceName
    source_id: str
    title: str
    section: str | None = None
    version: str | None = None
    page: int | None = Field(
        default=None, description="The page the cited passage starts on (PDF), else None."
    )
    url: str | None = None
    document_date: date | None = None
    indexed_at: datetime | None = None
    score: float


class Pointer(BaseModel):
    """A passage that came closest when nothing answered: a place to look, not a source of any
    claim (no sentence of the answer rests on it, and it is no citation)."""

    source: SourceName
    source_id: str
    title: str
    section: str | None = None
    version: str | None = None
    page: int | None = None
    url: str | None = None
    score: float


class Confidence(BaseModel):
    """The confidence judgement over all collected evidence (one structured call, or local)."""

    level: ConfidenceLevel | None = None
    reason: str = ""
    can_answer: bool = False


class JudgedDraft(BaseModel):
    """Structured output of the draft call when the local signals left the confidence open: the
    judgement and, for HIGH or MEDIUM, the answer (one call instead of a judgement, then a draft)."""

    level: ConfidenceLevel = Field(
        description="HIGH: the sources state the answer. MEDIUM: they support an answer with gaps. "
        "LOW: related but do not answer. NOT_RELEVANT: about something else."
    )
    reason: str = Field(description="One sentence naming what in the sources decides the level.")
    can_answer: bool = Field(description="True only if the sources alone answer the question.")
    answer: str = Field(
        default="",
        description="HIGH or MEDIUM only: the answer, every sentence ending with the marker of "
        "its source, like [1]; empty for any other level.",
    )
    query: str | None = Field(
        default=None,
        description="LOW only: one search query for a second search, simpler and broader than "
        "the question; null for any other level.",
    )


class SupportJudgement(BaseModel):
    """Structured output of the support check: the claims their cited sources state."""

    supported: list[int] = Field(
        default_factory=list,
        description="Numbers of the claims whose cited sources state everything they say "
        "(a paraphrase counts; an added, changed or generalised fact does not).",
    )


class SourceReport(BaseModel):
    source: SourceName
    status: OutcomeStatus
    coverage: Coverage
    error_kind: ErrorKind | None = None
    finding_count: int | None = None


class AgentWarning(BaseModel):
    kind: WarningKind
    detail: str


class TrailStep(BaseModel):
    node: str
    attempt: int
    decision: str
    detail: str = ""


class Usage(BaseModel):
    llm_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0


class AgentResult(BaseModel):
    """The public output contract; `model_dump(mode="json")` is the CLI's --json object."""

    question: str
    status: AnswerStatus
    answer: str
    citations: list[Citation] = Field(default_factory=list)
    confidence: Confidence = Field(default_factory=Confidence)
    attempts: int = 1
    queries: list[str] = Field(default_factory=list)
    sources: list[SourceReport] = Field(default_factory=list)
    warnings: list[AgentWarning] = Field(default_factory=list)
    trail: list[TrailStep] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    result_type: ResultType = "answer"
    documents: DocumentList | None = Field(
        default=None, description="The page of matching documents (search and combined)."
    )
    search: DocumentQuery | None = Field(
        default=None,
        description="The normalised search parameters; send them back with another page number.",
    )
    coverage_limited: bool = Field(
        default=False,
        description="The answer used only part of the matching documents (more pages, or "
        "documents of the page that gave it no passage).",
    )
    closest: list[Pointer] = Field(
        default_factory=list,
        description="When no answer was given: the passages that came closest, best first, as "
        "places to look; none was judged to answer and no claim rests on them.",
    )


MAX_QUESTION_CHARS = 4000



MAX_LANGUAGE_CHARS = 40

def validate_question(raw: object) -> str:
    """The stripped question, or InvalidQuestion saying what is wrong with it."""
    if not isinstance(raw, str):
        raise InvalidQuestion("question must be a text")
    problem = text_problem(raw)
    if problem is not None:
        raise InvalidQuestion(f"question {problem}")
    question = raw.strip()
    if not question:
        raise InvalidQuestion("question is empty")
    if len(question) > MAX_QUESTION_CHARS:
        raise InvalidQuestion(
            f"question is {len(question)} characters long; the limit is {MAX_QUESTION_CHARS}"
        )
    return question


MAX_THREAD_ID_CHARS = 200


def validate_text_id(raw: object, name: str, max_chars: int = MAX_THREAD_ID_CHARS) -> str:
    """An identifier given as text (a thread id, a document id), or InvalidQuestion: it is
    stored or looked up in PostgreSQL, which cannot hold a NUL nor encode a lone surrogate (what
    a command line's invalid UTF-8 arrives as)."""
    if not isinstance(raw, str):
        raise InvalidQuestion(f"{name} must be a text")
    problem = text_problem(raw)
    if problem is not None:
        raise InvalidQuestion(f"{name} {problem}")
    if not raw.strip():
        raise InvalidQuestion(f"{name} is empty")
    if len(raw) > max_chars:
        raise InvalidQuestion(f"{name} is longer than {max_chars} characters")
    return raw


def validate_language(raw: object) -> str | None:
    """The answer language as given (None or blank: the question's own), or InvalidQuestion."""
    if raw is None:
        return None
    if not isinstance(raw, str):
        raise InvalidQuestion("language must be a text")
    problem = text_problem(raw)
    if problem is not None:
        raise InvalidQuestion(f"language {problem}")
    language = raw.strip()
    if len(language) > MAX_LANGUAGE_CHARS:
        raise InvalidQuestion(f"language is longer than {MAX_LANGUAGE_CHARS} characters")
    return language or None
