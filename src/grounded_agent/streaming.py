"""What a client sees while a run goes on: checked sentences as they form, never the raw draft.

Events go out on LangGraph's `custom` stream mode (the node's `runtime.stream_writer`), each a
dict with an `event` key:

- `source`: a source returned: {"event", "source", "status", "passages", "coverage"}
- `sentence`: one sentence of the answer, checked: {"event", "n", "text", "citations"}; `text`
  is as the answer shows it (markers renumbered, neutralised), `citations` the Citation dicts of
  its markers
- `removed`: sentences the check removed: {"event", "count", "detail"} (never their text)
- `result`: the run's AgentResult as JSON: {"event", "result"}; its answer begins with the
  sentences streamed, joined by a space

`SentenceStream` checks the model's draft while it streams. A claim of the draft is final once
the next one has begun (a marker after its full stop or a lower-case word could still change
it), or once it closes with markers before its full stop ("... 49 EUR [1]."), the way the prompt
asks for: then it is emitted at once, without waiting for the next sentence. A final claim is
checked as the whole draft would check it (citations.check_answer, renumbering included: only
earlier sentences decide a sentence's numbers). Checks that need the whole draft hold the rest
back, and the answer node emits it after them: the support judgement (one model call for every
sentence that quotes no passage word for word: the stream stops at the first such sentence), the
trained judge's veto of a model answer (Context.judge_model_answers: nothing streams), a draft
without any marker (cited whole by draft_answer: nothing streams before the first marker), and a
translation (nothing streams in the sources' language). Removal notices are sent with the rest:
whether a trailing line is a claim or a reference list is only known at the end. Where the draft
call also judges the level (a JSON reply), its answer streams from inside the JSON once the
level is known (`JudgedAnswer`).
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from langchain_core.messages import BaseMessage
from langchain_core.utils.json import parse_partial_json

from grounded_agent.grounding.citations import MARKER, Checked, check_answer
from grounded_agent.llm.calls import ai_text
from grounded_agent.schemas import AgentResult, Citation, Finding
from grounded_agent.state import add_usage, extend_or_reset
from grounded_agent.untrusted.display import neutral, shown_source

log = logging.getLogger(__name__)

EventKind = Literal["source", "sentence", "removed", "result"]
EVENT_KINDS: tuple[EventKind, ...] = ("source", "sentence", "removed", "result")

Writer = Callable[[Any], None]

_CLOSED = re.compile(r"\]\s*[.!?][\"'”’)]*\s*$")
"""A draft that ends with markers before a full stop: the sentence they close is complete."""
_MAY_CLOSE = re.compile(r"[.!?\]\n]")
"""A piece of text after which a claim may have become final (nothing else changes that)."""


def source_event(source: str, status: str, passages: int, coverage: str) -> dict[str, Any]:
    return {"event": "source", "source": source, "status": status, "passages": passages,
            "coverage": coverage}


def sentence_event(n: int, text: str, citations: Sequence[Citation]) -> dict[str, Any]:
    """`text` as shown already; the citations' titles and sections neutralised here, as the
    result's are (display.shown_source)."""
    return {"event": "sentence", "n": n, "text": text,
            "citations": [shown_source(c).model_dump(mode="json") for c in citations]}


def removed_event(count: int) -> dict[str, Any]:
    return {"event": "removed", "count": count,
            "detail": f"{count} sentence(s) not supported by their cited sources removed"}


def result_event(result: AgentResult) -> dict[str, Any]:
    return {"event": "result", "result": result.model_dump(mode="json")}


def shown_sentence(text: str, citations: Sequence[Citation]) -> str:
    """A checked sentence as the answer shows it (display.neutral, as the answer node does):
    `citations` are those of the answer up to this sentence."""
    shown = [shown_source(c) for c in citations]
    return neutral(text, urls=[c.url for c in shown if c.url], markers=len(shown))


@dataclass
class SentenceStream:
    """Checks a streamed draft claim by claim and writes each kept sentence once it is final.

    `judge_after`: a sentence that quotes no passage word for word waits for the support
    judgement (LLM mode), so nothing after it is emitted here. `hold`: nothing is emitted while
    drafting (a check of the whole draft or a translation comes first)."""

    evidence: Sequence[Finding]
    write: Writer
    judge_after: bool = True
    hold: bool = False
    text: str = ""
    sent: list[str] = field(default_factory=list)
    """The sentences emitted, as shown."""
    done: int = 0
    """Claims decided (kept and emitted, or removed for good)."""
    blocked: bool = False
    pending: bool = False
    """The last piece closed a claim that the next words may make final."""
    checks: int = 0
    """How often the draft so far was checked (about twice a sentence)."""

    def __call__(self, chunk: BaseMessage) -> None:
        """One chunk of a streamed reply (model_calls.ask_model's `on_chunk`)."""
        self.feed(ai_text(chunk))

    def feed(self, piece: str) -> None:
        """One more piece of the model's reply."""
        self.text += piece
        closes = bool(_MAY_CLOSE.search(piece))
        if self.hold or self.blocked or not (closes or (self.pending and piece.strip())):
            return  # checked about twice a sentence, not once a token
        if not MARKER.search(self.text):
            return  # a draft without markers is cited whole (draft_answer)
        checked = check_answer(self.text, self.evidence)
        self.checks += 1
        outcomes = checked.outcomes
        last_final = bool(outcomes) and outcomes[-1] == "kept" and _CLOSED.search(self.text)
        final = outcomes if last_final else outcomes[:-1]
        self._advance(checked, final)
        # a claim that looks complete waits for the next one to begin
        self.pending = closes and len(outcomes) > self.done

    def _advance(self, checked: Checked, final: Sequence[str]) -> None:
        kept = sum(1 for o in final[: self.done] if o == "kept")
        for outcome in final[self.done:]:
            if outcome == "doubted" and self.judge_after:
                self.blocked = True  # the judgement reads every such sentence at once, later
                return
            if outcome == "kept":
                self._emit(checked, kept)
                kept += 1
            self.done += 1

    def _emit(self, checked: Checked, index: int) -> None:
        if index < len(self.sent):
            return
        text, numbers = checked.sentences[index]
        upto = max((n for _, ns in checked.sentences[: index + 1] for n in ns), default=0)
        shown = shown_sentence(text, checked.citations[:upto])
        self.sent.append(shown)
        self.write(sentence_event(index, shown, [checked.citations[n - 1] for n in numbers]))


@dataclass
class JudgedAnswer:
    """Streams the answer inside a judged draft's JSON (schemas.JudgedDraft: level, reason,
    can_answer, answer) as it is written, once the JSON has said HIGH or MEDIUM and can_answer:
    read from the tool call's arguments, or from the content (json_schema, JSON in text). A
    second request (the first reply could not be read) streams nothing more: what the first
    emitted stands or is replaced in the result, and the mismatch is logged (emit_rest)."""

    stream: SentenceStream
    raw: str = ""
    fed: str = ""
    reply: str | None = None

    def __call__(self, chunk: BaseMessage) -> None:
        if self.reply is not None and chunk.id != self.reply:
            self.stream.hold = True
        self.reply = chunk.id
        parts = getattr(chunk, "tool_call_chunks", None) or []
        self.raw += "".join(str(p.get("args") or "") for p in parts) if parts else ai_text(chunk)
        start = self.raw.find("{")
        value = parse_partial_json(self.raw[start:]) if start != -1 else None
        if not isinstance(value, dict) or value.get("can_answer") is not True or str(
                value.get("level") or "").upper() not in ("HIGH", "MEDIUM"):
            return
        answer = value.get("answer")
        if isinstance(answer, str) and answer.startswith(self.fed) and answer != self.fed:
            self.stream.feed(answer[len(self.fed):])
            self.fed = answer


def emit_rest(
    write: Writer, sentences: Sequence[tuple[str, list[int]]], citations: Sequence[Citation],
    streamed: Sequence[str], removed: int,
) -> list[str]:
    """Emits the checked sentences not streamed yet, then the removal notice; returns every
    sentence as shown. Where the streamed ones are not the check's first sentences (which the
    stream's rule of finality prevents), the check's stand and the mismatch is logged."""
    shown: list[str] = []
    upto = 0
    for text, numbers in sentences:
        upto = max([upto, *numbers])
        shown.append(shown_sentence(text, citations[:upto]))
    if list(streamed) != shown[: len(streamed)]:
        log.error("streamed sentences differ from the checked answer's; the answer stands")
    for i in range(len(streamed), len(shown)):
        write(sentence_event(i, shown[i], [citations[n - 1] for n in sentences[i][1]]))
    if removed:
        write(removed_event(removed))
    return shown


async def own_task(run: AsyncIterator[Any]) -> AsyncIterator[Any]:
    """`run`'s items (a graph's stream), read in a task of its own that is cancelled once when
    the reader stops: reading ends the run, and with it the model's stream.

    A client that hangs up on the endpoint cancels the response's scope, and that cancellation repeats at every
    await inside it (anyio's): LangGraph's exit, which cancels the nodes' tasks (the model's
    stream among them) and waits for them, would itself be cut short and leave them running.
    In a task of its own, the run gets one cancellation and ends cleanly."""
    queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()

    async def pump() -> None:
        try:
            async for item in run:
                queue.put_nowait(("item", item))
        except Exception as exc:  # the reader raises it
            queue.put_nowait(("error", exc))
        except BaseException as exc:  # a cancellation from elsewhere: the reader ends too
            queue.put_nowait(("error", exc))
            raise
        else:
            queue.put_nowait(("end", None))

    task = asyncio.ensure_future(pump())
    try:
        while True:
            kind, value = await queue.get()
            if kind == "end":
                return
            if kind == "error":
                raise value
            yield value
    finally:
        task.cancel()


REDUCED: Mapping[str, Callable[[Any, Any], Any]] = {
    "warnings": extend_or_reset, "trail": extend_or_reset, "queries": extend_or_reset,
    "history": extend_or_reset, "usage": add_usage,
}
"""The output keys a node's update adds to rather than replaces (state.AgentState)."""


def final_result(state: Mapping[str, Any], update: Mapping[str, Any]) -> AgentResult:
    """The run's result once the last node's `update` is applied to `state`."""
    values = dict(state)
    for key, value in update.items():
        reduce = REDUCED.get(key)
        values[key] = reduce(state.get(key), value) if reduce else value
    return AgentResult.model_validate(values)


def answer_sentences(
    draft: Mapping[str, Any], text: str, citations: Sequence[Citation]
) -> list[tuple[str, list[int]]]:
    """The checked answer's sentences with their citation numbers; a translated answer (whose
    text is no longer the checked sentences') is one piece citing every source it cites."""
    sentences = [(str(s), list(ns)) for s, ns in draft.get("sentences") or []]
    if " ".join(s for s, _ in sentences) == text:
        return sentences
    return [(text, [c.n for c in citations])]


def removed_count(state: Mapping[str, Any]) -> int:
    """Sentences the citation check removed this turn (one warning each)."""
    return sum(1 for w in state.get("warnings") or []
               if isinstance(w, Mapping) and w.get("kind") == "unsupported_sentence")
