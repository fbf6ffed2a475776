"""What kind of thing a question asks for, and whether a sentence holds one.

A passage can share every word of a question and still not answer it: "How long is a bus ticket
valid?" is not answered by "Bus tickets are sold at every kiosk." A question that
asks for a number, a date, a duration, an amount, a phone number or a name is answered only by a
sentence that has one. These checks carry over between knowledge bases because they look at the
form of the answer, not at any corpus's words.
"""

from __future__ import annotations

import re
from typing import Literal

from grounded_agent.grounding.quantities import NUMBER_WORDS, TIME_UNITS

AnswerType = Literal[
    "amount", "price", "duration", "frequency", "date", "number", "phone", "person", "place"
]

_Q = re.IGNORECASE
_QUESTION_FORMS: tuple[tuple[AnswerType, re.Pattern[str]], ...] = (
    # The question's own form says what it asks for; checked first, so that a topic word
    # ("pay", "phone") does not override "how many days" or "how often".
    ("phone", re.compile(
        r"\b((tele)?phone|fax|contact|emergency|helpline) number\b|\bhotline\b|\bhelpline\b|"
        r"\bextension\b|\bnumber (to|should \w+|do \w+|can \w+) (call|ring|dial|phone)\b|"
        r"\b(what|which)('s| is)? (the )?number\b.{0,30}\b(call|ring|dial|phone|text)\b|"
        r"\bwho (do|should|can|must) (i|we|you) (call|ring|phone)\b", _Q)),
    ("frequency", re.compile(r"\bhow often\b|\bhow many times (a|an|per|each)\b", _Q)),
    ("duration", re.compile(
        r"\b(how long|for how many|how many (seconds|minutes|hours|days|weeks|"
        r"months|years)|how much time|how soon|how quickly|how fast|within what time)\b", _Q)),
    ("amount", re.compile(r"\bhow much\b", _Q)),
    ("number", re.compile(
        r"\b(how many|how old|how far|how large|how big|how tall|how high|what (percentage|"
        r"percent|number|size|age|share|proportion))\b", _Q)),
    ("date", re.compile(
        r"^\W*when\b|\bwhen\W*$|\bwhen (is|are|was|were|do|does|did|will|can|could|should|must|would)\b|"
        r"\b(what|which) (year|date|day|days|time|month|century|decade)\b|\bin what year\b|"
        r"\bwhat hours?\b|\bopening hours\b|\bopen until\b|\bdeadline\b", _Q)),
    ("person", re.compile(
        r"(^|[,;:]\s*)\W*(who|whom|whose)\b", _Q)),
    ("place", re.compile(
        r"^\W*where\b|\bwhere (is|are|was|were|can|do|does|should|must)\b|"
        r"\bin which (city|country|state|region|place|town)\b", _Q)),
)
_TOPIC_WORDS: tuple[tuple[AnswerType, re.Pattern[str]], ...] = (
    # Where the form does not say ("What is the museum's entry fee?"), words that name a price
    # do; "pay" alone does not ("Can I pay online?" asks for a way, not an amount).
    ("price", re.compile(
        r"\b(cost|costs|price|prices|fee|fees|charge|charged|charges|fine|fines|rate|tariff|"
        r"reimburs\w*|allowance|refund\w*|deposit|budget)\b", _Q)),
    ("date", re.compile(r"\b(close|closes|closing time)\b", _Q)),
    ("price", re.compile(r"\b(have to|need to|must|should) pay\b|\bpay (for|to)\b", _Q)),
)

_DIGIT = re.compile(r"\d")
_CARDINAL_DIGITS = re.compile(r"\d(?![\d.,]*(?:st|nd|rd|th)\b)", re.IGNORECASE)
"""A digit that is no ordinal ("1st", "22nd"): a count, an amount, a length of time."""
_CARDINALS = "|".join([*NUMBER_WORDS, "billion", "half", "single", "double"])
_TIME = "|".join(u for u in TIME_UNITS if len(u) > 2)
"""Units of time, from the one unit table (data/quantities.txt)."""
_NUMBER_WORD = re.compile(rf"\b({_CARDINALS}|first|second|third|fourth|fifth)\b", _Q)
"""Whether a sentence writes a number in words, ordinals too (quantities._NUMBER_WORD reads values)."""
_CARDINAL_WORD = re.compile(rf"\b({_CARDINALS})\b", _Q)
_MONTH_DAY = re.compile(
    r"\b(january|february|march|april|may|june|july|august|september|october|november|december|"
    r"(mon|tues|wednes|thurs|fri|satur|sun|week)days?|weekends?|noon|midnight|"
    r"daily|weekly|monthly|annually|yearly|century|today|tomorrow)\b", _Q)
_UNIT = re.compile(rf"\b({_TIME})s?\b|\b\d+\s*-?\s*(h|min|d)\b", _Q)
_A_UNIT = re.compile(rf"\b(a|an|one|half an?) ({_TIME})\b", _Q)
_EVERY = re.compile(
    r"\b(daily|weekly|fortnightly|monthly|quarterly|annually|yearly|hourly|every|each (day|week|"
    r"month|year)|once|twice|times (a|an|per|each))\b", _Q)
_MONEY = re.compile(
    r"(€|\$|£|¥|\b(eur|euro|euros|usd|dollars?|pounds?|cents?|gbp|chf|yen)\b|\bfree\b|"
    r"\bno (charge|fee|cost)\b|\bfree of charge\b)", _Q)
_NUMBER = rf"(\d+([.,]\d+)?|{_CARDINALS})"
"""A figure in a time phrase, digits or words (quantities._NUMBER reads digits, any separators)."""
_MEASURE = (r"(litres?|liters?|l|ml|cl|kg|kilos?|kilograms?|grams?|g|mg|tonnes?|tons?|km|"
            r"kilometres?|kilometers?|metres?|meters?|m|cm|mm|miles?|inch(es)?|feet|ft|"
            r"gb|mb|tb|kb|kwh|wh|kw|w|watts?|volts?|v|amps?|degrees?|°c?|"
            r"people|persons?|pages?|seats?|rooms?|floors?|items?)")
_NOT_PRICE = re.compile(
    r"\b\d{1,2}:\d{2}\b|"  # a time of day
    rf"\b{_NUMBER}(\s*-\s*|\s+to\s+|\s+)({_NUMBER}\s+)?(working\s+|calendar\s+)?"
    rf"({_TIME})s?\b|"
    rf"\b{_NUMBER}\s*{_MEASURE}(?![\w])",  # a measure: "1.7 litres", "20 kg"
    _Q)
"""Figures that are times or measures, not prices: "08:00", "5 days", "two to four weeks",
"1.7 litres", "20 kg"."""
_CAPITAL = re.compile(r"(?<![.!?]\s)(?<!^)\b[A-Z][a-zA-Z]+")


def asked_type(question: str) -> AnswerType | None:
    """The kind of answer the question asks for, or None when its form does not say. "How
    much" with a word that names a price ("How much does it cost?") asks for a price, not for
    any quantity."""
    for rules in (_QUESTION_FORMS, _TOPIC_WORDS):
        for kind, pattern in rules:
            if pattern.search(question):
                if kind == "amount" and _TOPIC_WORDS[0][1].search(question):
                    return "price"
                return kind
    return None


def holds_type(kind: AnswerType | None, sentence: str) -> bool:
    """Whether the sentence holds something of that kind (True when the kind is unknown)."""
    if kind is None:
        return True
    number = bool(_DIGIT.search(sentence) or _NUMBER_WORD.search(sentence))
    # an ordinal counts no time: "the second floor" holds no duration, "two weeks" does
    cardinal = bool(_CARDINAL_DIGITS.search(sentence) or _CARDINAL_WORD.search(sentence))
    if kind == "phone":
        return len(re.findall(r"\d", sentence)) >= 3
    if kind == "amount":  # "how much" may ask for money, a quantity or time ("how much notice")
        return number or bool(_MONEY.search(sentence))
    if kind == "price":  # a fee is not answered by "within 5 days" or "from 08:00"
        if _MONEY.search(sentence):
            return True
        rest = _NOT_PRICE.sub(" ", sentence)
        return bool(_DIGIT.search(rest) or _NUMBER_WORD.search(rest))
    duration = (cardinal and bool(_UNIT.search(sentence))) or bool(_A_UNIT.search(sentence))
    if kind == "duration":
        return duration
    if kind == "frequency":
        return duration or bool(_EVERY.search(sentence))
    if kind == "date":
        return number or bool(_MONTH_DAY.search(sentence))
    if kind == "number":
        return cardinal
    return bool(_CAPITAL.search(sentence))
