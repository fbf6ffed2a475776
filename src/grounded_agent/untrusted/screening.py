"""Ingest-time screening: a document whose text or metadata holds instruction-like content or
prompt markup is flagged, with its reasons, before it is ever searched.

A flagged document is stored and listed like any other (`docs list` shows FLAGGED, `docs show`
its reasons, `ingest --json` reports it); whether answers may draw on it is the run's setting
`Context.flagged_documents` (GROUNDED_AGENT_FLAGGED_DOCUMENTS: `exclude`, the default, or
`include`). Reasons describe what was found and where; they never quote it.

The test is the one the answer applies to every sentence it would show (`looks_like_instruction`
in instructions.py), plus tags that would open or close a prompt element. It is lexical: a
document that gives orders in words no rule names passes, and the answer-time checks (display.py,
the citation check) still stand behind it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from pydantic import BaseModel, Field

from grounded_agent.grounding.citations import MARKER
from grounded_agent.grounding.instructions import looks_like_instruction
from grounded_agent.grounding.sentences import split_sentences
from grounded_agent.inputs import clean_text, fold_brackets
from grounded_agent.loaders.base import SourceDocument

_PROMPT_NAMES = (r"<\s*/?\s*(?:sources?|passages?|system|assistant|user|instructions?|prompt|"
                 r"claims?|tool_call|function_call)\b")
PROMPT_TAG = re.compile(
    _PROMPT_NAMES + r"(?:\"[^\"\n]{0,200}\"|'[^'\n]{0,200}'|[^<>\"'\n]){0,200}>"  # quoted whole
    r"|<\|[a-z_]{2,20}\|>",
    re.IGNORECASE,
)
_ANY_PROMPT_TAG = re.compile(PROMPT_TAG.pattern + "|" + _PROMPT_NAMES + r"[^\n]{0,2000}",
                             re.IGNORECASE)
"""What screening counts and ingest drops: also a tag that does not close (its quotes or its
`>`), with the rest of its line."""
"""The elements of this project's prompts (`<source>`, `<passage>`, `<claim>`) and the role tags
of chat formats: a document has no reason to hold them."""


def drop_prompt_elements(text: str) -> str:
    """`text` without its prompt tags and without what lies between the first and the last of
    them: text planted inside an element (`<source>planted</source>`) or between a closing and
    an opening tag (`</source> planted <source>`) would read as part of the prompt, not of the
    document. Only for a flagged text: a document has no reason to hold these tags."""
    found = list(_ANY_PROMPT_TAG.finditer(text))
    if not found:
        return text
    if len(found) == 1:
        return text[: found[0].start()] + " " + text[found[0].end() :]
    return text[: found[0].start()] + " " + text[found[-1].end() :]


class FlaggedDocument(BaseModel):
    """One document the screening flagged, as `ingest --json` reports it."""

    doc_id: str
    file: str = Field(description="The file (or file:line) the document was read from.")
    reasons: list[str]


_MD_HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t#]*$", re.MULTILINE)
_KEY_NAME = re.compile(r"[\w.-]{1,40}")
"""A metadata key a reason may name; any other key is named "(a key)" (reasons never quote)."""


def _strings(value: Any, where: str) -> Iterator[tuple[str, str]]:
    if isinstance(value, str):
        yield where, value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            name = clean_text(str(key))
            name = name if _KEY_NAME.fullmatch(name) else "(a key)"
            yield f"{where} key"[:60], str(key)
            yield from _strings(item, f"{where} {name}"[:60])
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _strings(item, where)


def _field_reasons(where: str, value: str) -> list[str]:
    value = clean_text(value)
    reasons = []
    if any(looks_like_instruction(s) for s in split_sentences(value) or [value]):
        reasons.append(f"{where}: reads as an instruction to an assistant")
    if _ANY_PROMPT_TAG.search(value):
        reasons.append(f"{where}: holds prompt markup (a tag that would open or close a prompt "
                       "element)")
    if MARKER.search(fold_brackets(value)):
        reasons.append(f"{where}: holds a citation marker")
    return reasons


def screen(doc: SourceDocument) -> list[str]:
    """Why `doc` is flagged (empty: it is not). Title, metadata and heading paths are fields
    that should hold a name: an instruction, prompt markup or a citation marker in one is a
    reason. In the text, instruction-like sentences and prompt markup are (a citation marker in
    a text is a footnote, as on Wikipedia)."""
    reasons = _field_reasons("id", doc.doc_id) + _field_reasons("title", doc.title)
    metadata = {"version": doc.version, "source_url": doc.source_url, "language": doc.language,
                **doc.extra}
    for where, value in _strings(metadata, "metadata"):
        reasons += _field_reasons(where, value)
    headings = {h for s in doc.sections or [] for h in s.path}
    if doc.sections is None and doc.fmt == "markdown":  # its headings are lines of its text
        headings |= {m.group(1) for m in _MD_HEADING.finditer(doc.text)}
    for heading in sorted(headings):
        for reason in _field_reasons("a heading", heading):
            if reason not in reasons:
                reasons.append(reason)
    bodies = [clean_text(s.text) for s in doc.sections] if doc.sections is not None else [
        clean_text(doc.text)]
    orders = sum(1 for body in bodies for s in split_sentences(body) if looks_like_instruction(s))
    if orders:
        reasons.append(f"text: {orders} sentence(s) read as instructions to an assistant")
    tags = sum(len(_ANY_PROMPT_TAG.findall(body)) for body in bodies)
    if tags:
        reasons.append(f"text: {tags} prompt tag(s) (tags that would open or close a prompt "
                       "element)")
    return reasons
