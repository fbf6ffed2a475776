"""A model draft without citation markers, cited sentence by sentence before the citation check.

Small models often answer right but write no `[n]` marker. Such a draft is no abstention: a
sentence that quotes a passage gets that passage's marker (`citations.quoted_in`, the check
every cited sentence goes through); any other sentence gets the marker of the passage that shares
most of its content words, so the citation check treats it as it treats every cited paraphrase
(the support judge reads it, or it is removed). A sentence that shares no word with any passage
keeps no marker and is removed as every uncited claim is. A draft that says plainly that the
sources do not answer, and quotes none of them, is still an abstention (`says_no_answer`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from grounded_agent.grounding.citations import attach_markers, quoted_in, split_claims
from grounded_agent.grounding.text import content_stems
from grounded_agent.prompts.answer import NO_ANSWER_PATTERN
from grounded_agent.schemas import Finding

_NO_ANSWER = re.compile(NO_ANSWER_PATTERN, re.IGNORECASE)


def says_no_answer(draft: str) -> bool:
    """The draft states that the sources do not answer (as the answer prompt asks it to)."""
    return bool(_NO_ANSWER.search(draft))


def _closest(sentence: str, sources: Sequence[Finding]) -> int | None:
    """1-based number of the passage sharing most content words with the sentence (the first
    of equals: sources come best first); None when none shares any."""
    words = content_stems(sentence)
    best, best_n = 0, None
    for n, passage in enumerate(sources, 1):
        shared = len(words & content_stems(f"{passage.title or ''} {passage.section or ''} "
                                           f"{passage.text}"))
        if shared > best:
            best, best_n = shared, n
    return best_n


def cite_unmarked(draft: str, sources: Sequence[Finding]) -> tuple[str, int, int]:
    """The draft with a marker on each sentence as described above; how many sentences quote a
    passage, and how many got the closest passage's marker to be judged."""
    claims, _ = split_claims(draft, sources)
    parts: list[str] = []
    quoting = closest = 0
    for claim in claims:
        text = claim.text.strip()
        if not text:
            continue
        marker: list[int] = []
        if not claim.lead_in and not says_no_answer(text):
            quoted = quoted_in(text, sources)
            if quoted:
                marker = [quoted[0] + 1]
                quoting += 1
            elif (n := _closest(text, sources)) is not None:
                marker = [n]
                closest += 1
        parts.append(attach_markers(text, "".join(f"[{n}]" for n in marker)) if marker else text)
    return "\n".join(parts), quoting, closest
