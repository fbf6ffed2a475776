"""Draft node: the model writes the answer from the sources in state (or they are quoted), and
judges the confidence in the same call when the local signals did not decide it."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import HumanMessage, SystemMessage
from langgraph.runtime import Runtime

from grounded_agent.context import Context
from grounded_agent.deps import Deps
from grounded_agent.grounding.citations import MARKER
from grounded_agent.grounding.cite_unmarked import cite_unmarked, says_no_answer
from grounded_agent.languages import name_of, translation_needed
from grounded_agent.llm.calls import Fallback, ModelReply, ask_model
from grounded_agent.nodes._common import ctx_of, nonempty, offline_extract, require_turn, step
from grounded_agent.nodes._judged import judged_draft
from grounded_agent.prompts.answer import ANSWER_USER
from grounded_agent.prompts.sources import render_sources
from grounded_agent.schemas import Confidence, Finding
from grounded_agent.state import AgentState, Draft, DraftHow, turn_of
from grounded_agent.streaming import SentenceStream

FALLBACK = Fallback(
    "draft_answer", "the answer was extracted from the sources", where="the answer step",
    budget_warning="answer extracted without the model", trail="extractive answer used",
)

BROKE_OFF = ("the language model's reply broke off at the answer step; the answer is what it "
             "had written, checked")


def format_sources(evidence: list[Finding]) -> str:
    """The escaped sources block (one builder for every prompt: prompts.sources)."""
    return render_sources(evidence)


async def draft_answer(
    state: AgentState, runtime: Runtime[Context], *, deps: Deps
) -> dict[str, Any]:
    """One model call writes the draft; without a reply the evidence is quoted instead. Nothing is
    checked here: every draft goes through check_citations. When the local signals left the
    confidence open, the same call judges it (_judged.py): LOW or NOT_RELEVANT drops the draft."""
    require_turn(state, "draft_answer")
    ctx = ctx_of(runtime)
    question = str(state["question"])
    turn = turn_of(state)
    evidence = list(turn.get("evidence") or [])
    model = deps.model(ctx)
    held: Draft = dict(turn.get("draft") or {})  # type: ignore[assignment]
    turn_update: dict[str, Any] = {}
    # asked for another language than the sources': written and checked in theirs first
    write_in = translation_needed(state.get("language"), (e.language for e in evidence))
    messages = _messages(state, ctx, question, evidence, write_in, held.get("judge", False))
    trail: list[dict[str, Any]] = []
    update: dict[str, Any] = {}
    text, replied = "", False
    how: DraftHow = "extractive"
    # each sentence of the draft checked and emitted as it completes (streaming.py)
    stream = SentenceStream(evidence, runtime.stream_writer, judge_after=ctx.judge_support,
                            hold=bool(write_in) or ctx.judge_model_answers)
    if model is not None and held.get("judge"):
        judged = await judged_draft(
            state, ctx, model, messages, held.get("offline") or Confidence(),
            plain=_messages(state, ctx, question, evidence, write_in, judge=False), stream=stream)
        trail += judged.trail
        update = {"confidence": judged.confidence, **nonempty(usage=judged.usage,
                                                              warnings=judged.warnings)}
        turn_update["rewrite"] = judged.rewrite
        if not judged.confidence.can_answer:  # LOW or NOT_RELEVANT: no draft, routed on
            return {**update, "turn": {**turn_update, "draft": {**held, "text": ""}}, "trail": trail}
        replied = judged.replied
        text, how = judged.text or "", "model" if replied else "extractive"
    elif model is not None:
        reply, text = await _streamed(state, ctx, model, messages, stream)
        trail += reply.trail
        update = nonempty(usage=reply.usage, warnings=reply.warnings)
        replied = reply.message is not None or bool(stream.sent)
        how = "model" if replied else "extractive"
    if how == "model" and text.strip() and not MARKER.search(text):
        text, how, entry = _unmarked(state, text, evidence)
        if how == "abstained" and ctx.judge_model_answers:
            # the offline verdict decides whether there is an answer, and it found one
            text, how, entry = _overruled(state, offline_extract(held, question, evidence))
        trail.append(entry)
    elif not text:
        # no reply, or an empty one: the evidence is quoted (a model's empty reply stays "model"
        # so that the citation check treats it as the model's draft it stands in for)
        text = offline_extract(held, question, evidence)
        if state.get("language"):
            trail.append(step(state, "draft_answer", "language_not_applied",
                              "an extracted answer quotes its sources in their own language"))
    draft: Draft = {**held, "text": text, "how": how, "replied": replied, "write_in": write_in,
                    "streamed": stream.sent}
    return {**update, "turn": {**turn_update, "draft": draft}, "trail": trail}


async def _streamed(
    state: AgentState, ctx: Context, model: Any, messages: list[Any], stream: SentenceStream
) -> tuple[ModelReply, str]:
    """The plain draft call, its reply streamed through `stream` (each sentence checked and
    emitted once complete), and the draft's text. A reply cut off after sentences were emitted
    stands as far as it went (checked again whole, as every draft is)."""
    reply = await ask_model(model, messages, state=state, ctx=ctx, fallback=FALLBACK,
                            max_tokens=ctx.answer_max_tokens, on_chunk=stream)
    if reply.message is None and stream.sent:
        reply.warnings = [{"kind": "model_unavailable", "detail": BROKE_OFF}]
        reply.trail = [step(state, "draft_answer", "model_failed", BROKE_OFF)]
        return reply, stream.text
    return reply, reply.text


def _unmarked(
    state: AgentState, text: str, evidence: list[Finding]
) -> tuple[str, DraftHow, dict[str, Any]]:
    """A draft without any marker: each sentence is cited by the passage it quotes or is closest
    to, then checked like any cited sentence; only a draft that quotes nothing and says the
    sources do not answer is the model abstaining."""
    cited, quoting, closest = cite_unmarked(text, evidence)
    if quoting or (closest and not says_no_answer(text)):
        return cited, "model", step(
            state, "draft_answer", "model_draft_cited",
            f"the draft had no markers: {quoting} sentence(s) cited by the passage they quote, "
            f"{closest} by the closest passage, to be checked as every cited sentence is")
    if says_no_answer(text):
        return "", "abstained", step(state, "draft_answer", "model_abstained",
                                     "the model found no answer in the sources")
    return text, "model", step(state, "draft_answer", "model_draft_uncited",
                               "the draft had no markers and no sentence near a passage")


def _overruled(state: AgentState, extract: str) -> tuple[str, DraftHow, dict[str, Any]]:
    """Context.judge_model_answers: a small model's "the sources do not answer" is a judgement
    of the level, which it is not trusted with; offline's verdict found an answer, so offline's
    answer, its extract of the evidence, stands in (checked as every answer is)."""
    return extract, "extractive", step(
        state, "draft_answer", "model_abstention_overruled",
        "the model said the sources do not answer, but the offline verdict, final with "
        "judge_model_answers, found an answer: the answer was extracted from the sources")


def _messages(
    state: AgentState, ctx: Context, question: str, evidence: list[Finding], write_in: str | None,
    judge: bool,
) -> list[Any]:
    language = (
        f"{name_of(write_in)}, the language of the sources (a translation follows)"
        if write_in
        else state.get("language") or "the language of the question"
    )
    return [
        SystemMessage((ctx.judged_answer_system_prompt if judge else ctx.answer_system_prompt)
                      .format(language=language)),
        HumanMessage(ANSWER_USER.format(question=question, sources=format_sources(evidence))),
    ]
