"""Code, not prompts, decides what an answer may cite and which sentences survive.

Two parts. `split_claims` reads a draft the way models really write it: markers before or after
the full stop, with or without a space, grouped ("[1][2]", "[1, 2]", "[1-3]"), on list items and
at line ends, and a trailing "Sources:" list that is no claim at all. A marker belongs to the
sentence it closes, never to the next one. `check_answer` then keeps a sentence only when its
markers resolve to sources and it does not read as an instruction, and when either it quotes
whole sentences of a cited passage word for word (`quoted_in`), or a judge that reads
paraphrase (LLM mode's support judgement, support_judge.py) found it stated there and every
figure it writes in digits stands in the passages.

What holds on any text stays in code: the parser, the quote check, the figures, the
instructions. Paraphrase is not read here: a word list that tells a paraphrase from a changed
claim fitted the rows it was tuned on and failed on the blind sets (benchmarks/bench_support.py).
A sentence no judge has read is kept only as a quote; offline answers are quotes.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from grounded_agent.grounding.instructions import looks_like_instruction
from grounded_agent.grounding.quantities import figures_stated
from grounded_agent.grounding.sentences import (
    BULLET,
    SENTENCE_END,
    answer_units,
    ends_with_abbreviation,
    join_abbreviated,
)
from grounded_agent.grounding.text import (
    data_lines,
    stem,
    terms,
    tokens,
)
from grounded_agent.schemas import Citation, Finding

MARKER = re.compile(
    r"\[\s*\^?\s*(?:sources?\s*:?\s*)?"
    r"(\d{1,3}(?:\s*(?:,|;|-|–|—|and|&)\s*\d{1,3})*)\s*\]",
    re.IGNORECASE,
)
"""A citation marker group: "[1]", "[1, 2]", "[1-3]", "[1–3]", "[^1]", "[source 1]".

Group 1 holds the numbers as written; `marker_numbers` reads them. "[1][2]" is two matches."""
URL = re.compile(r"(?:https?://|www\.)[^\s)\]>\"']+", re.IGNORECASE)
MAX_RANGE = 20
"""A marker range wider than this ("[1-999]") is no citation: it is removed."""


@dataclass
class Checked:
    """An answer after the citation check: kept text, citations in order, and what was dropped."""

    text: str
    citations: list[Citation]
    removed_markers: list[str] = field(default_factory=list)
    unsupported: list[str] = field(default_factory=list)
    removed_urls: list[str] = field(default_factory=list)
    doubted: list[tuple[str, list[int]]] = field(default_factory=list)
    """Sentences removed only because they quote no cited passage word for word and no judge
    read them, each with its valid marker numbers (1-based, into the sources): what a judge that
    reads paraphrase may confirm (`check_answer(judged=...)`)."""
    sentences: list[tuple[str, list[int]]] = field(default_factory=list)
    """The kept sentences in order, markers renumbered, each with its citations' numbers: `text`
    is these joined by a space (streaming.py emits them one by one)."""
    outcomes: list[ClaimOutcome] = field(default_factory=list)
    """What became of each claim of the draft, in order (streaming.py reads which are final)."""


ClaimOutcome = Literal["kept", "removed", "doubted", "empty"]
"""A claim kept, removed for good, removed pending a judge (`doubted`), or empty (markers or
punctuation alone, a lead-in): what the streamed check needs to know of each."""


# ------------------------------------------------------------------------------------ markers


def marker_numbers(group: str) -> tuple[list[int], list[str]]:
    """The source numbers of one marker group's inner text, and the parts that are no citation.

    "1, 2" -> [1, 2]; "1-3" and "1–3" -> [1, 2, 3]; a reversed or too wide range is rejected."""
    numbers: list[int] = []
    rejected: list[str] = []
    for part in re.split(r"\s*(?:,|;|and|&)\s*", group.strip(), flags=re.IGNORECASE):
        if not part:
            continue
        bounds = re.split(r"\s*[-–—]\s*", part)
        if len(bounds) == 1:
            numbers.append(int(bounds[0]))
            continue
        lo, hi = int(bounds[0]), int(bounds[-1])
        if lo > hi or hi - lo > MAX_RANGE:
            rejected.append(f"[{part}]")
        else:
            numbers.extend(range(lo, hi + 1))
    return numbers, rejected


# ------------------------------------------------------------------------------ claim splitter


@dataclass
class Claim:
    """One sentence or list item of a draft, markers taken out, with the markers that close it."""

    text: str
    markers: list[int] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)
    lead_in: bool = False
    """A heading or a line ending in ":" ("Loan periods:"): states nothing by itself."""


_HEADING = re.compile(r"^\s*#{1,6}\s+")
_EMPHASIS = re.compile(r"\*\*|__|(?<!\w)\*(?=\S)|(?<=\S)\*(?!\w)")
_REF_HEAD = re.compile(
    r"^\s*(?:#{1,6}\s*)?(?:\*\*|__)?\s*(?:sources?|references?|citations?|bibliography|works cited"
    r"|cited sources|sources used|footnotes)\s*(?:\*\*|__)?\s*:?\s*(?:\*\*|__)?\s*(?P<rest>.*)$",
    re.IGNORECASE,
)
_REF_INLINE = re.compile(
    r"(?:(?<=[.!?\]])|(?<=[.!?]\)))\s+(?:\*\*|__)?(?:sources?|references?|citations?)(?:\*\*|__)?"
    r"\s*:\s*(?:\*\*|__)?\s*(?=\[|$)",
    re.IGNORECASE,
)
_REF_ENTRY = re.compile(r"^\s*(?:[-*•+]\s*)?(?P<marks>(?:\[[^\]]{1,40}\]\s*)+)[:.\-–—)]?\s*(?P<rest>.*)$")
_CLOSES = re.compile(r"[.!?][\"'”’)\]]*\s*$")
_REF_WORDS = data_lines("reference_words.txt")


def _ends_with_abbreviation(text: str) -> bool:
    text = text.rstrip()
    if not text.endswith(".") or text[-2:-1].isspace():
        return False  # "Plan B [1]. Next": a marker stood before this full stop
    return ends_with_abbreviation(text)


def _looks_like_reference(rest: str, numbers: list[int], sources: Sequence[Finding]) -> bool:
    """A line "[2] Loans policy, section 3" names its source rather than stating a fact."""
    if not numbers or not all(1 <= n <= len(sources) for n in numbers):
        return False
    rest = URL.sub(" ", rest)
    words = {t for t in terms(rest) if not t[0].isdigit()}
    if not words:
        return True
    known: set[str] = {stem(w) for w in _REF_WORDS}
    for n in numbers:
        f = sources[n - 1]
        meta = " ".join(
            str(x) for x in (f.title, f.section, f.source_id, f.url, f.source, f.version) if x
        )
        known |= set(terms(meta))
    return words <= known


def _cut_references(lines: list[str], sources: Sequence[Finding]) -> tuple[list[str], list[str]]:
    """The draft's lines without a trailing "Sources:" list, and the lines cut off."""
    for i, line in enumerate(lines):
        head = _REF_HEAD.match(line)
        if head and (
            not head.group("rest").strip()
            or MARKER.match(head.group("rest").strip())
            or BULLET.match(head.group("rest"))
        ):
            rest = [x for x in lines[i + 1 :] if x.strip()]
            if all(_REF_ENTRY.match(x) or BULLET.match(x) or len(x) < 200 for x in rest):
                return lines[:i], lines[i:]
        inline = _REF_INLINE.search(line)
        if inline:
            return [*lines[:i], line[: inline.start()]], [line[inline.start() :], *lines[i + 1 :]]
    # a list of "[n] Title" lines at the very end, without a heading
    end = len(lines)
    while end > 0:
        line = lines[end - 1]
        if not line.strip():
            end -= 1
            continue
        entry = _REF_ENTRY.match(line)
        if not entry or not entry.group("rest").strip():
            break  # a line of markers alone closes the sentence before it
        numbers = [n for m in MARKER.finditer(entry.group("marks")) for n in marker_numbers(m.group(1))[0]]
        if not _looks_like_reference(entry.group("rest"), numbers, sources):
            break
        end -= 1
    return lines[:end], lines[end:]


@dataclass
class _State:
    text: str = ""
    marks: list[int] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)
    closed: bool = False
    """Markers came right after a full stop: the sentence ends after them."""
    colon: bool = False
    """Markers came right after a colon: a capitalised word after them starts a new sentence
    ("... to report: [1] For billing ..."), anything else goes on ("Hotline: [1] 0800 ...")."""

    def flush(self, claims: list[Claim]) -> None:
        if self.text.strip() or self.marks or self.rejected:
            claims.append(Claim(self.text.strip(), self.marks, self.rejected))
        self.text, self.marks, self.rejected, self.closed, self.colon = "", [], [], False, False


def _split_line(line: str) -> list[Claim]:
    """Sentences of one line, each with the markers that close it.

    A marker closes the sentence it follows: "A [1]. B", "A. [1] B" and "A.[1] B" all give [1]
    to A and nothing to B. Markers at the start of a line go to its first sentence
    ("- [2] DVDs: 7 days")."""
    claims: list[Claim] = []
    st = _State()
    pos = 0
    for m in MARKER.finditer(line):
        _add_text(line[pos : m.start()], claims, st)
        if st.text.strip() and _CLOSES.search(st.text):
            st.closed = True
        elif st.text.rstrip().endswith(":"):
            st.colon = True
        numbers, bad = marker_numbers(m.group(1))
        st.marks.extend(numbers)
        st.rejected.extend(bad)
        pos = m.end()
    _add_text(line[pos:], claims, st)
    st.flush(claims)
    return claims


def _add_text(chunk: str, claims: list[Claim], st: _State) -> None:
    """Adds the text between markers: ends a sentence a marker closed, then splits at full stops."""
    if not chunk:
        return
    if st.colon and not st.closed:
        st.colon = False
        if re.match(r"\s+[A-Z][a-z]", chunk):
            st.flush(claims)
    if st.closed:
        if not chunk.strip():
            st.text += chunk
            return
        if re.match(r"\s*[a-z]", chunk):
            st.closed = False  # "e.g. [1] and so on": the sentence goes on
        else:
            st.flush(claims)
    merged = join_abbreviated(SENTENCE_END.split(st.text + chunk), _ends_with_abbreviation)
    for piece in merged[:-1]:
        st.text = piece
        st.flush(claims)
    st.text = merged[-1] if merged else ""


def split_claims(draft: str, sources: Sequence[Finding] = ()) -> tuple[list[Claim], list[str]]:
    """The claims of a draft in order, and the lines of a trailing reference list it dropped."""
    lines = draft.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    lines, references = _cut_references(lines, sources)
    claims: list[Claim] = []
    for raw in lines:
        line = raw.strip()
        if not line:
            continue
        lead_in = bool(_HEADING.match(line))
        line = _HEADING.sub("", line)
        line = BULLET.sub("", line, count=1)
        line = _EMPHASIS.sub("", line)
        if not MARKER.sub("", line).strip(" \t.,;:"):
            # a line of markers alone closes the sentence before it
            found = [marker_numbers(m.group(1)) for m in MARKER.finditer(line)]
            if claims:
                for numbers, bad in found:
                    claims[-1].markers.extend(numbers)
                    claims[-1].rejected.extend(bad)
            else:
                claims.append(
                    Claim("", [n for ns, _ in found for n in ns], [b for _, bs in found for b in bs])
                )
            continue
        parts = _split_line(line)
        if lead_in:
            for part in parts:
                part.lead_in = True
        elif parts and not parts[-1].markers and parts[-1].text.rstrip().endswith(":"):
            parts[-1].lead_in = True
        claims.extend(parts)
    return claims, references


def _clean(text: str) -> str:
    """A claim's text as it is kept: single spaces, no space before punctuation, no empty
    brackets left behind by removed markers, "According to [1], x" -> "X"."""
    text = " ".join(text.split())
    text = re.sub(r"\(\s*(?:see|source|sources|cf\.?|ref\.?)?\s*[,;]?\s*\)", "", text, flags=re.I)
    lead = re.match(r"(?:according to|as stated in|as described in|per|see)\s*,\s*", text, re.I)
    if lead:  # "According to [1], loans last 21 days." -> "Loans last 21 days."
        text = text[lead.end() :]
        text = text[:1].upper() + text[1:]
    text = re.sub(r"\b(?:according to|as stated in|see)\s*(?=[,.;:]|$)", "", text, flags=re.I)
    text = re.sub(r"\s+([.,;:!?])", r"\1", text)
    text = re.sub(r"([,;:])(?=[,;:.!?])", "", text)
    return " ".join(text.split()).strip().rstrip(",;").strip()


def _terminate(text: str) -> str:
    """A list item or line kept as a sentence gets a full stop: "DVD loans: 7 days [1]."."""
    if not text or text[-1] in ".!?\"'”’)":
        return text
    return text.rstrip(":") + "."


# --------------------------------------------------------------------------------- the check


def check_answer(
    draft: str,
    sources: Sequence[Finding],
    judged: Mapping[str, bool] | None = None,
    *,
    also_holds: Callable[[str, Sequence[Finding]], bool] | None = None,
) -> Checked:
    """Keeps only sentences whose markers resolve to sources in state and whose text they support.

    Markers are renumbered in order of first use, so citations read [1], [2], ... . A sentence
    that quotes whole sentences of cited passages keeps the markers of those it quotes. `judged`
    maps sentences to what a judge that read their cited passages found: False removes the
    sentence; True keeps a paraphrase, but never in place of the rules kept in code (its markers
    must resolve, it must not read as an instruction, and every figure it writes in digits must
    stand in its cited passages). A paraphrase no judge read is removed and listed in `doubted`.
    `also_holds(sentence, cited passages)`: a further test for a judged sentence, for judges too
    weak to trust alone (support_judge.words_stated, where Context.judged_words_from_sources
    asks for it).
    """
    judged = judged or {}
    allowed_urls = {s.url for s in sources if s.url}
    removed_urls: list[str] = []

    def strip_url(match: re.Match[str]) -> str:
        url = match.group(0).rstrip(".,;")
        if url in allowed_urls:
            return match.group(0)
        removed_urls.append(url)
        return ""

    # the model read escaped sources: "&amp;" it copied is "&", and "&#91;9&#93;" is a marker
    text = URL.sub(strip_url, html.unescape(draft))
    claims, references = split_claims(text, sources)

    kept: list[tuple[str, list[int]]] = []
    removed_markers: list[str] = []
    unsupported: list[str] = []
    doubted: list[tuple[str, list[int]]] = []
    outcomes: list[ClaimOutcome] = []
    for line in references:
        for m in MARKER.finditer(line):
            numbers, bad = marker_numbers(m.group(1))
            removed_markers += bad + [f"[{n}]" for n in numbers if not 1 <= n <= len(sources)]
    for claim in claims:
        numbers = claim.markers
        valid = [n for n in dict.fromkeys(numbers) if 1 <= n <= len(sources)]
        removed_markers += claim.rejected
        removed_markers += [f"[{n}]" for n in numbers if not 1 <= n <= len(sources)]
        bare = _clean(claim.text)
        if not bare.strip(" .,;:-–—*#"):
            outcomes.append("empty")
            continue
        if not valid:
            outcomes.append("empty" if claim.lead_in else "removed")
            if not claim.lead_in:
                unsupported.append(bare)
            continue
        if looks_like_instruction(bare):
            outcomes.append("removed")
            unsupported.append(bare)
            continue
        cited_passages = [sources[n - 1] for n in valid]
        verdict = judged.get(bare)
        if verdict is False:
            outcomes.append("removed")
            unsupported.append(bare)
            continue
        quoted = quoted_in(bare, cited_passages)
        if quoted:
            outcomes.append("kept")
            kept.append((_terminate(bare), [valid[i] for i in quoted]))
        elif (
            verdict is True
            and _digits_stated(bare, cited_passages)
            and (also_holds is None or also_holds(bare, cited_passages))
        ):
            outcomes.append("kept")
            kept.append((_terminate(bare), valid))
        else:
            outcomes.append("doubted" if verdict is None else "removed")
            unsupported.append(bare)
            if verdict is None:
                doubted.append((bare, valid))

    order: dict[int, int] = {}
    for _, valid in kept:
        for n in valid:
            order.setdefault(n, len(order) + 1)
    sentences = [
        (attach_markers(bare, "".join(f"[{order[n]}]" for n in valid)), [order[n] for n in valid])
        for bare, valid in kept
    ]
    citations = [
        Citation(
            n=new,
            source=sources[old - 1].source,
            source_id=sources[old - 1].source_id,
            title=sources[old - 1].title,
            section=sources[old - 1].section,
            version=sources[old - 1].version,
            page=sources[old - 1].page,
            url=sources[old - 1].url,
            document_date=sources[old - 1].document_date,
            indexed_at=sources[old - 1].indexed_at,
            score=round(sources[old - 1].score, 4),
        )
        for old, new in order.items()
    ]
    return Checked(
        " ".join(s for s, _ in sentences), citations, removed_markers, unsupported, removed_urls,
        doubted, sentences, outcomes,
    )


def _digits_stated(sentence: str, passages: Sequence[Finding]) -> bool:
    """Every figure the sentence writes in digits stands in the passages (as written, as a number
    word, as the same time of day or quantity in another unit: "2 weeks" for "14 days", "9 pm"
    for "21:00"): a changed amount or date is the one paraphrase no judge may confirm."""
    return figures_stated(
        sentence, "\n".join(f"{p.title}\n{p.section or ''}\n{p.text}" for p in passages)
    )


def attach_markers(sentence: str, marks: str) -> str:
    """Puts markers before the sentence's final punctuation: "... 49 EUR [1]."."""
    if sentence and sentence[-1] in ".!?":
        return f"{sentence[:-1]} {marks}{sentence[-1]}"
    return f"{sentence} {marks}"


# ------------------------------------------------------------------------------ support check


def _words(text: str) -> tuple[str, ...]:
    """A sentence as the quote check compares it: its words and numbers in order, without the
    markers and links the claim parser takes out of a draft, case and punctuation aside (list
    marks, emphasis, a table's bars, a list item's closing ';')."""
    return tuple(tokens(MARKER.sub(" ", URL.sub(" ", html.unescape(BULLET.sub("", text))))))


def quoted_in(sentence: str, findings: Sequence[Finding]) -> list[int]:
    """The indexes of the passages the sentence quotes word for word, as one or more whole
    sentences of theirs in a row (a table row read with its header counts as a sentence): the
    only support code grants by itself; anything else is paraphrase, for a judge that reads."""
    want = _words(sentence)
    if not want:
        return []
    found = []
    for i, f in enumerate(findings):
        # split as the claims were: emphasis out first ("**Step 2.** Call us" is two sentences)
        units = [_words(u) for u in answer_units(_EMPHASIS.sub("", f.text))]
        for start in range(len(units)):
            run: tuple[str, ...] = ()
            for unit in units[start:]:
                run += unit
                if len(run) >= len(want):
                    break
            if run == want:
                found.append(i)
                break
    return found
