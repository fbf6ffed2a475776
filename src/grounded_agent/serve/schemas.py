"""What the endpoint accepts and returns: explicit pydantic types for LangServe's schemas.

Why explicit: LangServe derives request validation, the playground form and the published JSON
schemas from these types; the graph's own TypedDicts would expose internal state and the whole
Context (prompts and budgets included), which clients must not set.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, create_model, field_validator, model_validator

from grounded_agent.context import CLIENT_CONFIGURABLE, Context, checked_sources, parse_sources
from grounded_agent.documents import DocumentQuery
from grounded_agent.schemas import (
    MAX_LANGUAGE_CHARS,
    MAX_QUESTION_CHARS,
    AgentResult,
    validate_language,
    validate_question,
)

_CONTEXT_DOCS = {f.name: str(f.metadata.get("description", "")) for f in fields(Context)}


class AgentInput(BaseModel):
    """One question, optionally the sources to search and the answer language (mirrors InputState);
    or a page request: `search`, the normalised parameters of an earlier result with another page
    number, answered from the store without the model."""

    model_config = ConfigDict(extra="forbid")

    question: str | None = Field(
        default=None, description=f"The question, 1 to {MAX_QUESTION_CHARS} characters."
    )
    search: DocumentQuery | None = Field(
        default=None,
        description="Another page of an earlier search: its `search` with a new page number "
        "(no model call; in a thread, a combined answer is kept).",
    )
    sources: list[str] | None = Field(
        default=None, description="Sources the served graph has (built in: knowledge_base, "
        "wikipedia, web; and any brought to build_graph); default: the server's."
    )
    language: str | None = Field(
        default=None, max_length=MAX_LANGUAGE_CHARS, description="Answer language."
    )

    @field_validator("question")
    @classmethod
    def _question(cls, value: str | None) -> str | None:
        return None if value is None else validate_question(value)

    @model_validator(mode="after")
    def _one_request(self) -> AgentInput:
        if (self.question is None) == (self.search is None):
            raise ValueError("send either a question or search (a page request), not both")
        return self

    @field_validator("language")
    @classmethod
    def _language(cls, value: str | None) -> str | None:
        return validate_language(value)

    @field_validator("sources")
    @classmethod
    def _sources(cls, value: list[str] | None) -> list[str] | None:
        return list(parse_sources(value)) if value else None


def input_schema_for(sources: Sequence[str] | None) -> type[AgentInput]:
    """AgentInput that also refuses source names the served graph lacks (a 422 before the run,
    as for any other bad input); `None`: names are checked by form only."""
    if not sources:
        return AgentInput
    known = tuple(sources)

    def known_only(cls: type[BaseModel], value: list[str] | None) -> list[str] | None:
        return checked_sources(value, known)

    # named as the class it extends: clients and the OpenAPI schema see one AgentInput
    served: type[AgentInput] = create_model(
        "AgentInput",
        __base__=AgentInput,
        __validators__={"_known": field_validator("sources")(classmethod(known_only))},  # type: ignore[dict-item]
    )
    return served


AgentOutput = AgentResult
"""The output contract, unchanged: what `grounded-agent ask --json` prints."""


class ClientConfigurable(BaseModel):
    """Per-request settings a client may send in config.configurable: CLIENT_CONFIGURABLE plus
    thread_id. Extra keys are kept here so the server can reject them by name (400)."""

    model_config = ConfigDict(extra="allow")

    thread_id: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        description="Conversation thread: follow-up questions are resolved against its turns.",
    )
    model: str | None = Field(default=None, max_length=100, description=_CONTEXT_DOCS["model"])
    sources: list[str] | None = Field(default=None, description=_CONTEXT_DOCS["sources"])
    found_threshold: float | None = Field(
        default=None, ge=0.0, le=1.0, description=_CONTEXT_DOCS["found_threshold"]
    )
    low_threshold: float | None = Field(
        default=None, ge=0.0, le=1.0, description=_CONTEXT_DOCS["low_threshold"]
    )
    model_low_threshold: float | None = Field(
        default=None, ge=0.0, le=1.0, description=_CONTEXT_DOCS["model_low_threshold"]
    )
    closest_threshold: float | None = Field(
        default=None, ge=0.0, le=1.0, description=_CONTEXT_DOCS["closest_threshold"]
    )
    top_k: int | None = Field(default=None, ge=1, le=10, description=_CONTEXT_DOCS["top_k"])
    wikipedia_language: str | None = Field(
        default=None, pattern=r"^[a-z]{2,12}$", description=_CONTEXT_DOCS["wikipedia_language"]
    )
    max_attempts: int | None = Field(
        default=None, ge=1, le=2, description=_CONTEXT_DOCS["max_attempts"]
    )


class AgentConfig(BaseModel):
    """The config a client may send with a request."""

    configurable: ClientConfigurable | None = None


ALLOWED_CONFIGURABLE: frozenset[str] = CLIENT_CONFIGURABLE | {"thread_id"}


def error_body(error: str, detail: str, **extra: Any) -> dict[str, Any]:
    """Every error the endpoint returns has this shape: a code and a sentence for humans."""
    return {"error": error, "detail": detail, **extra}
