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

from grounded_agent.grounding.quantities import CLOCK, NUMBER_WORDS, SHARE_WORDS, TIME_UNITS

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

_PAYING = re.compile(r"\b(pay|pays|paying|spend|spends|spent|owe|owes)\b", _Q)
"""Verbs of paying: "how much" with one asks for money ("How much do I pay for parking?"). Not
"paid", mostly an adjective there ("How much paid leave do I get?" asks for time)."""

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
    r"(€|\$|£|¥|\b(eur|euro|euros|usd|dollars?|pounds?|cents?|gbp|chf|yen)\b|"
    r"\b(eur|usd|gbp|chf)(?=\d)|(?<=\d)(eur|usd|gbp|chf)\b|\b\d+p\b|"  # "EUR49", "49EUR", "50p"
    r"(?<!-)(?<!feel )\bfree\b|\bno (charge|fee|cost)\b)", _Q)
"""Money, or its absence: a currency, "free", "no charge". Not "hands-free" or "feel free", where
"free" means "without" or "welcome to", not "at no cost"."""
_NUMBER = rf"(\d+([.,]\d+)?|{_CARDINALS})"
"""A figure in a time phrase, digits or words (quantities._NUMBER reads digits, any separators)."""
_SPAN = rf"{_NUMBER}((\s*[-–x×]\s*|\s+(to|or|by)\s+){_NUMBER})?"
"""A figure or a span of two: "5", "5-10", "two to four", "30 x 20"."""
_MEASURE = (r"(litres?|liters?|l|ml|cl|kg|kilos?|kilograms?|grams?|g|mg|tonnes?|tons?|km|"
            r"kilometres?|kilometers?|metres?|meters?|m|cm|mm|miles?|inch(es)?|feet|ft|"
            r"gb|mb|tb|kb|kwh|wh|kw|w|watts?|volts?|v|amps?|degrees?|°c?|"
            r"people|persons?|pages?|seats?|rooms?|floors?|items?)")
_MONTH = (r"(jan(uary)?|feb(ruary)?|mar(ch)?|apr(il)?|may|june?|july?|aug(ust)?|sept?(ember)?|"
          r"oct(ober)?|nov(ember)?|dec(ember)?)")
_CODE = re.compile(r"\b[a-zA-Z]+\d[\w.]*|\b[A-Z]+-\d[\w.]*")
"""A name or code with a figure: "X200", "v2", "ZK-360", "COVID-19"; not a compound of a word
and a figure ("under-18s", "a 5-litre tank")."""
_NOT_COUNTED: tuple[re.Pattern[str], ...] = (
    # a contact: an address on the web or for mail, a phone number ("+49 30 1234567",
    # "0800 123 456": a leading plus, or three groups of digits)
    re.compile(r"\S+@\S+|\bhttps?://\S+|\bwww\.\S+"),
    re.compile(r"\+\d[\d\s()/-]{5,}\d|\b\d{2,}([ /-]\d{2,}){2,}\b"),
    # a date: "2026-01-15", "15/01/2026", "15 March 2026", "March 15", "in 2011", "the 1990s"
    re.compile(r"\b\d{4}-\d{1,2}-\d{1,2}\b|\b\d{1,2}[./]\d{1,2}[./]\d{2,4}\b", _Q),
    re.compile(rf"\b\d{{1,2}}(st|nd|rd|th)?\s+(of\s+)?{_MONTH}\b(\.?,?\s+\d{{4}}\b)?|"
               rf"\b{_MONTH}\.?\s+\d{{1,4}}(st|nd|rd|th)?\b(,?\s+\d{{4}}\b)?", _Q),
    re.compile(r"\b(in|since|until|till|before|after|during)\s+(the\s+)?(year\s+)?"
               r"(19|20)\d\d(s|\s*[-–/]\s*(19|20)?\d\d)?\b|\b(19|20)\d0s\b", _Q),
    # a time of day: "08:00", "4 pm", "7.30 a.m."
    CLOCK,
)
_NOT_QUANTITY = (*_NOT_COUNTED, _CODE)
"""Figures that count or measure nothing: contacts, dates, times of day, codes."""
_NOT_MONEY: tuple[re.Pattern[str], ...] = (
    *_NOT_COUNTED,
    # a length of time: "5 days", "two to four weeks", "a 24-hour line", "10 business days"
    re.compile(rf"\b{_SPAN}\s*-?\s*((?!(per|a|an|each|every|for|the|in|on|of)\b)[a-z]+\s+)?"
               rf"({_TIME})s?\b", _Q),
    # a measure: "1.7 litres", "20 kg", "a 360-degree connector", "30 x 20 cm", "a two-litre jug"
    re.compile(rf"\b{_SPAN}\s*-?\s*{_MEASURE}(?![\w])", _Q),
    # a name or code with a figure: "X200", "ZK-360", "4B", "3D" (measures are read above)
    _CODE,
    re.compile(r"\b\d+[A-Z]\w*"),
)
"""Figures that are not money: the above, lengths of time and measures."""
_PRICE_FIGURE = re.compile(
    r"(?<![\w.,])\d+([.,]\d+)*(?![\w]|[.,]\d)|%|\bper ?cent\b|"
    rf"\b({'|'.join(sorted(SHARE_WORDS, key=len, reverse=True))})\b", _Q)
"""What states a price where no currency is written: a cardinal in digits ("costs 29 per user",
not "the 2nd floor") or a share ("5% of the invoice", "half the adult fare"). A number written
out without a currency ("two hygienists", "one connector", "the first visit") states none."""
_CAPITAL = re.compile(r"(?<![.!?]\s)(?<!^)\b[A-Z][a-zA-Z]+")


def asked_type(question: str) -> AnswerType | None:
    """The kind of answer the question asks for, or None when its form does not say. "How
    much" with a word that names a price or a verb of paying ("How much does it cost?", "How
    much do I pay?") asks for a price, not for any quantity."""
    for rules in (_QUESTION_FORMS, _TOPIC_WORDS):
        for kind, pattern in rules:
            if pattern.search(question):
                if kind == "amount" and (
                    _TOPIC_WORDS[0][1].search(question) or _PAYING.search(question)
                ):
                    return "price"
                return kind
    return None


def _set_aside(sentence: str, figures: tuple[re.Pattern[str], ...]) -> str:
    for figure in figures:
        sentence = figure.sub(" ", sentence)
    return sentence


def holds_type(kind: AnswerType | None, sentence: str) -> bool:
    """Whether the sentence holds something of that kind (True when the kind is unknown)."""
    if kind is None:
        return True
    number = bool(_DIGIT.search(sentence) or _NUMBER_WORD.search(sentence))
    # an ordinal counts no time: "the second floor" holds no duration, "two weeks" does
    cardinal = bool(_CARDINAL_DIGITS.search(sentence) or _CARDINAL_WORD.search(sentence))
    if kind == "phone":
        return len(re.findall(r"\d", sentence)) >= 3
    if kind in ("amount", "number"):  # a quantity: a date, a clock time, a code counts nothing
        rest = _set_aside(sentence, _NOT_QUANTITY)
        counted = bool(_CARDINAL_DIGITS.search(rest) or _CARDINAL_WORD.search(rest))
        if kind == "number":
            return counted
        # "how much" may ask for money, a quantity or time ("how much notice")
        return counted or bool(_MONEY.search(sentence))
    if kind == "price":  # a fee is not answered by "within 5 days" or "from 08:00"
        if _MONEY.search(sentence):
            return True
        return bool(_PRICE_FIGURE.search(_set_aside(sentence, _NOT_MONEY)))
    duration = (cardinal and bool(_UNIT.search(sentence))) or bool(_A_UNIT.search(sentence))
    if kind == "duration":
        return duration
    if kind == "frequency":
        return duration or bool(_EVERY.search(sentence))
    if kind == "date":
        return number or bool(_MONTH_DAY.search(sentence))
    return bool(_CAPITAL.search(sentence))
