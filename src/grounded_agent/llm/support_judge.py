"""The support judgement: the model reads the sentences of its answer that quote no cited
passage word for word, and names those their cited passages state.

Code decides alone only on a quote of whole sentences of a cited passage
(citations.quoted_in): a word list that read paraphrase removed 56-96% of supported
paraphrases and kept 8-40% of unsupported sentences on the labelled sets written after it was
frozen (bench_support.py), so paraphrase goes to the model. What the judge keeps still passes
the rules kept in code (citations.check_answer)."""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import HumanMessage, SystemMessage

from grounded_agent.context import Context
from grounded_agent.grounding.citations import URL
from grounded_agent.grounding.text import is_content, match_credit, stem, terms, tokens
from grounded_agent.llm.calls import BudgetExhausted
from grounded_agent.llm.structured import structured_call
from grounded_agent.prompts.check_support import CHECK_SUPPORT_USER
from grounded_agent.prompts.sources import render_claims, render_sources
from grounded_agent.schemas import Finding, SupportJudgement


@dataclass(frozen=True)
class Judged:
    """For each sentence sent, whether the model found it stated in its cited sources; None and
    why when it could not say."""

    verdicts: dict[str, bool] | None
    why_not: str = ""
    failure: BaseException | None = None
    exhausted: BudgetExhausted | None = None


async def judge_support(
    model: Any,
    ctx: Context,
    sources: Sequence[Finding],
    claims: Sequence[tuple[str, Sequence[int]]],
    *,
    state: Mapping[str, Any],
    usage: dict[str, int],
) -> Judged:
    """One structured call over all the sentences (text, 1-based numbers of the sources it
    cites); counts against the question's model budget like every other call."""
    messages = [
        SystemMessage(ctx.check_support_system_prompt),
        HumanMessage(
            CHECK_SUPPORT_USER.format(
                sources=render_sources(sources), claims=render_claims(claims)
            )
        ),
    ]
    outcome = await structured_call(
        model, SupportJudgement, messages, state=state, ctx=ctx, usage=usage
    )
    if outcome.parsed is None:
        if outcome.exhausted is not None:
            return Judged(None, f"model budget spent ({outcome.exhausted})",
                          exhausted=outcome.exhausted)
        if outcome.failure is not None:
            return Judged(None, "the model failed", failure=outcome.failure)
        return Judged(None, "the judgement could not be read")
    supported = set(outcome.parsed.supported)
    return Judged({text: n in supported for n, (text, _) in enumerate(claims, 1)})


def new_words(sentence: str, passages: Sequence[Finding], given: str = "") -> list[str]:
    """The sentence's content words (text.py's tokens, stop list and stems; figures in digits
    are for citations.check_answer) that neither `given` (the question) nor the passages, their
    titles and sections hold, not even as a near form (text.match_credit: "respond" for
    "response")."""
    have = set(terms(given))
    for p in passages:
        have |= set(terms(f"{p.title}\n{p.section or ''}\n{p.text}"))
    frozen = frozenset(have)
    words = [t for t in tokens(URL.sub(" ", html.unescape(sentence)))
             if is_content(t) and not t[0].isdigit()]
    return [w for w in dict.fromkeys(words) if match_credit(stem(w), frozen) == 0.0]


def words_stated(sentence: str, passages: Sequence[Finding], given: str = "") -> bool:
    """Every content word of the sentence stands in the question or its cited passages: a
    sentence that brings a word of its own ("malaria" where no source names it) says something
    they do not, whatever a judge found. Strict on purpose: a synonym neither of them uses ("fee"
    for "charge") fails it too, so it is for judges that cannot be trusted with paraphrase."""
    return not new_words(sentence, passages, given)
