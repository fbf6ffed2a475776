"""A model draft without citation markers, cited sentence by sentence where a source supports it.

Small models often answer right but write no `[n]` marker. Such a draft is no abstention: each of
its sentences gets the marker of the passage that supports it, by the same support check every
cited sentence goes through (`citations.support_verdict`); a sentence no passage supports keeps
no marker, so the citation check removes it as it removes every uncited claim. A draft that says
plainly that the sources do not answer is still an abstention (`says_no_answer`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from grounded_agent.citations import attach_markers, split_claims, support_verdict
from grounded_agent.prompts.answer import NO_ANSWER_PATTERN
from grounded_agent.schemas import Finding

_NO_ANSWER = re.compile(NO_ANSWER_PATTERN, re.IGNORECASE)


def says_no_answer(draft: str) -> bool:
    """The draft states that the sources do not answer (as the answer prompt asks it to)."""
    return bool(_NO_ANSWER.search(draft))


def cite_unmarked(draft: str, sources: Sequence[Finding]) -> tuple[str, int]:
    """The draft with each supported sentence ending in its best supporting passage's marker,
    and how many sentences got one. Unsupported sentences stay as written, without a marker."""
    claims, _ = split_claims(draft, sources)
    parts: list[str] = []
    cited = 0
    for claim in claims:
        text = claim.text.strip()
        if not text:
            continue
        best: tuple[float, int] | None = None
        if not claim.lead_in:
            for n, passage in enumerate(sources, 1):
                verdict = support_verdict(text, [passage])
                if verdict.supported and (best is None or verdict.coverage > best[0]):
                    best = (verdict.coverage, n)
        if best is None:
            parts.append(text)
            continue
        cited += 1
        parts.append(attach_markers(text, f"[{best[1]}]"))
    return "\n".join(parts), cited
