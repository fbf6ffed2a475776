"""What a request asks for: a list of documents, an answer, or both.

The router model is offered the source tools (a call of one is a question: ask) and two
document tools, search_documents and search_and_ask; a document tool's arguments are validated
here (the same `DocumentQuery` rules as a direct search, plus checks on
dates the model resolved) and never trusted as sent. Without a model, `offline_intent` applies a
small, documented rule.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from datetime import date
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError, field_validator

from grounded_agent.documents import DocumentQuery, errors_text, language_code
from grounded_agent.grounding.text import STOPWORDS

Intent = Literal["ask", "search", "search_and_ask"]

RESULT_TYPES: dict[str, str] = {"ask": "answer", "search": "search", "search_and_ask": "combined"}


class SearchDocumentsArgs(DocumentQuery):
    """Arguments of the `search_documents` tool: the document search's own parameters."""


class SearchAndAskArgs(DocumentQuery):
    """Arguments of the `search_and_ask` tool: a document search, then a question answered only
    from the documents it found."""

    query: str = Field(
        min_length=1, max_length=500,
        description="What to look up inside the documents found: a short search phrase.",
    )
    answer_language: str | None = Field(
        default=None, description="Language the answer is written in (ISO code)."
    )

    @field_validator("answer_language", mode="before")
    @classmethod
    def _answer_language(cls, value: Any) -> str | None:
        return language_code(value, "answer_language")

    def document_query(self) -> DocumentQuery:
        return DocumentQuery.model_validate(
            self.model_dump(exclude={"query", "answer_language"})
        )


ROUTER_TOOLS: dict[str, tuple[Intent, type[BaseModel], str]] = {
    "search_documents": (
        "search", SearchDocumentsArgs,
        "List documents of the knowledge base that match criteria (words, language, date "
        "range, sort). Use it when the user wants documents found, listed or shown, not a "
        "question answered.",
    ),
    "search_and_ask": (
        "search_and_ask", SearchAndAskArgs,
        "First find the documents that match criteria, then answer a question using only those "
        "documents. Use it when the user both selects documents (by words, language or date) and "
        "asks something about them (compare, summarise, explain).",
    ),
}
"""The document tools beside the source tools: tool name -> (intent, argument schema, description
the model reads). A call of a source tool (knowledge_base, wikipedia, web) is the ask intent."""


@functools.lru_cache(maxsize=1)
def document_tool_specs() -> list[dict[str, Any]]:
    """The document tools bound to the router model beside the source tools (OpenAI format)."""
    from langchain_core.utils.function_calling import convert_to_openai_tool

    return [
        convert_to_openai_tool({**schema.model_json_schema(), "title": name, "description": desc})
        for name, (_, schema, desc) in ROUTER_TOOLS.items()
    ]


@dataclass(frozen=True)
class Decision:
    """The chosen intent with validated arguments; `how` says who chose (router, rule)."""

    intent: Intent
    how: str
    search: DocumentQuery | None = None
    query: str | None = None
    answer_language: str | None = None

    def describe(self) -> str:
        parts: list[str] = [self.intent]
        if self.search is not None:
            parts.append(f"documents: {self.search.describe()}")
        if self.query:
            parts.append(f'query "{self.query}"')
        if self.answer_language:
            parts.append(f"answer in {self.answer_language}")
        return "; ".join(parts)


def check_dates(date_from: date | None, date_to: date | None, today: date) -> str | None:
    """Dates a model resolved, checked in code: a range that starts after today or before 1900
    is a resolution mistake, not a search anyone means."""
    if date_from is not None and date_from > today:
        return f"date_from {date_from} is after today ({today})"
    for name, value in (("date_from", date_from), ("date_to", date_to)):
        if value is not None and value.year < 1900:
            return f"{name} {value} is before 1900"
    return None


def decide(name: str, raw_args: dict[str, Any], today: date) -> tuple[Decision | None, str | None]:
    """A router tool call as a Decision, or the reason it is refused (unknown tool, arguments
    outside the schema, dates that cannot be meant)."""
    entry = ROUTER_TOOLS.get(name)
    if entry is None:
        return None, f"tool {name!r} is not allowed"
    intent, schema, _ = entry
    try:
        args = schema.model_validate(raw_args)
    except ValidationError as exc:
        return None, f"invalid arguments for {name}: {errors_text(exc)}"
    reason = check_dates(getattr(args, "date_from", None), getattr(args, "date_to", None), today)
    if reason is not None:
        return None, f"invalid arguments for {name}: {reason}"
    if isinstance(args, SearchAndAskArgs):
        return Decision(intent, "router", search=args.document_query(), query=args.query,
                        answer_language=args.answer_language), None
    assert isinstance(args, DocumentQuery)
    return Decision(intent, "router", search=DocumentQuery.model_validate(args.model_dump())), None


# --- the offline rule ---------------------------------------------------------------------------

_VERB = re.compile(
    r"^\s*(?:please\s+)?(?:find|list|show(?:\s+me)?|search(?:\s+for)?|look\s+up|get)\b\s*",
    re.IGNORECASE,
)
_DOC_WORD = re.compile(
    r"\b(?:documents?|docs?|files?|contracts?|agreements?|polic(?:y|ies)|price\s+lists?|"
    r"reports?|articles?|papers?|records?|pages?|guides?|manuals?|notes?)\b",
    re.IGNORECASE,
)
_GENERIC_DOC = re.compile(r"\b(?:documents?|docs?|files?|pages?)\b", re.IGNORECASE)
_YEAR = re.compile(r"\b(?:in|from|of|dated|since)?\s*((?:19|20)\d{2})\b", re.IGNORECASE)
_SINCE = re.compile(r"\bsince\s+((?:19|20)\d{2})\b", re.IGNORECASE)
_RELATIVE_YEAR = re.compile(r"\b(?:from\s+|in\s+|of\s+)?(this|last)\s+year(?:'s)?\b", re.IGNORECASE)
_SORT = re.compile(r"\b(newest|latest|most\s+recent|recent|oldest|earliest)\b", re.IGNORECASE)
LANGUAGES = {
    "english": "en", "german": "de", "french": "fr", "spanish": "es", "italian": "it",
    "dutch": "nl", "portuguese": "pt", "swedish": "sv", "danish": "da", "norwegian": "no",
    "finnish": "fi", "russian": "ru",
}
_LANGUAGE = re.compile(r"\b(?:in\s+)?(" + "|".join(LANGUAGES) + r")\b", re.IGNORECASE)
_THEN_ASK = re.compile(
    r"\s*(?:,\s*|\s+)(?:and|then)\s+(?:then\s+)?(?=(?:summari[sz]e|compare|explain|tell|describe|"
    r"what|which|how|when|who|answer|check|say|list\s+their|give)\b)",
    re.IGNORECASE,
)
_FILLER = frozenset(
    ["a", "an", "the", "all", "any", "every", "some", "me", "us", "our", "my", "your", "their", "we", "i", "you", "that", "which", "who", "whose", "were", "was", "are", "is", "be", "been", "of", "about", "on", "with", "in", "from", "for", "to", "by", "at", "signed", "written", "published", "dated", "issued", "made", "created", "new", "there", "please"]
)
"""Words a search phrase drops. Not the stoplist (text.STOPWORDS), which would also drop words
the phrase's web-search query reads ("or" joins alternatives; "and", "not", "named" match in the
'simple' configuration); 37 of these are stop words, the rest ("signed", "dated", "new",
"every") describe the documents asked for, not what they are about."""


def offline_intent(request: str, today: date) -> Decision:
    """The offline rule. A request that starts with find / list / show / search (for) / look up /
    get and names documents (a word such as documents, contracts, policies, price lists) or a
    year ("2026", "this year", "last year", "since 2025") is a search; "... and compare /
    summarise / explain / what ..." after it makes it a search-and-ask whose question is that
    second part. Everything else is a question (ask). Languages by English name ("in German").
    """
    if not _VERB.match(request):
        return Decision("ask", "rule")
    head, question = request, None
    split = _THEN_ASK.search(request)
    if split:
        head, question = request[: split.start()], request[split.end():].strip(" ?.!") or None
    has_year = bool(_YEAR.search(head) or _RELATIVE_YEAR.search(head))
    if not (_DOC_WORD.search(head) or has_year):
        return Decision("ask", "rule")
    query = _search_query(head, today)
    if question:
        return Decision("search_and_ask", "rule", search=query, query=question)
    return Decision("search", "rule", search=query)


def confirms_documents(request: str, today: date) -> bool:
    """Whether a model's document intent (search_documents, search_and_ask) may stand: when the
    offline rule also reads the request as a document request, or when the request is not
    written in English, the only language the rule reads (its verbs and document words are
    English). A small model picks the document tools for ordinary questions; a question the rule
    can read and does not see as a document request is answered, not listed."""
    return offline_intent(request, today).intent != "ask" or not _english(request)


def _english(request: str) -> bool:
    """Written in English, as far as the rule can tell: at least one English function word (the
    stoplist) in every five words. Shorter requests than three words count as English: too few
    words to tell, and the rule is the default."""
    words = re.findall(r"[^\W\d_]+", request.lower())
    return len(words) < 3 or 5 * sum(w in STOPWORDS for w in words) >= len(words)


def _search_query(head: str, today: date) -> DocumentQuery:
    """The criteria of the search part: year range, language, sort, and the remaining words."""
    rest = _VERB.sub("", head, count=1)
    params: dict[str, Any] = {}
    relative = _RELATIVE_YEAR.search(rest)
    since = _SINCE.search(rest)
    years = [int(y) for y in _YEAR.findall(rest)]
    if relative:
        year = today.year - (1 if relative.group(1).lower() == "last" else 0)
        params.update(date_from=date(year, 1, 1), date_to=date(year, 12, 31))
    elif since:
        params["date_from"] = date(int(since.group(1)), 1, 1)
    elif years:
        params.update(date_from=date(min(years), 1, 1), date_to=date(max(years), 12, 31))
    language = _LANGUAGE.search(rest)
    if language:
        params["language"] = LANGUAGES[language.group(1).lower()]
    sort = _SORT.search(rest)
    if sort:
        params["sort"] = "oldest" if sort.group(1).lower() in ("oldest", "earliest") else "newest"
    for pattern in (_RELATIVE_YEAR, _SINCE, _YEAR, _LANGUAGE, _SORT, _GENERIC_DOC):
        rest = pattern.sub(" ", rest)
    words = [w for w in re.findall(r"[^\W_][\w'\-]*", rest) if w.lower() not in _FILLER]
    params["text"] = " ".join(words) or None
    return DocumentQuery.model_validate(params)
