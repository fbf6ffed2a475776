"""What kind of thing a question asks for, and whether a sentence holds one.

A passage can share every word of a question and still not answer it: "How long can I keep a
DVD?" is not answered by "DVDs can be borrowed at every branch." A question that asks for a number,
a date, a duration, an amount, a phone number or a name is answered only by a sentence that has
one. These checks carry over between knowledge bases because they look at the form of the answer,
not at any corpus's words.
"""

from __future__ import annotations

import re
from typing import Literal

AnswerType = Literal["amount", "duration", "date", "number", "phone", "person", "place"]

_Q = re.IGNORECASE
_RULES: tuple[tuple[AnswerType, re.Pattern[str]], ...] = (
    ("phone", re.compile(r"\b(phone|telephone|hotline|call|number to ring|dial|extension)\b", _Q)),
    ("amount", re.compile(
        r"\b(how much|cost|costs|price|prices|fee|fees|charge|charged|charges|fine|fines|pay|"
        r"rate|tariff|reimburs\w*|allowance|refund|deposit|budget|limit|cap)\b", _Q)),
    ("duration", re.compile(
        r"\b(how long|for how many (days|weeks|months|years|hours|minutes)|how many (days|weeks"
        r"|months|years|hours|minutes)|how soon|how quickly|how fast|within what time|period)\b",
        _Q)),
    ("date", re.compile(
        r"\b(when|what (year|date|day|time|month|century|decade)|which (year|date|day|month"
        r"|century|decade)|in what year|what hours?|opening hours|open until|close|closes)\b",
        _Q)),
    ("number", re.compile(
        r"\b(how many|how old|how far|how large|how big|how tall|how high|how often|what "
        r"(percentage|percent|number|amount|size|age|share|proportion)|how much)\b", _Q)),
    ("person", re.compile(r"^\s*(who|whom|whose)\b|\b(who (is|was|were|did|do))\b", _Q)),
    ("place", re.compile(r"^\s*where\b|\bin which (city|country|state|region|place|town)\b", _Q)),
)

_DIGIT = re.compile(r"\d")
_NUMBER_WORD = re.compile(
    r"\b(one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|twenty|thirty|"
    r"forty|fifty|sixty|hundred|thousand|million|billion|dozen|half|once|twice|first|second|"
    r"third|fourth|fifth|single|double)\b", _Q)
_MONTH_DAY = re.compile(
    r"\b(january|february|march|april|may|june|july|august|september|october|november|december|"
    r"monday|tuesday|wednesday|thursday|friday|saturday|sunday|weekday|weekend|noon|midnight|"
    r"daily|weekly|monthly|annually|yearly|century|today|tomorrow)\b", _Q)
_UNIT = re.compile(
    r"\b(second|minute|hour|day|week|month|year|decade|century)s?\b|\b\d+\s*-?\s*(h|min|d)\b",
    _Q)
_MONEY = re.compile(
    r"(€|\$|£|¥|\b(eur|euro|euros|usd|dollars?|pounds?|cents?|gbp|chf|yen)\b|\bfree\b|"
    r"\bno (charge|fee|cost)\b|\bfree of charge\b)", _Q)
_CAPITAL = re.compile(r"(?<![.!?]\s)(?<!^)\b[A-Z][a-zA-Z]+")


def asked_type(question: str) -> AnswerType | None:
    """The kind of answer the question asks for, or None when its form does not say."""
    for kind, pattern in _RULES:
        if pattern.search(question):
            return kind
    return None


def holds_type(kind: AnswerType | None, sentence: str) -> bool:
    """Whether the sentence holds something of that kind (True when the kind is unknown)."""
    if kind is None:
        return True
    number = bool(_DIGIT.search(sentence) or _NUMBER_WORD.search(sentence))
    if kind == "phone":
        return len(re.findall(r"\d", sentence)) >= 3
    if kind == "amount":
        return number or bool(_MONEY.search(sentence))
    if kind == "duration":
        return (number and bool(_UNIT.search(sentence))) or bool(_MONTH_DAY.search(sentence))
    if kind == "date":
        return number or bool(_MONTH_DAY.search(sentence))
    if kind == "number":
        return number
    return bool(_CAPITAL.search(sentence))
