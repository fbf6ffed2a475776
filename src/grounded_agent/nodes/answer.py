"""Answer node: the reply the user gets, from the checked draft or, without one, what was tried:
status, notes, per-source reports, and where to look when nothing answered."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage
from langgraph.runtime import Runtime

from grounded_agent.context import Context
from grounded_agent.nodes._common import ctx_of, final_outcomes, outcomes_of, step
from grounded_agent.nodes._reply import (
    closest_passages,
    notes,
    nothing_text,
    source_reports,
    source_warnings,
    stop_reason,
    weak,
)
from grounded_agent.schemas import Citation, Confidence
from grounded_agent.state import AgentState, fresh, turn_of
from grounded_agent.streaming import (
    answer_sentences,
    emit_rest,
    final_result,
    removed_count,
    result_event,
)
from grounded_agent.untrusted.display import shown_answer

MAX_CLOSEST = 3
"""Documents listed as the closest when nothing answered (Context.closest_threshold decides which
may be)."""


async def answer(state: AgentState, runtime: Runtime[Context]) -> dict[str, Any]:
    """No model call: everything the answer says was drafted and checked before this node."""
    ctx = ctx_of(runtime)
    question = str(state["question"])
    turn = turn_of(state)
    reports = source_reports(list(turn.get("requested") or []), final_outcomes(state))
    # a source read only in part counts with the failed ones: absence is not established there
    failed = [r.source for r in reports if r.status == "error" or r.coverage != "complete"]
    worked = [r.source for r in reports if r.status != "error"]
    confidence = state.get("confidence") or Confidence()
    draft = turn.get("draft") or {}
    citations: list[Citation] = list(draft.get("citations") or [])
    text = str(draft.get("text") or "")
    warnings = source_warnings(state, reports)
    write = runtime.stream_writer
    if text and citations:
        status = "partial" if failed else (
            "answered_with_caveat" if weak(ctx, confidence, citations) else "answered")
        lines, told = notes(ctx, confidence, citations, failed, worked)
        # the answer is the sentences streamed and the ones emitted now, as they were shown
        shown = emit_rest(write, answer_sentences(draft, text, citations), citations,
                          list(draft.get("streamed") or []), removed_count(state))
        text = "\n\n".join([" ".join(shown), *lines])
        warnings += told
    else:
        emit_rest(write, [], [], [], removed_count(state))
        citations = []
        status = "unavailable" if failed else "not_found"
        text = nothing_text(question, list(state.get("queries") or []), failed, worked)
    # no answer: where to look, from the sources that were read (a document search's page
    # already lists its documents)
    closest = [] if citations or state.get("documents") else closest_passages(
        outcomes_of(state), ctx.closest_threshold, MAX_CLOSEST
    )
    entry = step(state, "answer", status, f"{len(citations)} citation(s)", status=status,
                 stop_reason=stop_reason(state, confidence))
    update = shown_answer({  # what a document wrote reaches the user neutralised (display.py)
        "status": status,
        "answer": text,
        "citations": citations,
        "closest": closest,
        "attempts": int(turn.get("attempt") or 1),
        "sources": reports,
        "warnings": warnings,
        "trail": [entry],
        "history": [{"question": question, "answer": text if citations else "", "status": status}],
    })
    if turn.get("intent") != "search_and_ask":  # else mark_coverage ends the run
        write(result_event(final_result(state, update)))
    # the conversation a chat front end shows: the checked answer, not the raw draft
    return {**update, "messages": fresh([AIMessage(update["answer"])])}
