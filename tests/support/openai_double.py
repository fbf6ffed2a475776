"""A model double over real HTTP: an OpenAI-compatible chat-completions server for tests.

It answers each step of the agent the way a cooperative model would, recognising the step by its
system prompt (as `evals.scripted` does in-process): it calls the knowledge base
with the question, rates the evidence HIGH, rewrites a query into its key words, and answers by
quoting a sentence of source 1 with its marker, in a chosen citation style. The "oracle" behaviour
answers SQuAD-derived questions by quoting the sentence of the gold passage that holds the gold
answer, with the marker number that passage has in the sources block.

Per test, the behaviour sets what the server supports (tools, json_schema, json_object; an
unsupported feature gets a 400, or is silently ignored), how the judged draft (confidence and
answer) comes back (as the request asks, bare JSON text, JSON in a code fence, a tool call,
prose), tool calls with invalid or non-JSON arguments, latency, and faults (429 with Retry-After, 5xx,
malformed bodies), each limited to a step and a number of requests.

In tests::

    double = ModelDouble(Behaviour(style="after_stop"))
    with double.serve() as base_url:            # http://127.0.0.1:<port>/v1
        double.configure(faults=[Fault(status=500)])
        ...
        double.requests                          # what the server received, per request

As a script (the behaviour can be changed later with POST /_control)::

    python tests/support/openai_double.py --port 8099 --behaviour oracle \
        --questions ../shared/eval/squad/questions.jsonl --style after_stop

Endpoints: POST /v1/chat/completions (JSON or SSE when "stream" is true), GET /v1/models,
GET|POST /_control (read or change the behaviour; {"reset": true, ...} starts from the behaviour
given at start and clears the log), GET /_requests (the log), GET /_oracle (the oracle's drafts per question),
GET /health.
"""

from __future__ import annotations

import argparse
import asyncio
import html
import itertools
import json
import re
import signal
import sys
import threading
import time
import unicodedata
import uuid
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from grounded_agent.prompts.answer import ANSWER_SYSTEM, JUDGED_ANSWER_SYSTEM
from grounded_agent.prompts.call_tools import CALL_TOOLS_SYSTEM
from grounded_agent.prompts.check_support import CHECK_SUPPORT_SYSTEM
from grounded_agent.prompts.prepare_question import CONDENSE_QUESTION_SYSTEM
from grounded_agent.prompts.reformulate_query import REFORMULATE_QUERY_SYSTEM

STYLES = (
    "before_stop",  # "X [1]."        the style the answer prompt asks for
    "after_stop",  # "X. [1]"         marker after the full stop
    "no_space",  # "X.[1]"          after the stop, no space
    "adjacent",  # "X [1][2]."      two markers side by side
    "comma",  # "X [1, 2]."      one bracket, a list
    "range",  # "X [1-2]."       one bracket, a range
    "bullets",  # "- X [1]" items  a list with an introduction line
    "sources_list",  # "X [1]. ... Sources: [1] Title" a trailing list of sources
    "paraphrase",  # "To sum up: X [1]."  no longer a quote: the support judgement reads it
)
"""Citation styles of the answer step; every one cites the quoted sentence's source."""
LEAD_INS = ("To sum up:",)
"""What the paraphrase style puts before a quoted sentence; the double's judge reads past it, as
any careful judge would (it adds no fact)."""

STRUCTURED = ("auto", "json", "fenced", "tool_call", "prose", "other_call", "no_json")
"""How a structured reply (the judged draft, the support judgement) comes back: as the request
asks (a tool call when tools are offered, JSON text otherwise, prose when nothing asks for JSON),
bare JSON text, JSON in a code fence after a line of prose, a tool call whenever tools are
offered, prose without JSON, or "other_call": a small model behind a server that ignores a named
tool_choice writes a call of the dialog's search tool as text, unless asked for JSON in words (as
Qwen2.5 0.5B through llama-server does); or "no_json": the judged draft never as readable JSON
(a call of another name written as text, as that model wrote it), other schemas as JSON text."""

FEATURES = ("tools", "json_schema", "json_object")
STEPS = ("call_tools", "reformulate_query", "answer", "judged_answer", "check_support",
         "condense", "unknown")
JUDGED_SCHEMA = "JudgedDraft"
"""The answer step's structured reply when it also judges the confidence: level and answer."""
SUPPORT_SCHEMA = "SupportJudgement"
SUPPORT_JUDGES = ("quotes", "all", "none")
"""What the double's support judgement confirms of the sentences sent to it: those whose words
stand, in order, in a source they cite (a careful reader of quotes); all; or none."""


def _head(prompt: str) -> str:
    stripped = prompt.strip()
    return stripped.splitlines()[0][:40] if stripped else ""


_HEADS = {
    _head(CALL_TOOLS_SYSTEM): "call_tools",
    _head(REFORMULATE_QUERY_SYSTEM): "reformulate_query",
    _head(ANSWER_SYSTEM): "answer",
    _head(JUDGED_ANSWER_SYSTEM): "judged_answer",  # the answer step that also judges
    _head(CHECK_SUPPORT_SYSTEM): "check_support",
    _head(CONDENSE_QUESTION_SYSTEM): "condense",
}


# --- behaviour ----------------------------------------------------------------------------------


@dataclass
class Fault:
    """A failure the server returns instead of a reply.

    `body` set: that raw body is sent with `status` and `content_type` (status 200 with a broken
    body is a malformed reply). `times` limits the fault to that many matching requests (None:
    all of them); `step` limits it to one step of the agent ("*": any).
    """

    status: int = 500
    step: str = "*"
    times: int | None = None
    retry_after: float | None = None
    body: str | None = None
    content_type: str = "application/json"
    message: str | None = None
    delay_s: float = 0.0

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any]) -> Fault:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in raw.items() if k in names})


@dataclass
class Behaviour:
    """What the double does; every field has a default, so a test sets only what it varies."""

    mode: str = "cooperative"  # cooperative | oracle
    style: str = "before_stop"  # one of STYLES
    structured: str = "auto"  # one of STRUCTURED
    supports: tuple[str, ...] = FEATURES
    refuse_unsupported: bool = True  # 400 for an unsupported feature; False: ignore it
    confidence: str = "HIGH"  # the cooperative level
    can_answer: bool = True
    pick: str = "first"  # cooperative sentence of source 1: first | best (most question words)
    extra_sentence: bool = False  # cooperative: a second sentence, quoting source 2
    invalid_tool_args: tuple[str, ...] = ()  # steps whose tool call fails the tool's schema
    broken_tool_json: tuple[str, ...] = ()  # steps whose tool call arguments are not JSON
    latency_s: float = 0.0
    latency_steps: tuple[str, ...] = ()  # steps the latency applies to (empty: every step)
    faults: list[Fault] = field(default_factory=list)
    tool_name: str | None = None  # call_tools: call this tool (one outside the allow-list)
    answer_text: str | None = None  # the answer step replies with this text, as it is
    support_judge: str = "quotes"  # one of SUPPORT_JUDGES

    def __post_init__(self) -> None:
        if self.mode not in ("cooperative", "oracle"):
            raise ValueError(f"mode must be cooperative or oracle, not {self.mode!r}")
        if self.style not in STYLES:
            raise ValueError(f"style must be one of {', '.join(STYLES)}, not {self.style!r}")
        if self.structured not in STRUCTURED:
            raise ValueError(f"structured must be one of {', '.join(STRUCTURED)}")
        if self.support_judge not in SUPPORT_JUDGES:
            raise ValueError(f"support_judge must be one of {', '.join(SUPPORT_JUDGES)}")
        self.supports = tuple(self.supports)
        self.invalid_tool_args = tuple(self.invalid_tool_args)
        self.broken_tool_json = tuple(self.broken_tool_json)
        self.latency_steps = tuple(self.latency_steps)
        self.faults = [f if isinstance(f, Fault) else Fault.from_mapping(f) for f in self.faults]

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any], base: Behaviour | None = None) -> Behaviour:
        names = {f.name for f in fields(cls)}
        unknown = set(raw) - names
        if unknown:
            raise ValueError(f"unknown behaviour field(s): {', '.join(sorted(unknown))}")
        return replace(base or cls(), **dict(raw))

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


# --- reading a request --------------------------------------------------------------------------


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(p.get("text", "")) if isinstance(p, dict) else str(p) for p in content
        )
    return "" if content is None else str(content)


def _messages(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [m for m in body.get("messages") or [] if isinstance(m, dict)]


def _system(body: Mapping[str, Any]) -> str:
    for m in _messages(body):
        if m.get("role") in ("system", "developer"):
            return _content_text(m.get("content"))
    return ""


def _user_text(body: Mapping[str, Any]) -> str:
    return "\n".join(
        _content_text(m.get("content")) for m in _messages(body) if m.get("role") == "user"
    )


def _tool_names(body: Mapping[str, Any]) -> list[str]:
    out = []
    for t in body.get("tools") or []:
        fn = t.get("function") if isinstance(t, dict) else None
        if isinstance(fn, dict) and fn.get("name"):
            out.append(str(fn["name"]))
    return out


def _response_format(body: Mapping[str, Any]) -> dict[str, Any]:
    rf = body.get("response_format")
    return rf if isinstance(rf, dict) else {}


def request_kind(body: Mapping[str, Any]) -> str:
    """How a request asks for its reply: json_schema, json_object, tools or text."""
    rf_type = _response_format(body).get("type")
    if rf_type in ("json_schema", "json_object"):
        return str(rf_type)
    return "tools" if body.get("tools") else "text"


def detect_step(body: Mapping[str, Any]) -> str:
    """The agent's step: by its system prompt first, then by what the request carries."""
    head = _head(_system(body))
    for prefix, step in _HEADS.items():
        if prefix and head.startswith(prefix):
            return step
    rf = _response_format(body)
    schema_name = (rf.get("json_schema") or {}).get("name") if rf else None
    if SUPPORT_SCHEMA in _tool_names(body) or schema_name == SUPPORT_SCHEMA:
        return "check_support"
    if JUDGED_SCHEMA in _tool_names(body) or schema_name == JUDGED_SCHEMA:
        return "judged_answer"
    user = _user_text(body)
    if "<sources>" in user:
        return "answer"
    if "<tried_queries>" in user:
        return "reformulate_query"
    if "<latest_question>" in user:
        return "condense"
    return "call_tools" if body.get("tools") else "unknown"


_QUESTION = re.compile(r"<question>\s*(.*?)\s*</question>", re.DOTALL)
_LATEST = re.compile(r"<latest_question>\s*(.*?)\s*</latest_question>", re.DOTALL)
_ATTR = re.compile(r'([\w-]+)="([^"]*)"')
# attributes are quoted, so a ">" inside one (a section "Guide > Setup") does not end the tag
_TAG_ATTRS = r"((?:\s+[\w-]+=\"[^\"]*\")*)\s*>"
_SOURCE = re.compile(r"<source" + _TAG_ATTRS + r"(.*?)</source>", re.DOTALL)


def question_of(body: Mapping[str, Any]) -> str:
    """The question the agent asks about (its <question> block), unescaped."""
    found = _QUESTION.findall(_user_text(body))
    return html.unescape(found[-1]).strip() if found else ""


@dataclass
class Source:
    n: int
    title: str
    text: str
    section: str = ""


def _sources_block(body: Mapping[str, Any]) -> str:
    """The text of the request's <sources> block ("" when it has none)."""
    user = _user_text(body)
    start, end = user.rfind("<sources>"), user.rfind("</sources>")
    return user[start + len("<sources>") : end] if 0 <= start < end else ""


def sources_of(body: Mapping[str, Any]) -> list[Source]:
    """The numbered sources of the answer step's <sources> block."""
    block = _sources_block(body) or _user_text(body)
    out = []
    for i, (attrs, text) in enumerate(_SOURCE.findall(block), 1):
        a = dict(_ATTR.findall(attrs))
        n = int(a["n"]) if a.get("n", "").isdigit() else i
        out.append(
            Source(
                n,
                html.unescape(a.get("title", "")),
                html.unescape(text.strip("\n")),
                html.unescape(a.get("section", "")),
            )
        )
    return out


@dataclass
class Passage:
    """A passage the oracle judges (a numbered source of the judged draft's request)."""

    doc_id: str
    title: str
    text: str


def asked_for_json(body: Mapping[str, Any]) -> bool:
    """A plain request whose last user message asks for JSON: a model then writes JSON."""
    users = [m for m in _messages(body) if m.get("role") == "user"]
    return bool(users) and "json" in _content_text(users[-1].get("content")).lower()


# --- text helpers (independent of the agent's own splitter, on purpose) -------------------------

_ABBREVIATIONS = frozenset({
    "mr", "mrs", "ms", "dr", "st", "mt", "ft", "jr", "sr", "prof", "gen", "col", "capt", "lt",
    "sgt", "rev", "hon", "gov", "sen", "rep", "pres", "co", "corp", "inc", "ltd", "no", "vol",
    "fig", "approx", "ca", "vs", "etc", "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep",
    "sept", "oct", "nov", "dec",
})
_END = re.compile(r"[.!?][\"')\]]*\s+")
_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+")


def table_rows(text: str) -> list[str]:
    """The rows of a Markdown table, each written out with its header as a model would state
    it: "Bin: Grey; Collected: Tuesday and Friday."."""
    out: list[str] = []
    header: list[str] | None = None
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("|"):
            header = None
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        if all(re.fullmatch(r":?-{2,}:?", c) for c in cells if c):
            continue
        if header is None:
            header = cells
            continue
        pairs = [f"{h}: {c}" for h, c in zip(header, cells, strict=False) if c]
        if pairs:
            out.append("; ".join(pairs) + ".")
    return out


def split_sentences(text: str) -> list[str]:
    """Sentences as a writer would quote them; headings (#) are skipped, list bullets dropped."""
    out: list[str] = []
    # paragraphs and list items; a hard-wrapped line inside a paragraph does not end a sentence
    for raw in re.split(r"\n\s*\n|\n(?=\s*(?:[-*•#|]|\d+[.)]\s))", text):
        line = " ".join(raw.split())
        if not line or line.startswith("#") or line.startswith("|"):
            continue
        line = _BULLET.sub("", line)
        start = 0
        for m in _END.finditer(line):
            nxt = line[m.end() : m.end() + 1]
            if not (nxt.isupper() or nxt.isdigit() or nxt in "\"'(["):
                continue
            words = line[start : m.start() + 1].split()
            word = words[-1] if words else ""
            bare = word.lstrip("(\"'").rstrip(".").lower()
            if word.endswith(".") and (
                bare in _ABBREVIATIONS or "." in bare or (len(bare) == 1 and bare.isalpha())
            ):
                continue
            out.append(line[start : m.end()].strip())
            start = m.end()
        rest = line[start:].strip()
        if rest:
            out.append(rest)
    return out


def normalise(text: str) -> str:
    """Lower case, accents folded, punctuation as spaces (as the evaluation grades answers)."""
    folded = unicodedata.normalize("NFKD", text)
    folded = "".join(c for c in folded if not unicodedata.combining(c))
    return " ".join(re.sub(r"[\W_]+", " ", folded.lower()).split())


def squash(text: str) -> str:
    return " ".join(html.unescape(text).split())


_STOP = frozenset({
    "a", "an", "and", "are", "as", "at", "be", "by", "can", "could", "did", "do", "does", "for",
    "from", "has", "have", "how", "i", "in", "is", "it", "its", "many", "much", "of", "on", "or",
    "the", "their", "there", "this", "to", "was", "were", "what", "when", "where", "which", "who",
    "whom", "whose", "why", "will", "with",
})


def key_words(question: str) -> str:
    words = [w for w in re.findall(r"[\w'-]+", question) if w.lower() not in _STOP]
    return " ".join(dict.fromkeys(words)) or question


# --- the answer: a quote with its marker, in a citation style -----------------------------------


@dataclass
class Item:
    """One quoted sentence and the source numbers its markers name."""

    sentence: str
    markers: list[int]


def _split_stop(sentence: str) -> tuple[str, str]:
    """("core", "stop"): the final punctuation (with a closing quote) apart from the rest."""
    s = sentence.strip()
    m = re.search(r"[.!?][\"')\]]*$", s)
    if m is None:
        return s, "."
    return s[: m.start()].rstrip(), s[m.start() :]


def _marks(markers: Sequence[int], style: str) -> str:
    if len(markers) > 1 and style == "comma":
        return "[" + ", ".join(str(n) for n in markers) + "]"
    if len(markers) == 2 and style == "range":
        lo, hi = sorted(markers)
        return f"[{lo}-{hi}]"
    return "".join(f"[{n}]" for n in markers)


def render(items: Sequence[Item], style: str, sources: Sequence[Source]) -> str:
    """The draft: each item's sentence closed by its markers, in the style."""
    if style == "bullets":
        lines = ["According to the sources:"]
        for it in items:
            core, _ = _split_stop(it.sentence)
            lines.append(f"- {core} {_marks(it.markers, style)}")
        return "\n".join(lines)
    parts = []
    for it in items:
        core, stop = _split_stop(it.sentence)
        marks = _marks(it.markers, style)
        if style == "paraphrase":
            parts.append(f"{LEAD_INS[0]} {core} {marks}{stop}")
        elif style == "after_stop":
            parts.append(f"{core}{stop} {marks}")
        elif style == "no_space":
            parts.append(f"{core}{stop}{marks}")
        else:
            parts.append(f"{core} {marks}{stop}")
    text = " ".join(parts)
    if style == "sources_list":
        titles = {s.n: s.title for s in sources}
        cited = list(dict.fromkeys(n for it in items for n in it.markers))
        text += "\n\nSources:\n" + "\n".join(f"[{n}] {titles.get(n, '')}".rstrip() for n in cited)
    return text


def markers_for(n: int, style: str, count: int, other: int | None) -> list[int]:
    """The markers of the main sentence: two sources for the multi-marker styles."""
    if style not in ("adjacent", "comma", "range") or count < 2:
        return [n]
    if style == "range" or other is None or other == n:
        other = n + 1 if n < count else n - 1
    return [n, other] if n < other else [other, n]


ABSTAIN = "The sources do not contain the answer to this question."


# --- the oracle: SQuAD questions and their gold passages ----------------------------------------


@dataclass
class Gold:
    id: str
    question: str
    answers: tuple[str, ...]
    gold_doc_id: str


class Oracle:
    """Knows each answerable question's gold passage and answers (questions.jsonl, kb_corpus.jsonl).

    `drafts` records, per question id, what the answer step was given and what was written, so a
    benchmark can tell the pipeline's losses from retrieval's.
    """

    def __init__(
        self, questions: Path, kb: Path | None = None, docs: Iterable[Mapping[str, Any]] | None = None
    ) -> None:
        """`kb`: a JSON Lines corpus (doc_id, title, text); `docs`: the same as records instead,
        for a project knowledge-base folder (evals.data.read_kb_dir_docs)."""
        self.by_question: dict[str, list[Gold]] = {}
        with questions.open(encoding="utf-8") as fh:
            for line in fh:
                if not line.strip():
                    continue
                o = json.loads(line)
                if o.get("kind") != "answerable" or not o.get("gold_doc_id"):
                    continue
                g = Gold(str(o["id"]), str(o["question"]).strip(),
                         tuple(str(a) for a in o.get("answers") or []), str(o["gold_doc_id"]))
                self.by_question.setdefault(normalise(g.question), []).append(g)
        self.text: dict[str, str] = {}
        self.by_title: dict[str, list[str]] = {}
        if docs is None:
            path = kb or questions.parent / "kb_corpus.jsonl"
            with path.open(encoding="utf-8") as fh:
                docs = [json.loads(line) for line in fh if line.strip()]
        for o in docs:
            doc_id = str(o["doc_id"])
            # two versions of one document: either one's passages belong to it
            self.text[doc_id] = (self.text.get(doc_id, "") + " " + squash(str(o.get("text") or ""))).strip()
            titles = self.by_title.setdefault(str(o.get("title") or ""), [])
            if doc_id not in titles:
                titles.append(doc_id)
        # a chunk of a Markdown document is not a substring of its source (markup, table rows
        # read out with their header): matched by normalised words instead
        self.words = {d: set(normalise(t).split()) for d, t in self.text.items()}
        self.drafts: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()

    def golds(self, question: str) -> list[Gold]:
        return self.by_question.get(normalise(question), [])

    def doc_of(self, title: str, text: str) -> str | None:
        """The knowledge-base document a passage was cut from (by its text)."""
        needle = squash(text)
        if not needle:
            return None
        for doc_id in self.by_title.get(title, []):
            if needle in self.text[doc_id]:
                return doc_id
        for doc_id, hay in self.text.items():
            if needle in hay:
                return doc_id
        words = set(normalise(text).split())
        if not words:
            return None
        share = {d: len(words & w) / len(words) for d, w in self.words.items()}
        best = max(share, key=share.__getitem__)
        return best if share[best] >= 0.9 else None

    def judge(self, question: str, passages: Sequence[Passage]) -> tuple[str, bool, str]:
        golds = self.golds(question)
        if not golds:
            return "NOT_RELEVANT", False, "the question is not one the oracle can answer"
        ids = {g.gold_doc_id for g in golds}
        for p in passages:
            if p.doc_id in ids or self.doc_of(p.title, p.text) in ids:
                return "HIGH", True, "the gold passage is among the results"
        return "LOW", False, "the gold passage is not among the results"

    def draft(self, question: str, sources: Sequence[Source], style: str) -> str:
        golds = self.golds(question)
        docs = {s.n: self.doc_of(s.title, s.text) for s in sources}
        record: dict[str, Any] = {
            "question": question,
            "id": golds[0].id if golds else None,
            "gold_doc_id": golds[0].gold_doc_id if golds else None,
            "style": style,
            "gold_n": None,
            "correct": False,
            "items": [],
            "draft": ABSTAIN,
            "sources": [{"n": s.n, "doc_id": docs[s.n]} for s in sources],
        }
        chosen: tuple[Gold, Source, list[str]] | None = None
        for g in golds:
            answers = [normalise(a) for a in g.answers if normalise(a)]
            for s in sources:
                if docs[s.n] != g.gold_doc_id:
                    continue
                sentences = split_sentences(s.text) + table_rows(s.text)
                hits = [x for x in sentences if any(f" {a} " in f" {normalise(x)} " for a in answers)]
                if not hits:  # an answer across two sentences: quote both
                    for a, b in itertools.pairwise(sentences):
                        joined = f" {normalise(a + ' ' + b)} "
                        if any(f" {ans} " in joined for ans in answers):
                            hits = [a, b]
                            break
                    else:
                        continue
                else:
                    hits = hits[:1]
                chosen = (g, s, hits)
                break
            if chosen:
                break
        if chosen is None:
            with self._lock:
                self.drafts[record["id"] or question] = record
            return ABSTAIN
        g, gold_source, quoted = chosen
        n = gold_source.n
        others = [s for s in sources if s.n != n and docs[s.n] != g.gold_doc_id]
        extra: Source | None = None
        extra_sentence = ""
        for s in others:
            first = next((x for x in split_sentences(s.text) if len(x.split()) >= 4), "")
            if first:
                extra, extra_sentence = s, first
                break
        items = [Item(x, [n]) for x in quoted]
        items[-1].markers = markers_for(n, style, len(sources), extra.n if extra else None)
        quoted_from: list[str | None] = [g.gold_doc_id] * len(items)
        if extra is not None:
            items.append(Item(extra_sentence, [extra.n]))
            quoted_from.append(docs[extra.n])
        text = render(items, style, sources)
        record.update(
            id=g.id,
            gold_doc_id=g.gold_doc_id,
            gold_n=n,
            correct=True,
            draft=text,
            items=[
                {"sentence": it.sentence, "markers": it.markers, "quoted_from": src,
                 "doc_ids": [docs.get(k) for k in it.markers]}
                for it, src in zip(items, quoted_from, strict=True)
            ],
        )
        with self._lock:
            self.drafts[g.id] = record
        return text


# --- the server ---------------------------------------------------------------------------------


@dataclass
class Reply:
    content: str | None = None
    tool_calls: list[tuple[str, str]] = field(default_factory=list)  # (name, arguments text)


class ModelDouble:
    """The OpenAI-compatible double; `app` is its ASGI app, `serve()` runs it on loopback."""

    def __init__(self, behaviour: Behaviour | None = None, oracle: Oracle | None = None) -> None:
        self.behaviour = behaviour or Behaviour()
        self._initial = self.behaviour
        self.oracle = oracle
        self.requests: list[dict[str, Any]] = []
        self.answers: list[dict[str, Any]] = []
        """Cooperative drafts: question, style, draft, items (sentence, markers), sources."""
        self._lock = threading.Lock()
        self._fault_hits: dict[int, int] = {}
        self._answered_from: dict[str, str] = {}
        """An answer request's sources block -> its question (what a support judgement serves)."""
        self.app = Starlette(
            routes=[
                Route("/v1/chat/completions", self._chat, methods=["POST"]),
                Route("/chat/completions", self._chat, methods=["POST"]),
                Route("/v1/models", self._models, methods=["GET"]),
                Route("/_control", self._control, methods=["GET", "POST"]),
                Route("/_requests", self._requests, methods=["GET"]),
                Route("/_oracle", self._oracle, methods=["GET"]),
                Route("/health", self._health, methods=["GET"]),
            ]
        )

    # control ----------------------------------------------------------------------------------

    def configure(self, *, reset: bool = True, **changes: Any) -> Behaviour:
        """Sets the behaviour: `changes` over the behaviour the double started with (and a clear
        log) when `reset`, else over the current one."""
        with self._lock:
            base = self._initial if reset else self.behaviour
            self.behaviour = Behaviour.from_mapping(changes, base)
            self._fault_hits.clear()
            if reset:
                self.requests.clear()
                self.answers.clear()
                self._answered_from.clear()
                if self.oracle is not None:
                    self.oracle.drafts.clear()
            return self.behaviour

    def steps(self) -> list[str]:
        """The step of each request received, in order."""
        with self._lock:
            return [r["step"] for r in self.requests]

    @contextmanager
    def serve(self, host: str = "127.0.0.1", port: int = 0) -> Iterator[str]:
        """Runs the double under uvicorn in a thread; yields the base URL (…/v1)."""
        with serving(self.app, host, port) as url:
            yield f"{url}/v1"

    # handlers ---------------------------------------------------------------------------------

    async def _health(self, request: Request) -> Response:
        return JSONResponse({"ok": True})

    async def _models(self, request: Request) -> Response:
        return JSONResponse(
            {"object": "list", "data": [{"id": "double", "object": "model", "owned_by": "tests"}]}
        )

    async def _control(self, request: Request) -> Response:
        if request.method == "POST":
            raw = await request.json()
            if not isinstance(raw, dict):
                return _error(400, "the control body must be a JSON object")
            reset = bool(raw.pop("reset", False))
            try:
                self.configure(reset=reset, **raw)
            except (TypeError, ValueError) as exc:
                return _error(400, str(exc))
        return JSONResponse(self.behaviour.to_json())

    async def _requests(self, request: Request) -> Response:
        with self._lock:
            return JSONResponse(list(self.requests))

    async def _oracle(self, request: Request) -> Response:
        if self.oracle is None:
            return JSONResponse({})
        with self.oracle._lock:
            return JSONResponse(dict(self.oracle.drafts))

    async def _chat(self, request: Request) -> Response:
        behaviour = self.behaviour
        raw = await request.body()
        try:
            body = json.loads(raw)
            assert isinstance(body, dict)
        except (ValueError, AssertionError):
            return _error(400, "the request body is not a JSON object")
        step = detect_step(body)
        entry: dict[str, Any] = {
            "step": step,
            "kind": request_kind(body),
            "stream": bool(body.get("stream")),
            "tools": _tool_names(body),
            "tool_choice": body.get("tool_choice"),
            "response_format": _response_format(body).get("type"),
            "question": self._question(step, body),
            "at": time.time(),
            "status": 200,
            "max_tokens": body.get("max_tokens"),
            "max_completion_tokens": body.get("max_completion_tokens"),
            "null_content": any(
                isinstance(m, dict) and "content" in m and m["content"] is None
                for m in body.get("messages") or []
            ),
        }
        with self._lock:
            self.requests.append(entry)
            fault = self._take_fault(behaviour, step)
        if behaviour.latency_s and (not behaviour.latency_steps or step in behaviour.latency_steps):
            await asyncio.sleep(behaviour.latency_s)
        if fault is not None:
            if fault.delay_s:
                await asyncio.sleep(fault.delay_s)
            entry["status"] = fault.status
            entry["fault"] = True
            return _fault_response(fault)
        unsupported = [f for f in _features(body) if f not in behaviour.supports]
        if unsupported and behaviour.refuse_unsupported:
            entry["status"] = 400
            return _error(400, _refusal(unsupported[0]), param=unsupported[0])
        if unsupported:  # a server that ignores what it does not support
            body = {k: v for k, v in body.items() if k not in ("tools", "tool_choice")} if (
                "tools" in unsupported
            ) else dict(body)
            if set(unsupported) & {"json_schema", "json_object"}:
                body.pop("response_format", None)
        reply = self._reply(step, body, behaviour)
        usage = _usage(body, reply)
        if body.get("stream"):
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            return StreamingResponse(
                _sse(reply, str(body.get("model") or "double"), usage if include_usage else None),
                media_type="text/event-stream",
            )
        return JSONResponse(_completion(reply, str(body.get("model") or "double"), usage))

    def _question(self, step: str, body: dict[str, Any]) -> str:
        """The question a request serves. The support judgement's prompt names none (the judge
        reads claims and sources only): it serves the answer whose sources block it repeats."""
        block = _sources_block(body)
        if step == "check_support":
            with self._lock:
                return self._answered_from.get(block, "")
        question = question_of(body)
        if step in ("answer", "judged_answer") and block:
            with self._lock:
                self._answered_from[block] = question
        return question

    def _take_fault(self, behaviour: Behaviour, step: str) -> Fault | None:
        for i, f in enumerate(behaviour.faults):
            if f.step not in ("*", step):
                continue
            used = self._fault_hits.get(i, 0)
            if f.times is not None and used >= f.times:
                continue
            self._fault_hits[i] = used + 1
            return f
        return None

    # the model --------------------------------------------------------------------------------

    def _reply(self, step: str, body: dict[str, Any], b: Behaviour) -> Reply:
        question = question_of(body)
        if step == "call_tools":
            return self._call_tools(body, question, b)
        if step == "reformulate_query":
            return Reply(content=key_words(question))
        if step == "condense":
            found = _LATEST.findall(_user_text(body))
            return Reply(content=html.unescape(found[-1]).strip() if found else question)
        if step == "judged_answer":
            return self._judged(body, question, b)
        if step == "answer":
            return Reply(content=self._answer(body, question, b))
        if step == "check_support":
            return self._support(body, b)
        return Reply(content="OK.")

    def _call_tools(self, body: dict[str, Any], question: str, b: Behaviour) -> Reply:
        names = _tool_names(body)
        if not names:
            return Reply(content="I would search the knowledge base for this question.")
        name = "knowledge_base" if "knowledge_base" in names else names[0]
        if b.tool_name is not None:
            name = b.tool_name
        if "call_tools" in b.broken_tool_json:
            args = '{"query": "' + question[:20]
        elif "call_tools" in b.invalid_tool_args:
            args = json.dumps({"query": "", "k": 99})
        else:
            args = json.dumps({"query": question})
        return Reply(tool_calls=[(name, args)])

    def _judged(self, body: dict[str, Any], question: str, b: Behaviour) -> Reply:
        """The answer step that also judges: the confidence as `_confidence` gives it over the
        numbered sources, and for HIGH or MEDIUM the answer `_answer` writes, in one reply."""
        if b.mode == "oracle" and self.oracle is not None:
            shown = [Passage("", s.title, s.text) for s in sources_of(body)]
            level, can_answer, reason = self.oracle.judge(question, shown)
        else:
            level, can_answer, reason = b.confidence, b.can_answer, "source 1 states the answer"
        judgement: dict[str, Any] = {"level": level, "reason": reason, "can_answer": can_answer}
        if level in ("HIGH", "MEDIUM") and can_answer:
            judgement["answer"] = self._answer(body, question, b)
        if b.mode == "oracle" and level == "LOW":
            judgement["query"] = key_words(question)  # the words it would give the rewrite step
        if "judged_answer" in b.invalid_tool_args:
            judgement = {"level": "CERTAIN", "can_answer": "perhaps"}
        text = json.dumps(judgement)
        if "judged_answer" in b.broken_tool_json:
            text = text[: len(text) // 2]
        prose = "The sources state the answer directly, so I am confident."
        if b.structured == "no_json":
            return Reply(content='{"name": "answer", "arguments": ["25%"]}')
        return _structured(body, b, JUDGED_SCHEMA, text, prose)

    def _support(self, body: dict[str, Any], b: Behaviour) -> Reply:
        claims = claims_of(body)
        # a table row stated with its header ("Day: Saturday; Hours: 10:00 to 17:00") is a quote
        texts = {src.n: " | ".join(normalise(x) for x in [src.text, *table_rows(src.text)])
                 for src in sources_of(body)}
        supported = [
            n for n, (claim, cites) in enumerate(claims, 1)
            if b.support_judge == "all"
            or (b.support_judge == "quotes"
            and any(normalise(_without_lead_in(claim)) in texts.get(c, "") for c in cites))
        ]
        text = json.dumps({"supported": supported})
        if "check_support" in b.broken_tool_json:
            text = text[: len(text) // 2]
        return _structured(body, b, SUPPORT_SCHEMA, text, "Each claim was checked.")

    def _answer(self, body: dict[str, Any], question: str, b: Behaviour) -> str:
        if b.answer_text is not None:
            return b.answer_text
        sources = sources_of(body)
        if not sources:
            return ABSTAIN
        if b.mode == "oracle" and self.oracle is not None:
            return self.oracle.draft(question, sources, b.style)
        first = sources[0]
        sentences = [x for x in split_sentences(first.text) if len(x.split()) >= 3] or [
            first.text.strip()
        ]
        chosen = sentences[0]
        if b.pick == "best":
            words = set(normalise(question).split()) - _STOP
            chosen = max(sentences, key=lambda x: len(words & set(normalise(x).split())))
        second = next(
            (x for s in sources[1:2] for x in split_sentences(s.text) if len(x.split()) >= 3), None
        )
        items = [Item(chosen, markers_for(1, b.style, len(sources), 2))]
        if second and (b.extra_sentence or b.style == "bullets"):
            items.append(Item(second, [2]))
        text = render(items, b.style, sources)
        with self._lock:
            self.answers.append({
                "question": question,
                "style": b.style,
                "draft": text,
                "items": [asdict(it) for it in items],
                "sources": [asdict(src) for src in sources],
            })
        return text


_CLAIM = re.compile(r"<claim" + _TAG_ATTRS + r"(.*?)</claim>", re.DOTALL)


def _without_lead_in(claim: str) -> str:
    for lead in LEAD_INS:
        if claim.startswith(lead):
            return claim[len(lead):].strip()
    return claim


def claims_of(body: Mapping[str, Any]) -> list[tuple[str, list[int]]]:
    """The support judgement's numbered claims: text and the source numbers each cites."""
    out = []
    for attrs, text in _CLAIM.findall(_user_text(body)):
        cites = dict(_ATTR.findall(attrs)).get("cites", "")
        out.append((html.unescape(text.strip()), [int(c) for c in cites.split() if c.isdigit()]))
    return out


def _structured(body: Mapping[str, Any], b: Behaviour, schema: str, text: str, prose: str) -> Reply:
    """A structured reply shaped as `b.structured` says and the request allows."""
    kind = request_kind(body)
    if b.structured == "prose":
        return Reply(content=prose)
    if b.structured == "other_call" and not asked_for_json(body):
        call = {"name": "knowledge_base", "arguments": {"query": "the question", "k": 3}}
        return Reply(content=f"{json.dumps(call)}\n{json.dumps(call)}")
    if b.structured in ("json", "other_call", "no_json"):
        return Reply(content=text)
    if b.structured == "fenced":
        return Reply(content=f"Here is my judgement:\n```json\n{text}\n```")
    if kind == "tools" and schema in _tool_names(body):
        return Reply(tool_calls=[(schema, text)])
    if b.structured == "tool_call" or kind in ("json_schema", "json_object"):
        return Reply(content=text)
    return Reply(content=text) if asked_for_json(body) else Reply(content=prose)


def _features(body: Mapping[str, Any]) -> list[str]:
    out = []
    if body.get("tools"):
        out.append("tools")
    rf_type = _response_format(body).get("type")
    if rf_type in ("json_schema", "json_object"):
        out.append(str(rf_type))
    return out


def _refusal(feature: str) -> str:
    """What servers say when they lack a feature (vLLM, OpenAI)."""
    if feature == "tools":
        return (
            '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be '
            "set; this server does not support tools"
        )
    return f"'response_format' of type '{feature}' is not supported with this model"


def _error(status: int, message: str, *, param: str | None = None,
           headers: dict[str, str] | None = None) -> Response:
    kind = {400: "invalid_request_error", 401: "authentication_error", 429: "rate_limit_error"}
    return JSONResponse(
        {"error": {"message": message, "type": kind.get(status, "server_error"), "param": param,
                   "code": None}},
        status_code=status,
        headers=headers,
    )


def _fault_response(fault: Fault) -> Response:
    headers = {}
    if fault.retry_after is not None:
        headers["Retry-After"] = f"{fault.retry_after:g}"
    if fault.body is not None:
        return Response(fault.body, status_code=fault.status, media_type=fault.content_type,
                        headers=headers)
    message = fault.message or {
        429: "Rate limit reached for requests",
        500: "The server had an error while processing your request",
        502: "Bad gateway",
        503: "The engine is currently overloaded, please try again later",
    }.get(fault.status, "error")
    return _error(fault.status, message, headers=headers)


def _usage(body: Mapping[str, Any], reply: Reply) -> dict[str, int]:
    prompt = sum(len(_content_text(m.get("content"))) for m in _messages(body)) // 4 + 1
    out = len(reply.content or "") + sum(len(a) for _, a in reply.tool_calls)
    completion = out // 4 + 1
    return {"prompt_tokens": prompt, "completion_tokens": completion,
            "total_tokens": prompt + completion}


def _call_id() -> str:
    return f"call_{uuid.uuid4().hex[:12]}"


def _completion(reply: Reply, model: str, usage: dict[str, int]) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.content, "refusal": None}
    if reply.tool_calls:
        message["tool_calls"] = [
            {"id": _call_id(), "type": "function", "function": {"name": n, "arguments": a}}
            for n, a in reply.tool_calls
        ]
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:16]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "system_fingerprint": "fp_double",
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": "tool_calls" if reply.tool_calls else "stop",
            }
        ],
        "usage": usage,
    }


async def _sse(reply: Reply, model: str, usage: dict[str, int] | None) -> AsyncIterator[str]:
    """The reply as chat.completion.chunk events, content and arguments in several pieces."""
    cid, created = f"chatcmpl-{uuid.uuid4().hex[:16]}", int(time.time())

    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        return "data: " + json.dumps({
            "id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
            "system_fingerprint": "fp_double",
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        }) + "\n\n"

    yield chunk({"role": "assistant", "content": "" if not reply.tool_calls else None})
    content = reply.content or ""
    for i in range(0, len(content), 24):
        yield chunk({"content": content[i : i + 24]})
        await asyncio.sleep(0)
    for index, (name, args) in enumerate(reply.tool_calls):
        yield chunk({"tool_calls": [{"index": index, "id": _call_id(), "type": "function",
                                     "function": {"name": name, "arguments": ""}}]})
        half = len(args) // 2
        for piece in (args[:half], args[half:]):
            yield chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
    yield chunk({}, "tool_calls" if reply.tool_calls else "stop")
    if usage is not None:
        yield "data: " + json.dumps({
            "id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
            "choices": [], "usage": usage,
        }) + "\n\n"
    yield "data: [DONE]\n\n"


@contextmanager
def serving(app: Any, host: str = "127.0.0.1", port: int = 0,
            startup_timeout_s: float = 30.0) -> Iterator[str]:
    """Serves `app` under uvicorn in a daemon thread; port 0 lets the OS choose a free one."""
    import uvicorn

    server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning",
                                           lifespan="off"))
    thread = threading.Thread(target=server.run, name="openai-double", daemon=True)
    thread.start()
    deadline = time.monotonic() + startup_timeout_s
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            raise RuntimeError("the model double did not start")
        time.sleep(0.02)
    bound = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://{host}:{bound}"
    finally:
        server.should_exit = True
        thread.join(timeout=15)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0: a free port, printed on start")
    parser.add_argument("--behaviour", choices=("cooperative", "oracle"), default="cooperative")
    parser.add_argument("--style", choices=STYLES, default="before_stop")
    parser.add_argument("--structured", choices=STRUCTURED, default="auto")
    parser.add_argument("--supports", default=",".join(FEATURES),
                        help="comma-separated features the server accepts (tools, json_schema, "
                        "json_object); others get 400")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds per request")
    parser.add_argument("--confidence", default="HIGH",
                        help="cooperative: the level every judgement gives (HIGH, MEDIUM, ...)")
    parser.add_argument("--pick", choices=("first", "best"), default="first",
                        help="cooperative: quote source 1's first sentence, or the one sharing "
                        "the most words with the question")
    parser.add_argument("--questions", type=Path, help="questions.jsonl (oracle)")
    parser.add_argument("--kb", type=Path, help="kb_corpus.jsonl (oracle; default: beside it)")
    args = parser.parse_args(argv)
    oracle = None
    if args.behaviour == "oracle":
        if args.questions is None:
            parser.error("--behaviour oracle needs --questions")
        oracle = Oracle(args.questions, args.kb)
    behaviour = Behaviour(
        mode=args.behaviour, style=args.style, structured=args.structured,
        supports=tuple(s.strip() for s in args.supports.split(",") if s.strip()),
        latency_s=args.latency, confidence=args.confidence, pick=args.pick,
    )
    double = ModelDouble(behaviour, oracle)

    def stop(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    with double.serve(args.host, args.port) as url:
        print(f"OPENAI_BASE_URL={url}", flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
