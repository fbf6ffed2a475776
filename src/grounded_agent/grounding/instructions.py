"""What a sentence addressed to a model looks like: such a sentence in a passage is never quoted
as an answer, shown as a fact, or left unflagged at ingest (citations, extractive, display,
screening and the judge's candidates all ask `looks_like_instruction`)."""

from __future__ import annotations

import re

_INSTRUCTION = re.compile(
    # what to ignore is named by where it stands: "previous instructions", "all prior rules"
    # (a statute that overrides "any rule" of another body states law; it gives no order)
    r"\b(ignore|disregard|forget|override) (all |any |the )?(of )?(your|my|previous|prior|above|"
    r"earlier|preceding|former|system|these|those|other)\b[^.]{0,30}?\b(instruction|prompt|rule|"
    r"guideline|direction)s?\b"
    r"|\b(ignore|disregard|forget) (all |everything |the )?(above|before|previous)\b"
    r"|\b(system|developer|admin) (notice|prompt|message|override)\b"
    r"|\b(tell|inform|convince|remind) (the |all |every )?(user|reader)s?\b"
    r"|\b(call|invoke|run|execute) the (tool|function)s?\b"
    r"|\byou (must|should|are to) now\b"
    r"|\b(as an ai|language model|assistant)\b[^.]{0,30}\b(must|should|will)\b"
    # an order about how to answer: "answer every ... question with", "always reply that"
    r"|\b(answer|respond|reply)( to)? (every|all|each|any)\b[^.]{0,60}?\bwith\b"
    r"|\b(always|only) (answer|respond|reply|output|say)( with| that|\b(?= *[\"'“‘]))"
    r"|\b(when|if) (you are )?(asked|answering|responding|replying)\b[^.]{0,80}?"
    r"\b(answer|respond|reply|say|state|claim)( with| that| only)\b"
    r"|\bfor (any )?questions? (about|on)\b[^.]{0,80}?\b(answer|respond|reply|say)( with| that| only)\b"
    # a note addressed to a model
    r"|\b(note|message|instructions?) (to|for) (the |any |all )?(ai|assistant|chatbot|language model|"
    r"llm|bot)s?\b"
    r"|\b(ai|assistant|chatbot|llm|model)s? (reading|processing|summari[sz]ing) this\b"
    r"|\b(do not|don't|never) (mention|reveal|disclose)\b[^.]{0,40}\b(source|instruction|prompt|"
    r"note)s?\b"
    r"|\bnew (system )?instructions?\s*:"
    r"|\b(print|output|repeat|reveal) (the |your )(system )?(prompt|instructions)\b",
    re.IGNORECASE,
)
"""Sentences addressed to a model, by the forms such orders take (what to ignore, whom to tell,
how to answer every question, notes to an assistant), not by any one document's wording."""


def looks_like_instruction(sentence: str) -> bool:
    """A sentence addressed to the model rather than stating a fact: never quoted as an answer."""
    return bool(_INSTRUCTION.search(sentence))
