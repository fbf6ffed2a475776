"""Translation node: the checked answer in the language asked for, taken only when it differs
from the sources' language."""

from __future__ import annotations

import re
from typing import Any

from langchain_core.messages import HumanMessage, SystemMessage
from langgraph.runtime import Runtime

from grounded_agent.context import Context
from grounded_agent.deps import Deps
from grounded_agent.grounding.citations import MARKER
from grounded_agent.llm.calls import Fallback, ask_model
from grounded_agent.nodes._common import ctx_of, nonempty, step
from grounded_agent.prompts.answer import TRANSLATE_ANSWER_USER
from grounded_agent.state import AgentState, Draft, turn_of

FALLBACK = Fallback(
    "translate_answer", "the answer is given in the language of its sources",
    where="the translation step", trail="translation skipped",
)


def markers(text: str) -> list[str]:
    """The citation markers of a text, spacing ignored, in sorted order."""
    return sorted(re.sub(r"\s+", "", m) for m in MARKER.findall(text))


async def translate_answer(
    state: AgentState, runtime: Runtime[Context], *, deps: Deps
) -> dict[str, Any]:
    """Its citations were checked in the sources' language; a translation that loses, adds or
    renumbers a marker is not shown (the checked text is, with the trail saying why)."""
    ctx = ctx_of(runtime)
    draft: Draft = dict(turn_of(state).get("draft") or {})  # type: ignore[assignment]
    text = draft.get("text", "")
    language = str(state.get("language"))
    model = deps.model(ctx)
    messages = [
        SystemMessage(ctx.translate_answer_system_prompt.format(language=language)),
        HumanMessage(TRANSLATE_ANSWER_USER.format(answer=text)),
    ]
    reply = await ask_model(
        model, messages, state=state, ctx=ctx, fallback=FALLBACK, max_tokens=ctx.answer_max_tokens
    )
    trail = list(reply.trail)
    translated = reply.text.strip()
    if reply.message is not None and translated and markers(translated) == markers(text):
        trail.append(step(state, "translate_answer", "translated",
                          f"checked answer translated into {language}"))
        draft["text"] = translated
    elif reply.message is not None:
        trail.append(step(state, "translate_answer", "translation_not_used",
                          "the translation changed the citation markers; the checked text stays"))
    return {"turn": {"draft": draft}, "trail": trail,
            **nonempty(usage=reply.usage, warnings=reply.warnings)}
