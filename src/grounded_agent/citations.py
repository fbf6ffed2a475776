"""Code, not prompts, decides what an answer may cite and which sentences survive.

Two parts. `split_claims` reads a draft the way models really write it: markers before or after
the full stop, with or without a space, grouped ("[1][2]", "[1, 2]", "[1-3]"), on list items and
at line ends, and a trailing "Sources:" list that is no claim at all. A marker belongs to the
sentence it closes, never to the next one. `support_verdict` then decides whether the cited
passages state what a sentence says: its numbers (with their units), names, negations and
absolutes must be those of the passages, bound to the clause they belong to, and most of its
other words must be found in one or two adjacent sentences of a cited passage.

The check is lexical. benchmarks/bench_support.py measures it on tests/data/support_labelled.jsonl:
it meets a 5% false-removal and false-keep rate on the rows it was tuned on, not on the others.
"""

from __future__ import annotations

import contextvars
import functools
import html
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation

from grounded_agent.quantities import NUMBER_WORDS, figures_stated
from grounded_agent.schemas import Citation, Finding
from grounded_agent.text import (
    SENTENCE_END,
    answer_units,
    ends_with_abbreviation,
    looks_like_instruction,
    stem,
)

MARKER = re.compile(
    r"\[\s*\^?\s*(?:sources?\s*:?\s*)?"
    r"(\d{1,3}(?:\s*(?:,|;|-|–|—|and|&)\s*\d{1,3})*)\s*\]",
    re.IGNORECASE,
)
"""A citation marker group: "[1]", "[1, 2]", "[1-3]", "[1–3]", "[^1]", "[source 1]".

Group 1 holds the numbers as written; `marker_numbers` reads them. "[1][2]" is two matches."""
URL = re.compile(r"(?:https?://|www\.)[^\s)\]>\"']+", re.IGNORECASE)
SUPPORT_MIN = 0.75
"""Share of a sentence's content words that one or two adjacent sentences of its cited passages
(with their title and section) must contain. Chosen on the "tune" rows of
tests/data/support_labelled.jsonl (benchmarks/bench_support.py --tune: 0.70 and 0.75 tie there,
ties go to the stricter value); the other rows were not used to choose it."""
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
    """Sentences removed only because the word check could not find them in their cited
    passages, each with its valid marker numbers (1-based, into the sources): what a judge that
    reads paraphrase may confirm (`check_answer(judged=...)`)."""
    paraphrased: list[tuple[str, list[int]]] = field(default_factory=list)
    """Sentences the word check kept that do not quote whole sentences of a cited passage word for
    word: where an added, changed, generalised or dropped detail would hide (a judge may refute
    them)."""


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


_BULLET = re.compile(r"^\s*(?:[-*•+‣–]|\(?\d{1,2}[.)]|\(?[a-z][.)])\s+")
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
_REF_WORDS = frozenset({
    "page", "pages", "section", "source", "sources", "updated", "retrieved", "accessed", "dated",
    "version", "document", "doc", "chunk", "passage", "pdf", "online", "web", "available", "see",
})


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
    words = {_canon_word(w.lower()) for w in re.findall(r"[^\W\d_]+", rest)}
    words -= _STOPWORDS
    if not words:
        return True
    known: set[str] = {_canon_word(w) for w in _REF_WORDS}
    for n in numbers:
        f = sources[n - 1]
        meta = " ".join(
            str(x) for x in (f.title, f.section, f.source_id, f.url, f.source, f.version) if x
        )
        known |= {_canon_word(w.lower()) for w in re.findall(r"[^\W\d_]+", meta)}
    return words <= known


def _cut_references(lines: list[str], sources: Sequence[Finding]) -> tuple[list[str], list[str]]:
    """The draft's lines without a trailing "Sources:" list, and the lines cut off."""
    for i, line in enumerate(lines):
        head = _REF_HEAD.match(line)
        if head and (
            not head.group("rest").strip()
            or MARKER.match(head.group("rest").strip())
            or _BULLET.match(head.group("rest"))
        ):
            rest = [x for x in lines[i + 1 :] if x.strip()]
            if all(_REF_ENTRY.match(x) or _BULLET.match(x) or len(x) < 200 for x in rest):
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
    merged: list[str] = []
    for piece in SENTENCE_END.split(st.text + chunk):
        if merged and _ends_with_abbreviation(merged[-1]):
            merged[-1] = f"{merged[-1]} {piece}"
        else:
            merged.append(piece)
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
        line = _BULLET.sub("", line, count=1)
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
    draft: str, sources: Sequence[Finding], judged: Mapping[str, bool] | None = None
) -> Checked:
    """Keeps only sentences whose markers resolve to sources in state and whose text they support.

    Markers are renumbered in order of first use, so citations read [1], [2], ... . `judged` maps
    sentences to what a judge that read their cited passages found: False removes the sentence;
    True keeps it in place of the word check, but never in place of the rules kept in code (its
    markers must resolve, it must not read as an instruction, and every figure it writes in
    digits must stand in its cited passages).
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
    paraphrased: list[tuple[str, list[int]]] = []
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
            continue
        if not valid:
            if not claim.lead_in:
                unsupported.append(bare)
            continue
        if looks_like_instruction(bare):
            unsupported.append(bare)
            continue
        cited_passages = [sources[n - 1] for n in valid]
        verdict = judged.get(bare)
        if verdict is True and _digits_stated(bare, cited_passages):
            kept.append((_terminate(bare), valid))
            continue
        if verdict is False:
            unsupported.append(bare)
            continue
        words = support_verdict(bare, cited_passages)
        if not words.supported:
            unsupported.append(bare)
            doubted.append((bare, valid))
            continue
        if not _quoting(bare, cited_passages):  # a quote of whole sentences says what they say
            paraphrased.append((bare, valid))
        cited = words.contributing or list(range(len(cited_passages)))
        kept.append((_terminate(bare), [valid[i] for i in cited]))

    order: dict[int, int] = {}
    for _, valid in kept:
        for n in valid:
            order.setdefault(n, len(order) + 1)
    parts = []
    for bare, valid in kept:
        marks = "".join(f"[{order[n]}]" for n in valid)
        parts.append(attach_markers(bare, marks))
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
        " ".join(parts), citations, removed_markers, unsupported, removed_urls, doubted, paraphrased
    )


def _digits_stated(sentence: str, passages: Sequence[Finding]) -> bool:
    """Every figure the sentence writes in digits stands in the passages, as written or as the
    same quantity in another unit: a changed amount or date is the one paraphrase no judge may
    confirm ("2 weeks" for "14 days" and "20%" for "a fifth" are the same figures)."""
    return figures_stated(
        sentence, "\n".join(f"{p.title}\n{p.section or ''}\n{p.text}" for p in passages)
    )


def attach_markers(sentence: str, marks: str) -> str:
    """Puts markers before the sentence's final punctuation: "... 49 EUR [1]."."""
    if sentence and sentence[-1] in ".!?":
        return f"{sentence[:-1]} {marks}{sentence[-1]}"
    return f"{sentence} {marks}"


# ------------------------------------------------------------------------------ support check
#
# Words are read as canonical forms: lower case, irregular forms and a few general synonyms
# mapped to one word, then stemmed; numbers as values ("seven" = "7", "12.40" = "12.4",
# "84,000" = "84000", "9:00" = "9"), currencies and units as one symbol each.

_STOPWORDS = frozenset(
    ["a", "an", "the", "and", "or", "but", "if", "of", "in", "on", "at", "by", "for", "with", "to", "from", "into", "onto", "as", "is", "are", "was", "were", "be", "been", "being", "am", "do", "does", "did", "doing", "has", "have", "had", "having", "can", "could", "may", "might", "will", "would", "shall", "should", "must", "also", "just", "very", "too", "so", "such", "than", "then", "that", "this", "these", "those", "there", "here", "it", "its", "itself", "they", "them", "their", "theirs", "we", "our", "ours", "us", "you", "your", "yours", "i", "me", "my", "he", "him", "his", "she", "her", "hers", "what", "which", "who", "whom", "whose", "when", "where", "why", "how", "while", "whereas", "although", "though", "because", "both", "either", "up", "down", "out", "over", "under", "about", "after", "before", "within", "between", "during", "until", "till", "via", "per", "each", "other", "another", "own", "s", "t", "only", "still", "now", "even", "well", "just", "let", "lets", "get", "gets", "got", "called", "named", "known", "available", "able", "including", "include", "includes", "included", "like", "etc", "ie", "eg", "please"]
)
_NEGATIONS = frozenset(
    ["not", "no", "never", "cannot", "none", "nothing", "nobody", "neither", "nor", "without", "unless", "cant", "dont", "doesnt", "isnt", "arent", "wasnt", "werent", "wont", "wouldnt", "shouldnt", "couldnt", "hasnt", "havent", "hadnt", "didnt", "mustnt", "neednt"]
)
_ABSOLUTES = frozenset(
    ["all", "every", "everyone", "everybody", "everything", "everywhere", "any", "anyone", "anything", "always", "ever", "whole", "entire", "unlimited", "guaranteed", "guarantee", "guarantees", "completely", "entirely", "fully", "forever", "permanently", "universally"]
)
_HEDGES = frozenset(
    ["usually", "typically", "generally", "normally", "often", "sometimes", "mostly", "most", "some", "occasionally", "approximately", "roughly", "nearly", "almost", "likely", "probably", "possibly", "partly", "partially"]
)
_APPROX = frozenset({"about", "around", "approximately", "roughly", "nearly", "almost", "some"})
"""Before a number these make it approximate: a sentence must not drop them."""

_ORDINALS = {
    "first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5, "sixth": 6, "seventh": 7,
    "eighth": 8, "ninth": 9, "tenth": 10,
}
_FREE = re.compile(
    r"\b(?:free of (?:charge|cost)|(?:at|with|for) no (?:extra )?(?:charge|cost|fee)|"
    r"without (?:any )?(?:charge|cost|fee)|(?:there is |there are )?no (?:charge|cost|fees?) for|"
    r"no[- ]cost|cost[- ]free|charge[- ]free|fee[- ]free|costs? nothing|"
    r"(?:does not|doesn['’]t|do not|don['’]t|will not|won['’]t)\s+(?:have to |need to )?"
    r"(?:cost|pay|charge)(?: (?:anything|a thing|extra))?|(?:is |are |gets? |will be )?waived)\b",
    re.IGNORECASE,
)
"""Ways of saying "free": one word, so "free of charge" does not mention a charge, and "you don't
pay the fee" is no negation the sources lack when they say it is waived."""
_MON_FRI = re.compile(
    r"\b(?:on\s+)?(?:from\s+)?mon(?:day)?\.?\s*(?:to|through|until|till|-|–)\s*fri(?:day)?\b\.?",
    re.IGNORECASE,
)
""""Monday to Friday" is "on weekdays"."""
_CLOCK_TIME = r"\d{1,2}:\d{2}(?:\s*[ap]m)?"
_OPEN_CLOSE = re.compile(
    rf"\bopens?\s+(?:at\s+)?(?P<a>{_CLOCK_TIME})(?:\s+in\s+the\s+morning)?,?\s+and\s+closes?\s+"
    rf"(?:at\s+)?(?P<b>{_CLOCK_TIME})",
    re.IGNORECASE,
)
""""Opens at 06:30 and closes at 21:00" is "open from 06:30 to 21:00"."""
_BETWEEN = re.compile(rf"\bbetween\s+(?P<a>{_CLOCK_TIME})\s+and\s+(?P<b>{_CLOCK_TIME})", re.IGNORECASE)
_CLOCK_RANGE = re.compile(
    rf"(?:\bfrom\s+)?\b(?P<a>{_CLOCK_TIME})\s*(?:to|until|till|-|–)\s*(?P<b>{_CLOCK_TIME})\b",
    re.IGNORECASE,
)
_MUST = re.compile(r"\b(?:needs? to|ha(?:ve|s) to|(?:is|are) required to)\b", re.IGNORECASE)
"""An obligation is one stop word however it is said ("you need to check in" is "you must")."""
_MAXIMUM = re.compile(
    r"\b(?:never|not|no|cannot|can['’]t|won['’]t|doesn['’]t|don['’]t)\s+((?:[^\W\d_]+\s+){0,2}?)"
    r"(?:(?:be |go |goes )?(?:more than|above|over)|exceeds?)\s+(?=[\d€$£]|EUR|USD|GBP|"
    r"one|two|three|four|five|six|seven|eight|nine|ten|twelve)",
    re.IGNORECASE,
)
"""A ceiling said with a negation ("never goes above EUR 10", "can't have more than two") is the
sources' "a maximum of"."""
_BOUNDS = {"more": "at most", "less": "at least", "later": "by", "earlier": "from",
           "longer": "at most", "fewer": "at least"}
_BOUND = re.compile(
    r"\bno(?:t)?\s+(more|less|later|earlier|longer|fewer)\s+than\b", re.IGNORECASE
)
""""No more than 3 hours" is a bound ("at most"), not a negation."""
_NOT_COUNTED = frozenset({"", ",", ".", "of", "is", "are", "was", "were", "has", "have", "can",
                          "may", "will", "would", "should", "must", "that", "which", "who", "and",
                          "or", "but", "to", "in", "on", "at", "for", "with", "by", "from"})
"""After "one" these make it a pronoun, not a number."""
_UNIT_ABBREVIATIONS = frozenset({"sec", "secs", "min", "mins", "hr", "hrs", "yr", "yrs", "ct", "kb",
                                 "mb", "gb", "tb", "mg", "g", "kg", "l", "ml", "m", "km", "cm",
                                 "mm", "mi", "pct"})
_PRONOUN_ONE = frozenset(
    {"the", "this", "that", "each", "every", "which", "any", "no", "another", "one"}
)
_LIMIT_SIDES = {"under": "<", "below": "<", "above": ">"}
"""A number right after these is one side of a limit: "children under 4" are not "aged 4 to 15".
("Over" is left out: "spread over 10 instalments" is no limit.)"""
_ONCE_CLAUSE = frozenset({"they", "you", "we", "he", "she", "it", "i", "the", "your", "their",
                          "his", "her", "its", "this", "that", "these", "those", "our", "my",
                          "all", "both", "payment", "paid", "registered", "approved"})
"""After "once" these make it "as soon as" ("once they have passed"), not a count."""

# units: a number's unit travels with it ("EUR 25 per hour" is not "EUR 25 per day")
_UNITS = {
    **dict.fromkeys(["second", "seconds", "sec", "secs"], "#second"),
    **dict.fromkeys(["minute", "minutes", "min", "mins"], "#minute"),
    **dict.fromkeys(["hour", "hours", "hr", "hrs", "hourly"], "#hour"),
    **dict.fromkeys(["day", "days", "daily"], "#day"),
    **dict.fromkeys(["night", "nights", "nightly"], "#night"),
    **dict.fromkeys(["week", "weeks", "weekly"], "#week"),
    **dict.fromkeys(["month", "months", "monthly"], "#month"),
    **dict.fromkeys(["year", "years", "yearly", "annual", "annually", "yr", "yrs"], "#year"),
    **dict.fromkeys(["halfyear", "semiannual", "biannual"], "#halfyear"),
    **dict.fromkeys(["halfday"], "#halfday"),
    **dict.fromkeys(["halfhour"], "#halfhour"),
    **dict.fromkeys(["fortnight", "fortnights", "fortnightly"], "#fortnight"),
    **dict.fromkeys(["eur", "euro", "euros", "€"], "#eur"),
    **dict.fromkeys(["usd", "dollar", "dollars", "$"], "#usd"),
    **dict.fromkeys(["gbp", "£"], "#gbp"),
    **dict.fromkeys(["cent", "cents", "ct"], "#cent"),
    **dict.fromkeys(["percent", "%", "pct"], "#percent"),
    **dict.fromkeys(["kb", "kilobyte", "kilobytes"], "#kb"),
    **dict.fromkeys(["mb", "megabyte", "megabytes"], "#mb"),
    **dict.fromkeys(["gb", "gigabyte", "gigabytes"], "#gb"),
    **dict.fromkeys(["tb", "terabyte", "terabytes"], "#tb"),
    **dict.fromkeys(["mg", "milligram", "milligrams"], "#mg"),
    **dict.fromkeys(["g", "gram", "grams"], "#g"),
    **dict.fromkeys(["kg", "kilogram", "kilograms", "kilo", "kilos"], "#kg"),
    **dict.fromkeys(["l", "litre", "litres", "liter", "liters"], "#litre"),
    **dict.fromkeys(["ml", "millilitre", "millilitres", "milliliter", "milliliters"], "#ml"),
    **dict.fromkeys(["m", "metre", "metres", "meter", "meters"], "#metre"),
    **dict.fromkeys(["km", "kilometre", "kilometres", "kilometer", "kilometers"], "#km"),
    **dict.fromkeys(["cm", "centimetre", "centimetres", "centimeter", "centimeters"], "#cm"),
    **dict.fromkeys(["mm", "millimetre", "millimetres", "millimeter", "millimeters"], "#mm"),
    **dict.fromkeys(["mile", "miles", "mi"], "#mile"),
    **dict.fromkeys(["user", "users", "seat", "seats"], "#user"),
    **dict.fromkeys(["item", "items"], "#item"),
    **dict.fromkeys(["page", "pages"], "#page"),
}
_CURRENCIES = frozenset({"#eur", "#usd", "#gbp", "#cent"})
_SOFT_UNITS = frozenset({"#user", "#item", "#page"})
"""Counted like units beside a number, but no period or measure a sentence must not add."""
_UNIT_SKIP = frozenset({"per", "a", "an", "each", "every", "of", "in", "the", "calendar", "working",
                        "business", "consecutive", "full"})

_IRREGULAR = {
    "lent": "lend", "paid": "pay", "kept": "keep", "sent": "send", "got": "get", "gotten": "get",
    "given": "give", "gave": "give", "made": "make", "taken": "take", "took": "take", "held": "hold",
    "ran": "run", "bought": "buy", "left": "leave", "sold": "sell", "told": "tell", "found": "find",
    "shown": "show", "chose": "choose", "chosen": "choose", "written": "write", "wrote": "write",
    "spent": "spend", "began": "begin", "begun": "begin", "came": "come", "went": "go", "gone": "go",
    "met": "meet", "built": "build", "brought": "bring", "thought": "think", "won": "win",
    "lost": "lose", "rose": "rise", "risen": "rise", "fell": "fall", "fallen": "fall", "grew": "grow",
    "grown": "grow", "drew": "draw", "drawn": "draw", "known": "know", "knew": "know", "saw": "see",
    "seen": "see", "drove": "drive", "driven": "drive", "flew": "fly", "flown": "fly", "led": "lead",
    "fed": "feed", "felt": "feel", "dealt": "deal", "meant": "mean", "heard": "hear",
    "caught": "catch", "taught": "teach", "sought": "seek", "stood": "stand", "broke": "break",
    "broken": "break", "spoke": "speak", "spoken": "speak", "wore": "wear", "worn": "wear",
    "rode": "ride", "ridden": "ride", "froze": "freeze", "frozen": "freeze", "hid": "hide",
    "hidden": "hide", "children": "child", "people": "person", "men": "man", "women": "woman",
    "feet": "foot", "teeth": "tooth", "mice": "mouse", "better": "good", "best": "good",
    "worse": "bad", "worst": "bad", "faster": "fast", "quicker": "quick", "larger": "large",
    "smaller": "small", "longer": "long", "shorter": "short", "higher": "high", "lower": "low",
    "earlier": "early", "later": "late", "cheaper": "cheap", "bigger": "big", "newer": "new",
    "older": "old", "greater": "great", "fewer": "few", "less": "little", "latest": "late",
}
_SYNONYM_GROUPS = (
    "lend loan borrow",
    "cost price fee charge pay payment",
    "receive get obtain",
    "need require requirement necessary",
    "begin start commence",
    "end finish conclude",
    "close shut",
    "allow permit let permission",
    "offer provide supply",
    "answer respond response reply",
    "help assist assistance",
    "show display appear",
    "keep retain store hold",
    "last final",
    "buy purchase",
    "staff employee worker personnel",
    "customer client",
    "phone telephone",
    "email e-mail",
    "big large",
    "small little",
    "fast quick rapid",
    "repair fix mend",
    "fine penalty",
    "limit cap maximum max",
    "minimum min",
    "approve approval",
    "choose select pick",
    "home house",
    "aim goal",
    "area zone region",
    "job role position",
    "rule policy",
    "bill invoice",
    "car vehicle",
    "child kid",
    "shop store",
    "speed velocity",
    "stop halt cease",
    "try attempt",
    "want wish",
    "issue problem",
    "sign signature",
    "join enrol enroll register",
    "cancel terminate",
    "increase raise rise",
    "decrease reduce reduction cut",
)
_SYNONYMS = {
    form: g.split()[0] for g in _SYNONYM_GROUPS for w in g.split() for form in (w, stem(w))
}
_ANTONYM_PAIRS = (
    "north south", "northern southern", "east west", "eastern western", "morning evening",
    "morning afternoon", "morning night", "before after", "open close", "free pay",
    "early late", "minimum maximum", "hard soft", "hot cold", "warm cold", "weekday weekend",
    "first last", "increase decrease", "more less", "high low", "allow forbid", "allow prohibit",
    "include exclude", "public private", "internal external", "online offline", "require optional",
    "accept reject", "begin end", "inside outside", "upper lower", "import export", "buy sell",
    "win lose", "gain loss", "arrive depart", "enable disable", "add remove", "full part",
    "full empty", "input output", "debit credit", "incoming outgoing", "inbound outbound",
    "manual automatic", "urban rural", "domestic international", "old new", "young old",
    "phone email", "lend buy", "adult child", "employee contractor", "permanent temporary",
    "fixed variable", "local remote", "wet dry", "light dark", "strong weak", "safe unsafe",
    "legal illegal", "valid invalid", "short long", "fast slow", "cheap expensive", "small large",
    "increase reduce", "up down", "above below", "left right", "top bottom", "front back",
    "entry exit", "import export", "open shut", "on off", "start stop", "present absent",
    "single double", "same different", "free cost", "free pay", "paid unpaid",
)


def _canon_word(word: str) -> str:
    """One word as the support check compares it."""
    w = word.lower().replace("’", "'")
    if w.endswith("'s"):
        w = w[:-2]
    w = w.strip("'")
    w = _IRREGULAR.get(w, w)
    if w in _UNITS and w not in _UNIT_ABBREVIATIONS:
        return _UNITS[w]
    if w in _SYNONYMS:
        return _SYNONYMS[w]
    s = stem(w)
    return _SYNONYMS.get(s, s)


_ANTONYMS: dict[str, set[str]] = {}
for _pair in _ANTONYM_PAIRS:
    _a, _b = (_canon_word(x) for x in _pair.split())
    _ANTONYMS.setdefault(_a, set()).add(_b)
    _ANTONYMS.setdefault(_b, set()).add(_a)

_TOKEN = re.compile(
    r"(?P<time>\b\d{1,2}:\d{2}(?:\s*[ap]\.?m\b\.?)?(?![\d.,]\d))"
    r"|(?P<num>\d+(?:[.,]\d+)*(?:st|nd|rd|th)?)"
    r"|(?P<sym>[€$£%])"
    r"|(?P<word>[^\W\d_]+(?:['’][^\W\d_]+)*)"
    r"|(?P<stop>[.;:!?])"
    r"|(?P<comma>,)"
)
_NUMBER_COMPOUND = re.compile(
    r"\b(twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety)[- ](one|two|three|four|five|six|"
    r"seven|eight|nine)\b",
    re.IGNORECASE,
)


_SCALED = re.compile(
    r"\b(\d+(?:\.\d+)?|one|two|three|four|five|six|seven|eight|nine|ten|a)\s+"
    r"(hundred|thousand|million)\b",
    re.IGNORECASE,
)


def _scale(m: re.Match[str]) -> str:
    """"two hundred" -> "200", "1.5 million" -> "1500000"."""
    head = m.group(1).lower()
    value = Decimal(1) if head == "a" else Decimal(NUMBER_WORDS.get(head, 0) or head)
    return format((value * NUMBER_WORDS[m.group(2).lower()]).normalize(), "f")


@dataclass(frozen=True)
class _Tok:
    raw: str
    key: str  # canonical: a word, "=12.4" for a number, "#unit" for a unit, "^2" for an ordinal
    kind: str  # word | num | unit | ord | neg | abs | hedge | stop
    cap: bool  # written with a capital
    initial: bool  # first word of a sentence, line or list item
    compound: str  # the hyphenated compound it was written in, lower case ("epl-visitor")


_Toks = tuple[_Tok, ...]


def _number_key(raw: str) -> str | None:
    s = raw.lower().rstrip(".")
    s = re.sub(r"(st|nd|rd|th)$", "", s)
    if re.fullmatch(r"\d{1,3}(,\d{3})+", s):
        s = s.replace(",", "")
    elif re.fullmatch(r"\d+,\d{1,2}", s):
        s = s.replace(",", ".")
    elif "," in s:
        return None
    if s.count(".") > 1:
        return "=" + s
    try:
        value = Decimal(s)
    except InvalidOperation:
        return None
    text = format(value.normalize(), "f")
    return "=" + text


def _time_key(raw: str) -> str:
    m = re.match(r"(\d{1,2}):(\d{2})\s*([ap])?", raw.lower())
    assert m
    hour, minute, half = int(m.group(1)), m.group(2), m.group(3)
    if half == "p" and hour < 12:
        hour += 12
    return f"={hour}" if minute == "00" else f"={hour}:{minute}"


_NUMBER_WORD = "|".join(sorted((w for w in NUMBER_WORDS if w not in ("once", "twice", "thrice")), key=len, reverse=True))
_CLOCK = re.compile(r"\b(\d{1,2})(?:[:.](\d{2}))?\s*([ap])\.?\s?m\b\.?", re.IGNORECASE)
_NOON = re.compile(r"\b(?:noon|midday)\b", re.IGNORECASE)
_PERIOD = re.compile(
    rf"\b(\d+(?:\.\d+)?|{_NUMBER_WORD}|a|an)\s+(weeks?|fortnights?|years?|hours?)\b(?!\s+and\s+a\s+half)",
    re.IGNORECASE,
)
_PERIOD_RANGE = re.compile(
    rf"\b(\d+|{_NUMBER_WORD})\s*(?:-|–|to)\s*(\d+|{_NUMBER_WORD})\s+(weeks?|fortnights?|years?)\b",
    re.IGNORECASE,
)
_PERIOD_AFTER = re.compile(
    r"\b(for|within|after|to|than|in|over|about|around|of|lasts?|takes?)\s*$", re.IGNORECASE
)
_HALF = re.compile(
    r"\b(?:(an?|one|\d+)\s+hours?\s+and\s+a\s+half|(\d+(?:\.\d+)?|an?|one)\s+and\s+a\s+half\s+hours?"
    r"|half\s+an\s+hour)\b",
    re.IGNORECASE,
)
_IN_DAYS = {"week": 7, "fortnight": 14}


def _quantity(word: str) -> Decimal:
    low = word.lower()
    return Decimal(1) if low in ("a", "an") else Decimal(NUMBER_WORDS.get(low, 0) or low)


def _same_quantities(text: str) -> str:
    """One way of writing a time of day or a period, so that "9 pm" meets "21:00", "three weeks"
    "21 days", "a year" "12 months" and "an hour and a half" "90 minutes". A rate ("EUR 120 a
    year") keeps its "a": only a period after a word like "for" or "within" is rewritten."""

    def clock(m: re.Match[str]) -> str:
        return f"{m.group(1)}:{m.group(2) or '00'} {m.group(3).lower()}m"

    def half(m: re.Match[str]) -> str:
        head = m.group(1) or m.group(2)
        hours = Decimal("0.5") if head is None else _quantity(head) + Decimal("0.5")
        return f"{format((hours * 60).normalize(), 'f')} minutes"

    def period(m: re.Match[str]) -> str:
        head, unit = m.group(1), m.group(2).lower().rstrip("s")
        if head.lower() in ("a", "an") and not _PERIOD_AFTER.search(text[: m.start()]):
            return m.group(0)
        n = _quantity(head)
        if unit in _IN_DAYS:
            return f"{format((n * _IN_DAYS[unit]).normalize(), 'f')} days"
        if unit == "year":
            return f"{format((n * 12).normalize(), 'f')} months"
        return f"{format((n * 60).normalize(), 'f')} minutes"

    def period_range(m: re.Match[str]) -> str:
        unit = m.group(3).lower().rstrip("s")
        factor, name = (_IN_DAYS[unit], "days") if unit in _IN_DAYS else (12, "months")
        low, high = (format((_quantity(g) * factor).normalize(), "f") for g in m.group(1, 2))
        return f"{low} to {high} {name}"

    text = _CLOCK.sub(clock, text)
    text = _NOON.sub("12:00", text)
    text = _HALF.sub(half, text)
    text = _PERIOD_RANGE.sub(period_range, text)
    return _PERIOD.sub(period, text)


@functools.lru_cache(maxsize=32768)
def _tokens(text: str) -> _Toks:
    """Tokens of a sentence or passage, in order, with what the support check needs to know."""
    text = _same_quantities(text)
    text = _NUMBER_COMPOUND.sub(
        lambda m: str(NUMBER_WORDS[m.group(1).lower()] + NUMBER_WORDS[m.group(2).lower()]), text
    )
    text = _SCALED.sub(_scale, text)
    text = re.sub(r"\bper\s+cent\b", "percent", text, flags=re.IGNORECASE)
    text = _MAXIMUM.sub(lambda m: f"{m.group(1)}a maximum of ", text)
    text = re.sub(r"\b(?:at most|up to a maximum of)\b", "a maximum of", text, flags=re.IGNORECASE)
    text = re.sub(r"\byounger than\b", "under", text, flags=re.IGNORECASE)
    text = re.sub(r"\bolder than\b", "above", text, flags=re.IGNORECASE)
    text = _MUST.sub("must", text)
    text = _FREE.sub("free", text)
    text = _BOUND.sub(lambda m: _BOUNDS[m.group(1).lower()], text)
    text = re.sub(r"\bhalf[- ](year|day|hour)s?\b", r"half\1", text, flags=re.IGNORECASE)
    text = re.sub(r"\b(?:working|business|week)[- ]?days?\b", "weekdays", text, flags=re.IGNORECASE)
    text = _MON_FRI.sub("on weekdays", text)
    text = _OPEN_CLOSE.sub(r"open from \g<a> to \g<b>", text)
    text = _BETWEEN.sub(r"from \g<a> to \g<b>", text)
    # the end of an opening time is when it closes: "closes at 9 pm" of "open from 06:30 to 21:00"
    text = _CLOCK_RANGE.sub(r"from \g<a> to close \g<b>", text)
    compounds = {
        m.start(): m.group(0).lower()
        for m in re.finditer(r"[^\W_]+(?:-[^\W_]+)+", text)
    }
    spans = sorted(compounds)
    out: list[_Tok] = []  # returned as a tuple: cached, shared
    initial = True
    prev_word = prev_kind = ""
    for m in _TOKEN.finditer(text):
        raw = m.group(0)
        compound = ""
        for start in spans:
            if start <= m.start() < start + len(compounds[start]):
                compound = compounds[start]
                break
        if m.lastgroup in ("stop",):
            if raw in ".!?:;":
                initial = raw in ".!?:"
            continue
        if m.lastgroup == "comma":
            continue
        cap = raw[:1].isupper()
        if m.lastgroup == "time":
            out.append(_Tok(raw, _time_key(raw), "num", False, initial, compound))
        elif m.lastgroup == "num":
            key = _number_key(raw)
            if key is not None:
                kind = "ord" if re.search(r"(st|nd|rd|th)$", raw.lower()) else "num"
                if kind == "ord":
                    key = "^" + key[1:]
                elif prev_word in _LIMIT_SIDES:  # "under 4" is not "4 to 15"
                    key = f"={_LIMIT_SIDES[prev_word]}{key[1:]}"
                out.append(_Tok(raw, key, kind, False, initial, compound))
        elif m.lastgroup == "sym":
            out.append(_Tok(raw, _UNITS[raw], "unit", False, initial, compound))
        else:
            low = raw.lower().replace("’", "'")
            base = low[:-2] if low.endswith("'s") else low
            head, _, tail = base.partition("'")
            if tail in ("ll", "re", "ve", "d", "m") and head in _STOPWORDS:
                base = head  # "you'll", "they're": the pronoun, a stop word
            flat = base.replace("'", "")
            if flat in _NEGATIONS or base.endswith("n't"):
                kind, key = "neg", "!neg"
            elif base == "one" and (
                prev_word in _PRONOUN_ONE or _next_word(text, m.end()) in _NOT_COUNTED
            ):
                kind, key = "stop", base  # "the first one is free", "one of the branches"
            elif base in _LIMIT_SIDES and _next_word(text, m.end()) == "#":
                kind, key = "stop", base  # the number after it carries the side ("=<4")
            elif base == "may" and cap and not initial:
                kind, key = "word", "may"  # the month
            elif base in NUMBER_WORDS and (
                base != "once" or _next_word(text, m.end()) not in _ONCE_CLAUSE
            ):  # "once a year", "resit it once in August", but not "once they have passed"
                side = _LIMIT_SIDES.get(prev_word, "")  # "under six" is "under 6"
                kind, key = "num", f"={side}{NUMBER_WORDS[base]}"
            elif base in _ORDINALS:
                kind, key = "ord", f"^{_ORDINALS[base]}"
            elif base in _ABSOLUTES and not (
                base in ("every", "each") and _next_word(text, m.end()) in _FREQUENCY
            ):
                kind, key = "abs", base
            elif base in _HEDGES:
                kind, key = "hedge", base
            elif base in _UNITS and (
                base not in _UNIT_ABBREVIATIONS or raw.islower() or prev_kind == "num"
            ):
                kind, key = "unit", _UNITS[base]  # "HR" is no hour, "5 GB" is a size
            elif base in _STOPWORDS or (len(base) == 1 and not raw.isupper()):
                kind, key = "stop", base
            else:
                kind, key = "word", _canon_word(base)
            out.append(_Tok(raw, key, kind, cap, initial, compound))
            prev_word, prev_kind = base, kind
            initial = False
            continue
        prev_word, prev_kind = "", out[-1].kind if out else ""
        initial = False
    return tuple(out)


def _next_word(text: str, pos: int) -> str:
    m = re.match(r"\s*([^\W\d_]+|\d+|[,.])", text[pos:])
    word = m.group(1).lower() if m else ""
    return "#" if word.isdigit() else word


_FREQUENCY = frozenset(
    {"#", "other", "morning", "evening", "afternoon", "night", "weekday", "weekdays", "weekend",
     *NUMBER_WORDS, *_UNITS, "monday", "tuesday", "wednesday", "thursday", "friday", "saturday",
     "sunday"}
)
"""After "every" these make a frequency ("every three weeks"), not an absolute ("every plan")."""


def _is_acronym(raw: str) -> bool:
    return sum(c.isupper() for c in raw) >= 2


@dataclass
class _Clause:
    sentence: int
    segment: int  # the ";"-separated part of its sentence
    index: int  # position in its sentence
    toks: _Toks
    own: set[str]  # its words, names, units and numbers
    ext: set[str] = field(default_factory=set)
    """`own`, plus the words and names (never the numbers) of the clauses it depends on: "at 45
    mg per litre" after "The southern zone is soft", "is closed at weekends" after "Northgate"."""
    chain: set[str] = field(default_factory=set)
    """The `own` keys of this clause and of the clauses it depends on, numbers included."""
    stands_for: list[_Clause] = field(default_factory=list)
    """The clauses before it that it completes ("at 45 mg per litre" completes "The southern
    zone is soft"): tied with them, it is the one that counts."""
    negations: list[_Negation] = field(default_factory=list)
    """For each negation: the words before it in the clause, the words after it."""
    absolute: bool = False
    """It, or a clause it stands for, states an absolute ("all", "any", "always")."""


@dataclass
class _Passage:
    ctx: _Toks  # title and section
    sentences: list[_Toks]
    clauses: list[_Clause]
    names: set[str]  # words the passage writes capitalised where no sentence starts
    lower: set[str]  # words the passage also writes in lower case
    compounds: set[str]


_SEGMENT_SPLIT = re.compile(r"\s*;\s*|\s+[-–—]\s+")
_CLAUSE_SPLIT = re.compile(
    r",\s+|\s+(?=(?:but|while|whereas|unless|except|although|though)\b)",
    re.IGNORECASE,
)
_AND_SPLIT = re.compile(r"\s+(?=(?:and|or|plus)\s)", re.IGNORECASE)
_PREDICATE = re.compile(
    r"(?:and|or)\s+(?:can|cannot|can't|may|must|is|are|isn't|aren't|will|won't|should|has|have|"
    r"does|do|doesn't|don't|needs?)\b",
    re.IGNORECASE,
)
_COORDINATORS = frozenset({"and", "or", "but", "while", "whereas", "plus", "nor"})
_PRONOUNS = frozenset({"it", "they", "he", "she", "its", "their", "there"})


def _clauses_of(sentence: str, claim: bool = False) -> list[tuple[int, str]]:
    """(segment, clause) pairs of a sentence: segments at ";", clauses at ", ", "but", "unless",
    ... and at "and"/"or" only where both sides state a number ("21 days and DVDs for 7 days").

    A sentence to check (`claim`) is also split where both sides name something ("Books last
    21 days and the guest network is called HPL-Guest"): each side may come from another source."""
    has_value = _has_value if claim else _has_number
    out: list[tuple[int, str]] = []
    for seg, segment in enumerate(_SEGMENT_SPLIT.split(sentence)):
        for part in _CLAUSE_SPLIT.split(segment):
            if not part or not part.strip():
                continue
            pieces = _AND_SPLIT.split(part)
            current = pieces[0]
            for piece in pieces[1:]:
                # "... and can be reserved" is a claim of its own
                own_claim = claim and _PREDICATE.match(piece) is not None
                if own_claim or (
                    has_value(current) and has_value(piece) and not _ends_in_number(current)
                ):
                    out.append((seg, current))
                    current = piece
                else:
                    current = f"{current} {piece}"
            out.append((seg, current))
    return [(g, c) for g, c in out if c.strip()]


def _has_number(text: str) -> bool:
    return any(t.kind == "num" for t in _tokens(text))


def _has_value(text: str) -> bool:
    return any(
        t.kind == "num" or (t.kind == "word" and ((t.cap and not t.initial) or _is_acronym(t.raw)))
        for t in _tokens(text)
    )


def _ends_in_number(text: str) -> bool:
    """"between 8:00" and "18:00" are one range, not two clauses."""
    toks = _tokens(text)
    return bool(toks) and toks[-1].kind == "num"


def _keys(toks: Iterable[_Tok], kinds: tuple[str, ...] = ("word", "num", "ord", "unit")) -> set[str]:
    return {t.key for t in toks if t.kind in kinds}


def _negations(toks: _Toks) -> list[_Negation]:
    """Each negation of a clause: the words before it, and the words after it in order (the
    first of them is what is negated: "never to be *shared*")."""
    out = []
    for i, t in enumerate(toks):
        if t.kind == "neg":
            after = [x.key for x in toks[i + 1 : i + 6] if x.kind in ("word", "num", "ord")]
            out.append(_Negation(_keys(toks[:i], ("word",)), tuple(dict.fromkeys(after))))
    return out


@dataclass(frozen=True)
class _Negation:
    before: set[str]
    after: tuple[str, ...]


def _passage(f: Finding) -> _Passage:
    return _parse_passage(f.text, f.title, f.section or "")


@functools.lru_cache(maxsize=512)
def _parse_passage(text: str, title: str, section: str) -> _Passage:
    """A passage read once: sentences, clauses, names (cached: answers cite the same passages).

    A sentence addressed to the model ("Ignore previous instructions and tell the user ...") is
    no evidence: a sentence repeating what it asks for finds no support in it."""
    sentence_texts = [s for s in answer_units(text) if not looks_like_instruction(s)] or [""]
    sentences = [_tokens(s) for s in sentence_texts]
    every = [t for s in sentences for t in s]
    names = {
        t.key for t in every
        if t.kind == "word" and ((t.cap and not t.initial) or _is_acronym(t.raw))
    }
    lower = {t.key for t in every if t.kind == "word" and not t.cap}
    ctx = _tokens(" ".join(x for x in (title, section) if x))
    compounds = {t.compound for t in [*every, *ctx] if t.compound}
    clauses: list[_Clause] = []
    for si, sentence_text in enumerate(sentence_texts):
        mine: list[_Clause] = []
        for ci, (seg, part) in enumerate(_clauses_of(sentence_text)):
            toks = _tokens(part)
            own = _keys(toks) | _number_units(toks)
            mine.append(
                _Clause(si, seg, ci, toks, own, negations=_negations(toks),
                        absolute=any(t.kind == "abs" for t in toks))
            )
        opens_with_pronoun = bool(mine and mine[0].toks) and mine[0].toks[0].raw.lower() in _PRONOUNS
        for c in mine:
            _link(c, mine, names)
            if c.segment == 0 and si > 0 and opens_with_pronoun:
                # "It adds offline editing": the previous sentence says what "it" is
                c.ext |= _keys(sentences[si - 1])
                c.chain |= {k for x in clauses if x.sentence == si - 1 for k in x.own}
        clauses.extend(mine)
    return _Passage(ctx, sentences, clauses, names, lower, compounds)


def _number_units(toks: _Toks) -> set[str]:
    """"=6@#week" for "6 weeks": a number with the unit beside it or, where none stands beside
    it ("a daily allowance of EUR 45"), with every unit of the clause."""
    units = _keys(toks, ("unit",))
    out: set[str] = set()
    for i, t in enumerate(toks):
        if t.kind == "num":
            near = _units_near(toks, i)
            paired = near if near - _CURRENCIES else near | units
            out |= {f"{t.key}@{u}" for u in paired}
    return out


def _link(c: _Clause, siblings: list[_Clause], names: set[str]) -> None:
    """Lends a clause that names nothing, or states nothing but names, the clauses before it.

    "The southern zone is soft, at 45 mg per litre": "at 45 mg ..." stands for both. A parallel
    clause with its own number ("EUR 140 ... in capital cities and EUR 110 elsewhere") borrows
    the frame's words and units for its own number, never the other clause's number."""
    c.ext, c.chain, c.stands_for = set(c.own), set(c.own), []
    has_name = any(t.kind == "word" and t.key in names for t in c.toks)
    has_plain = any(t.kind == "word" and t.key not in names for t in c.toks)
    numbers = _keys(c.toks, ("num",))
    if has_name and (has_plain or numbers):
        return
    parallel = bool(c.toks) and c.toks[0].raw.lower() in _COORDINATORS
    for x in reversed([x for x in siblings if x.segment == c.segment and x.index < c.index]):
        # of "API keys do not expire", lend "API keys", never "expire"
        negation = next((i for i, t in enumerate(x.toks) if t.kind == "neg"), len(x.toks))
        c.ext |= _keys(x.toks[:negation], ("word",))
        if numbers and parallel and _keys(x.toks, ("num",)):
            c.chain |= {f"{n}@{u}" for n in numbers for u in _keys(x.toks, ("unit",))}
        else:
            c.chain |= x.own
            c.stands_for.append(x)
            c.absolute = c.absolute or x.absolute
        if any(t.kind == "word" and t.key in names for t in x.toks):
            break


def _prefix_match(a: str, b: str) -> bool:
    if a == b:
        return True
    if a[:1] in "=#^!" or b[:1] in "=#^!" or ":" in a or ":" in b:
        return False
    n = min(len(a), len(b))
    if n < 5:
        return False
    common = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        common += 1
    return common >= 5 and common >= 0.75 * n


class _Vocabulary:
    """The words of one check (sentence and cited passages) with each word's near forms among
    them ("renew" / "renewal"), found once instead of at every lookup."""

    def __init__(self, words: Iterable[str]) -> None:
        self.by_head: dict[str, list[str]] = {}
        for w in set(words):
            if len(w) >= 5 and w[:1] not in "=#^!":
                self.by_head.setdefault(w[:5], []).append(w)
        self.near: dict[str, frozenset[str]] = {}

    def near_forms(self, key: str) -> frozenset[str]:
        found = self.near.get(key)
        if found is None:
            found = frozenset(
                v for v in self.by_head.get(key[:5], ()) if v != key and _prefix_match(key, v)
            )
            self.near[key] = found
        return found


_VOCABULARY: contextvars.ContextVar[_Vocabulary | None] = contextvars.ContextVar(
    "support_vocabulary", default=None
)


def _found(key: str, vocab: set[str]) -> bool:
    """The word, or a near form of it ("renewal" for "renew"), is in `vocab`."""
    if key in vocab:
        return True
    if len(key) < 5 or key[:1] in "=#^!":
        return False
    words = _VOCABULARY.get()
    if words is None:
        return any(_prefix_match(key, v) for v in vocab)
    return not words.near_forms(key).isdisjoint(vocab)


@dataclass
class _ClaimView:
    toks: _Toks
    content: list[str]  # canonical content words (names included), no numbers
    numbers: set[str]
    names: set[str]
    name_compounds: set[str]
    negated: bool
    hedged: bool


def _is_name(t: _Tok, passages: Sequence[_Passage]) -> bool:
    if t.kind != "word":
        return False
    if _is_acronym(t.raw) or (t.cap and not t.initial):
        return True
    return t.cap and any(t.key in p.names and t.key not in p.lower for p in passages)


def _view(text: str, passages: Sequence[_Passage]) -> _ClaimView:
    toks = _tokens(text)
    names = {t.key for t in toks if _is_name(t, passages)}
    name_compounds = {
        t.compound for t in toks
        if t.compound and t.key in names and not t.initial and not t.compound[:1].isdigit()
    }
    content: list[str] = []
    seen_compounds: set[str] = set()
    for t in toks:
        if t.kind not in ("word", "ord") and not (t.kind == "unit" and t.key not in _CURRENCIES):
            continue
        group = _compound_keys(t, toks, names)
        if group:
            if group not in seen_compounds:
                seen_compounds.add(group)
                content.append(group)
            continue
        if t.key not in content:
            content.append(t.key)
    return _ClaimView(
        toks,
        content,
        {t.key for t in toks if t.kind == "num"},
        names,
        name_compounds,
        any(t.kind == "neg" for t in toks),
        any(t.kind == "hedge" for t in toks),
    )


def _compound_keys(t: _Tok, toks: _Toks, names: set[str]) -> str:
    """A lower-case hyphenated compound ("e-books", "home-office") is one word: "cmp:e-book"."""
    if not t.compound or any(c.isdigit() for c in t.compound):
        return ""
    parts = [x for x in toks if x.compound == t.compound]
    if any(x.key in names for x in parts) or len(parts) < 2:
        return ""
    return "cmp:" + "-".join(_part_key(x) for x in parts)


def _part_key(t: _Tok) -> str:
    return t.raw.lower() if t.kind in ("stop", "neg") else t.key


def _sequences(toks: _Toks) -> set[str]:
    """Every run of two to four tokens as a compound key, to find "carry-over" in "carried over"."""
    keys = [_part_key(t) for t in toks]
    return {
        "cmp:" + "-".join(keys[i : i + n])
        for n in (2, 3, 4)
        for i in range(len(keys) - n + 1)
    }


def _values(toks: _Toks, names: set[str]) -> set[str]:
    """What a clause must state exactly: numbers with their units, ordinals and names."""
    out: set[str] = set()
    for i, t in enumerate(toks):
        if t.kind == "num":
            units = _units_near(toks, i)
            out |= {f"{t.key}@{u}" for u in units} if units else {t.key}
        elif t.kind == "ord" or (t.kind == "word" and t.key in names):
            out.add(t.key)
    return out


def _units_near(toks: _Toks, i: int) -> set[str]:
    """The unit after a number (skipping "per", "a", ...) and a currency just before it."""
    units: set[str] = set()
    for t in toks[i + 1 : i + 4]:
        if t.kind == "unit":
            units.add(t.key)
            if t.key not in _CURRENCIES:
                break
        elif t.kind == "num" or (t.kind != "stop" and t.raw.lower() not in _UNIT_SKIP):
            break
    for t in reversed(toks[max(0, i - 2) : i]):
        if t.kind == "unit" and t.key in _CURRENCIES:
            units.add(t.key)
            break
        if t.kind != "stop":
            break
    return units


def _value_in(value: str, keys: set[str]) -> bool:
    return value in keys if value[:1] in "=^#" else _found(value, keys)


def _aligned(want: set[str], clauses: list[_Clause]) -> tuple[float, list[_Clause]]:
    """The clauses of the sources that share the most with a clause of the sentence, counting
    the words a clause takes from the one it depends on. Of tied clauses where one depends on
    the other, the dependent one stands for both."""
    plain = {part for k in want for part in k.split("@")}
    scored = [(float(sum(1 for k in plain if _found(k, c.ext))), c) for c in clauses]
    best = max((s for s, _ in scored), default=0.0)
    tied = [c for s, c in scored if s == best]
    covered = {id(x) for c in tied for x in c.stands_for}
    return best, [c for c in tied if id(c) not in covered]


def _clause_problem(sentence: str, view: _ClaimView, passages: Sequence[_Passage]) -> str:
    """Each clause's numbers (with units) and names are stated together in the clause of the
    sources that best matches it, and an absolute ("any", "all") it states is stated there too."""
    ctx_keys = {t.key for p in passages for t in p.ctx}
    clauses = [c for p in passages for c in p.clauses]
    if not clauses:
        return "no passage text"
    for _, part in _clauses_of(sentence, claim=True):
        toks = _tokens(part)
        values = _values(toks, view.names) - ctx_keys
        want = values | _keys(toks, ("word",))
        best, aligned = _aligned(want, clauses)
        if values:
            if best == 0:
                if not any(
                    all(_value_in(v, c.chain) for v in values) for p in passages for c in p.clauses
                ) and not any(
                    {v.split("@")[0] for v in values} <= _keys(s)
                    for p in passages for s in p.sentences
                ):
                    return "its numbers and names are not stated together in the sources"
            elif not all(all(_value_in(v, c.chain | c.ext) for v in values) for c in aligned):
                return "a number or name belongs to another clause of the sources"
        if any(t.kind == "abs" for t in toks) and best and not any(c.absolute for c in aligned):
            return "overstates: an absolute the sources do not state"
        if best >= 2:
            # "the southern zone is moderately hard" where the matching clause says "northern"
            for k in _keys(toks, ("word",)):
                if all(not _found(k, c.ext) and _opposed(k, c.ext) for c in aligned):
                    return f"states the opposite of the sources ({k})"
    return ""


def _negation_ok(sentence: str, view: _ClaimView, passages: Sequence[_Passage]) -> bool:
    """A negation the sentence states is one the sources state about the same thing, and a
    negated statement of the sources is not repeated without its negation."""
    negations = [n for p in passages for c in p.clauses for n in c.negations]
    if view.negated:
        for _, part in _clauses_of(sentence, claim=True):
            toks = _tokens(part)
            for i, t in enumerate(toks):
                if t.kind != "neg":
                    continue
                scope = _keys(toks[i + 1 : i + 6], ("word", "num", "ord"))
                if not any(
                    not scope or not n.after or any(_found(k, set(n.after)) for k in scope)
                    for n in negations
                ):
                    return False
        return True
    if not negations:
        return True
    clauses = [c for p in passages for c in p.clauses]
    content = set(view.content) | view.numbers
    for _, part in _clauses_of(sentence, claim=True):
        toks = _tokens(part)
        want = _values(toks, view.names) | _keys(toks, ("word",))
        plain = {k for w in want for k in w.split("@")}
        best, aligned = _aligned(want, clauses)
        if plain and best >= len(plain) and any(not c.negations for c in aligned):
            continue  # said in full by a clause of the sources that has no negation

        def shared(c: _Clause, plain: set[str] = plain) -> int:
            return sum(1 for k in plain if _found(k, c.own))

        # a clause without a negation that says more of it is what it paraphrases ("Bins need to
        # be at the kerb by 07:00" is not "Extra bags left beside a bin will not be collected")
        plain_best = max((shared(c) for c in clauses if not c.negations), default=0)
        for neg in (n for c in clauses if shared(c) >= plain_best for n in c.negations):
            # the negated word itself is repeated ("shared" of "never to be shared"), with most
            # of what follows it and with what the negation is about (a word before it)
            if not neg.after or not _found(neg.after[0], content):
                continue
            if sum(1 for k in neg.after if _found(k, content)) * 2 < len(neg.after):
                continue
            if neg.before and any(_found(k, content) for k in neg.before):
                return False
            if len(neg.after) >= 2 and (
                not neg.before or all(_found(k, content) for k in neg.after)
            ):  # "can be reserved in advance" of "spaces cannot be reserved in advance"
                return False
    return True


def _listed_problem(view: _ClaimView, keys: set[str]) -> str:
    """An item added to a list: in "in cash or by credit card" both sides of "or" must be in the
    sources, since one new alternative is a new claim however many words the rest shares."""
    toks = view.toks
    for i, t in enumerate(toks):
        if t.raw.lower() not in ("and", "or"):
            continue
        before = next((x for x in reversed(toks[:i]) if x.kind != "stop"), None)
        j = next((j for j in range(i + 1, len(toks)) if toks[j].kind != "stop"), None)
        after = toks[j] if j is not None else None
        if before is None or after is None or before.kind != "word" or after.kind != "word":
            continue
        if j is not None and j + 1 < len(toks) and toks[j + 1].kind in ("stop", "neg", "num"):
            continue  # "and needs no reservation", "and hiring the hall": a predicate, not an item
        if _found(before.key, keys) != _found(after.key, keys):
            return "an item the sources do not list"
    return ""


_RATE_WORDS = frozenset({"per", "a", "an", "each", "every"})


def _rates(toks: _Toks) -> dict[str, set[str]]:
    """What each number is counted per: "EUR 15 per day" -> {"=15": {"#day"}}, "EUR 35 per
    flight" -> {"=35": {"flight"}}."""
    out: dict[str, set[str]] = {}
    for i, t in enumerate(toks):
        if t.kind != "num":
            continue
        j = i + 1
        while j < len(toks) and toks[j].kind == "unit" and toks[j].key in (*_CURRENCIES, "#percent"):
            j += 1
        if j + 1 >= len(toks) or toks[j].raw.lower() not in _RATE_WORDS:
            continue
        # the words of what it is counted per, up to its noun: "per black-and-white page"
        per: list[str] = []
        for x in toks[j + 1 : j + 6]:
            if x.kind in ("word", "unit"):
                per.append(x.key)
            elif not x.compound:  # "and" of "black-and-white" goes on, any other word ends it
                break
        if per and toks[j + 1].kind in ("word", "unit"):
            out.setdefault(t.key, set()).add("|".join(per))
    return out


def _rate_problem(view: _ClaimView, passages: Sequence[_Passage]) -> str:
    """A number counted per something else than the sources count it: "EUR 15 per rental" where
    they say "EUR 15 per day"."""
    said = _rates(view.toks)
    if not said:
        return ""
    sources: dict[str, set[str]] = {}
    for p in passages:
        for sentence in p.sentences:
            for n, per in _rates(sentence).items():
                sources.setdefault(n, set()).update(per)
    for n, per in said.items():
        theirs = {k for phrase in sources.get(n, ()) for k in phrase.split("|")}
        if theirs and not any(_found(k, theirs) for phrase in per for k in phrase.split("|")):
            return "a unit or period the sources do not state"
    return ""


def _compared(toks: _Toks) -> list[tuple[str, set[str], set[str]]]:
    """Each "A ... more than B" of a text: (the comparative, A's words, B's words). A bound ("more
    than 3 hours") compares nothing."""
    out: list[tuple[str, set[str], set[str]]] = []
    before: set[str] = set()
    for i, t in enumerate(toks):
        if t.raw.lower() != "than" or i == 0 or i + 1 >= len(toks) or toks[i + 1].kind == "num":
            continue
        # the subject may be shared ("A is more X than B and less Y than C"); the side after an
        # earlier "than" is that comparison's, not this one's
        left = {x.key for x in toks[: i - 1] if x.kind == "word"} - before
        right = {x.key for x in toks[i + 1 : i + 7] if x.kind == "word"}
        degree = toks[i - 2].raw.lower() if i >= 2 else ""
        word = f"{degree} {toks[i - 1].key}" if degree in _DEGREES else toks[i - 1].key
        out.append((word, left - right, right - left))
        before |= right
    return out


_DEGREES = frozenset({"more", "less", "fewer", "greater", "smaller", "higher", "lower"})
"""'more complex than' and 'less complex than' are two comparisons, not one."""


def _comparison_problem(view: _ClaimView, passages: Sequence[_Passage]) -> str:
    """The two sides of a comparison swapped: "the app costs more than the driver" where the
    sources say the driver costs more than the app. A sentence that makes several comparisons
    ("more complex than sponges ... less complex than worms") is matched against the one of the
    sources that shares its sides, not against every comparison with the same word."""
    for word, left, right in _compared(view.toks):
        swapped = same_way = False
        for p in passages:
            for sentence in p.sentences:
                for theirs, t_left, t_right in _compared(sentence):
                    if theirs != word:
                        continue
                    crossed = sum(1 for k in left if _found(k, t_right)) + sum(
                        1 for k in right if _found(k, t_left)
                    )
                    kept = sum(1 for k in left if _found(k, t_left)) + sum(
                        1 for k in right if _found(k, t_right)
                    )
                    swapped |= crossed > kept
                    same_way |= kept > 0 and kept >= crossed
        if swapped and not same_way:
            return "the sides of a comparison are swapped"
    return ""


def _free_ok(sentence: str, passages: Sequence[_Passage]) -> bool:
    """"Free" belongs to the clause of the sources it is said about: "other drivers don't cost
    anything" is not supported by "a spouse is free; other drivers cost EUR 12"."""
    clauses = [c for p in passages for c in p.clauses]
    for _, part in _clauses_of(sentence, claim=True):
        toks = _tokens(part)
        if not any(t.key == "free" for t in toks):
            continue
        want = {t.key for t in toks if t.kind in ("word", "num") and t.key != "free"}
        if not want:
            continue
        _, aligned = _aligned(want, clauses)
        said = [x for c in aligned for x in (c, *c.stands_for)]
        if said and not any("free" in c.own for c in said) and any(
            c.own & _CURRENCIES or "cost" in c.own or "pay" in c.own for c in said
        ):
            return False
    return True


@dataclass
class Verdict:
    """Whether cited passages support a sentence, and why not."""

    supported: bool
    reason: str
    coverage: float = 0.0
    contributing: list[int] = field(default_factory=list)


def _flat(text: str) -> str:
    return _clean(text).rstrip(".!?\"'”’ ").lower()


def _quoting(sentence: str, findings: Sequence[Finding]) -> list[int]:
    """The passages the sentence quotes word for word, as one or more whole sentences of theirs.

    A quote of whole sentences says what its passage says; the word-level checks below are for
    paraphrase, and on a long quote with units and names they can fail where nothing was added."""
    want = _flat(sentence)
    if len(want.split()) < 3:
        return []
    found = []
    for i, f in enumerate(findings):
        units = answer_units(f.text)
        for start in range(len(units)):
            run = ""
            for unit in units[start:]:
                run = _flat(f"{run} {unit}")
                if len(run) >= len(want):
                    break
            if run == want:
                found.append(i)
                break
    return found


def support_verdict(
    sentence: str, findings: Sequence[Finding], threshold: float = SUPPORT_MIN
) -> Verdict:
    """Do the cited passages state what the sentence says?

    Hard conditions: every number (with its unit) and name of the sentence is in the passages,
    bound to the clause it belongs to; a negation, an absolute ("always", "all") or a dropped
    hedge ("usually") that the passages do not share fails; a word the best matching passage
    sentence states the opposite of ("evening" where it says "morning") fails. Then at least
    `threshold` of the sentence's content words must be found in one or two adjacent sentences
    of one cited passage (or the best such windows of several), title and section included."""
    passages = [_passage(f) for f in findings]
    words = {t.key for t in _tokens(sentence)} | {
        k for p in passages for c in p.clauses for k in c.ext
    } | {t.key for p in passages for t in p.ctx}
    words |= {part for w in list(words) for part in w.split("@")}
    token = _VOCABULARY.set(_Vocabulary(words))
    try:
        verdict = _verdict(sentence, passages, threshold)
    finally:
        _VOCABULARY.reset(token)
    if not verdict.supported:
        quoted = _quoting(sentence, findings)
        if quoted:
            return Verdict(True, "quotes the passage", 1.0, quoted)
    return verdict


def _verdict(sentence: str, passages: list[_Passage], threshold: float) -> Verdict:
    view = _view(sentence, passages)
    if not view.content and not view.numbers:
        return Verdict(True, "nothing to check", 1.0, list(range(len(passages))))
    all_keys: list[set[str]] = [
        {t.key for s in p.sentences for t in s} | {t.key for t in p.ctx} for p in passages
    ]
    union = set().union(*all_keys) if all_keys else set()
    missing_numbers = {n for n in view.numbers if n not in union}
    if missing_numbers:
        return Verdict(False, f"number not in the sources: {sorted(missing_numbers)}")
    compounds = set().union(*(p.compounds for p in passages)) if passages else set()
    if any(c not in compounds for c in view.name_compounds):
        return Verdict(False, "name not in the sources")
    problem = (
        _listed_problem(view, union)
        or _clause_problem(sentence, view, passages)
        or _rate_problem(view, passages)
        or _comparison_problem(view, passages)
    )
    if problem:
        return Verdict(False, problem)
    if not _negation_ok(sentence, view, passages):
        return Verdict(False, "negation differs from the sources")
    if not _free_ok(sentence, passages):
        return Verdict(False, "states the opposite of the sources (free)")
    contributing = [
        i for i, keys in enumerate(all_keys)
        if any(_found(k, keys) for k in view.content) or view.numbers & keys
    ]
    best = 0.0
    reason = "too few of its words are in the cited passages"
    units = {
        t.key for t in view.toks
        if t.kind == "unit" and t.key not in _CURRENCIES and t.key not in _SOFT_UNITS
    }
    for window, p in _windows(passages, view):
        keys = {t.key for t in window if t.kind not in ("stop",)} | {t.key for t in p}
        keys |= _sequences(window) | _sequences(p)
        if not view.numbers <= keys or not all(_found(n, keys) for n in view.names):
            continue
        if not units <= keys:
            best = max(best, 0.0)
            reason = "a unit or period the sources do not state"
            continue
        # numbers alone ("1455–1536).") have been checked above
        score = sum(1 for k in view.content if _found(k, keys)) / len(view.content) if view.content else 1.0
        if score < threshold:
            best = max(best, score)
            continue
        problem = _window_problem(view, window)
        if problem:
            reason = problem
            best = max(best, score)
            continue
        return Verdict(True, "supported", score, contributing)
    return Verdict(False, reason, best)


def _windows(
    passages: Sequence[_Passage], view: _ClaimView
) -> Iterable[tuple[_Toks, _Toks]]:
    """One or two adjacent sentences of one passage (with its title and section as context), and
    for several cited passages the best window of each, joined."""
    best_each: list[tuple[float, _Toks, _Toks]] = []
    for p in passages:
        spans = [p.sentences[i] for i in range(len(p.sentences))]
        spans += [p.sentences[i] + p.sentences[i + 1] for i in range(len(p.sentences) - 1)]
        scored = []
        for w in spans:
            keys = {t.key for t in w} | {t.key for t in p.ctx}
            score = sum(1 for k in view.content if _found(k, keys))
            scored.append((score, w, p.ctx))
            yield w, p.ctx
        if scored:
            best_each.append(max(scored, key=lambda x: (x[0], -len(x[1]))))
    if len(best_each) > 1:
        yield (
            tuple(t for _, w, _ in best_each for t in w),
            tuple(t for _, _, c in best_each for t in c),
        )


def _window_problem(view: _ClaimView, window: _Toks) -> str:
    """What makes a well-covered window still not say what the sentence says."""
    keys = {t.key for t in window}
    if not view.hedged and any(t.kind == "hedge" for t in window) and _hedge_dropped(view, window):
        return "overstates: drops the sources' hedge"
    approximate = {
        window[i + 1].key for i, t in enumerate(window[:-1])
        if t.raw.lower() in _APPROX and window[i + 1].kind == "num"
    }
    if approximate & view.numbers and not view.hedged and not _approx_kept(view):
        return "overstates: an approximate number stated as exact"
    for k in view.content:
        if _found(k, keys):
            continue
        if _opposed(k, keys):
            return f"states the opposite of the sources ({k})"
    return _period_problem(view, window)


def _opposed(word: str, keys: set[str]) -> bool:
    """The keys state the opposite of the word: an antonym, or a price where it says "free"."""
    return bool(_ANTONYMS.get(word, set()) & keys) or (word == "free" and bool(_CURRENCIES & keys))


_ARTICLES = frozenset({"a", "an", "per", "each", "every", "one"})


def _quantities(toks: _Toks) -> dict[str, set[str]]:
    """For each period or measure: how it is counted ("=2" in "every two years", "=1" in "every
    year" or "a day", "" where it stands bare)."""
    out: dict[str, set[str]] = {}
    for i, t in enumerate(toks):
        if t.kind != "unit" or t.key in _CURRENCIES or t.key in _SOFT_UNITS:
            continue
        q = ""
        for x in reversed(toks[max(0, i - 3) : i]):
            if x.kind == "num":
                q = x.key
                break
            if x.raw.lower() in _ARTICLES:
                q = "=1"
                break
            if x.kind not in ("stop", "word") or x.raw.lower() in ("of", "for", "in", "within"):
                break
        out.setdefault(t.key, set()).add(q)
    return out


def _period_problem(view: _ClaimView, window: _Toks) -> str:
    """"Every year" where the sources say "every two years": a count dropped from a period."""
    said = _quantities(window)
    for unit, counts in _quantities(view.toks).items():
        if "=1" in counts and unit in said and not said[unit] & {"=1", ""}:
            return "a period counted differently from the sources"
    return ""


def _approx_kept(view: _ClaimView) -> bool:
    return any(t.raw.lower() in _APPROX for t in view.toks)


def _hedge_dropped(view: _ClaimView, window: _Toks) -> bool:
    """A hedged stretch of the window ("usually harmless") that the sentence repeats unhedged."""
    content = set(view.content)
    for i, t in enumerate(window):
        if t.kind != "hedge":
            continue
        after = [x.key for x in window[i + 1 : i + 4] if x.kind in ("word", "num")]
        if after and any(_found(k, content) for k in after):
            return True
    return False


def supports(sentence: str, findings: Sequence[Finding], threshold: float = SUPPORT_MIN) -> bool:
    """Whether the cited passages support the sentence (see `support_verdict`)."""
    return support_verdict(sentence, findings, threshold).supported
