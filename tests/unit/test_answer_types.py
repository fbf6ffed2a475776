"""Answer types over classes of form (issue 45): a price question is answered only by a sentence
that states money, and a figure that is no money (a measure, a length of time, a time of day, a
date, a contact, an ordinal, a code, a number written out without a currency) states none; a
"how many" or "how much" question only by a quantity, which a date, a time of day, a contact, a
code or an ordinal is not. Several forms of each class, and the forms that must still count."""

from __future__ import annotations

import pytest

from grounded_agent.grounding.answer_types import asked_type, holds_type


@pytest.mark.parametrize("question", [
    "How much does the Zephyr Kettle cost?",
    "How much is the late fee?",
    "What is the price of a day pass?",
    "What does a day pass cost?",
    "How much do I have to pay for parking after 90 minutes?",
    "How much do members pay?",
    "How much will I spend on a full service?",
])
def test_questions_for_money_ask_for_a_price(question: str) -> None:
    assert asked_type(question) == "price"


@pytest.mark.parametrize(("question", "kind"), [
    ("How much water does the Zephyr Kettle hold?", "amount"),
    ("How many litres does the Zephyr Kettle hold?", "number"),
    ("How much notice do I get before an inspection?", "amount"),
    ("How much time do I have to pay the invoice?", "duration"),
    ("How much paid time off do I get as a new parent?", "amount"),
    ("Can I pay online?", None),
])
def test_other_questions_keep_their_kind(question: str, kind: str | None) -> None:
    assert asked_type(question) == kind


NOT_MONEY = {
    "a measure, hyphenated or spelt out": [
        "Its base has a 360-degree connector and an automatic shut-off.",
        "It comes with a 5-litre water tank.",
        "Bags over the 20-kg limit go in the hold.",
        "Each desk has a 3-metre power cable.",
        "A two-litre jug is included.",
        "The table top is 120 x 80 cm.",
        "It holds 1.7 litres.",
    ],
    "a length of time": [
        "It boils a full jug in under four minutes.",
        "Refunds take 5 to 10 business days.",
        "The hotline runs a 24-hour service.",
    ],
    "a time of day": [
        "The pool opens at 8 am and closes at 6 pm.",
        "Check-out is by 10:30 am.",
        "The desk is staffed from 7.30 a.m.",
    ],
    "a date": [
        "Dr Nandakumar has led the practice since 2011.",
        "The office moved on 15 March 2024.",
        "The offer ends March 31, 2026.",
        "The policy was updated on 2026-01-15.",
        "Meters were replaced in the 1990s.",
    ],
    "a contact": [
        "Call +49 30 1234567 for help.",
        "The helpline is 0800 123 456.",
        "Write to desk2@example.org for a copy.",
    ],
    "an ordinal": [
        "Rooms are on the 2nd and 3rd floor.",
        "The first visit is on a Monday.",
    ],
    "a code or model name": [
        "The Zephyr X200 has a steel body.",
        "Model ZK-360 ships in white.",
        "The 4B adapter fits every socket.",
    ],
    "a number written out without a currency": [
        "Two hygienists work at the practice.",
        "Its base has one connector.",
    ],
    "'free' that is no price": [
        "The kettle base is cordless and hands-free.",
        "Feel free to ask the staff.",
    ],
}


@pytest.mark.parametrize(("form", "sentence"), [
    (form, sentence) for form, sentences in NOT_MONEY.items() for sentence in sentences
])
def test_a_figure_that_is_no_money_states_no_price(form: str, sentence: str) -> None:
    assert not holds_type("price", sentence), form


@pytest.mark.parametrize("sentence", [
    "The Zephyr Kettle costs EUR 49 in our shop.",
    "It costs 49EUR.",
    "A second-class stamp is 85p.",
    "Entry is free.",
    "Printing is free of charge.",
    "No charge applies to the first copy.",
    "Parking costs 2.50 per hour.",
    "The Pro plan costs 29 per user.",
    "Membership is 120 per year.",
    "The fee is 40 a month.",
    "Day tickets cost 10-15 depending on the zone.",
    "A pack of 10 tickets costs 25.",
    "The Zephyr X200 costs 79.",
    "The late fee is 5% of the invoice.",
    "Children pay half the adult fare.",
    "Parking is free for the first 90 minutes; after that, each started hour costs EUR 2.50.",
])
def test_money_still_states_a_price(sentence: str) -> None:
    assert holds_type("price", sentence), sentence


NOT_A_QUANTITY = {
    "a date": ["The workshop has been open since 2011.", "The tenancy began on 15 March 2024."],
    "a time of day": ["The pool opens at 8 am.", "Check-out is by 10:30 am."],
    "a contact": ["Call +49 30 1234567 for help.", "Write to desk2@example.org."],
    "a code or model name": ["The Zephyr X200 has a steel body.", "Model ZK-360 ships in white."],
    "an ordinal": ["Lockers are on the 2nd floor.", "The first lesson is on a Monday."],
}


@pytest.mark.parametrize(("form", "sentence"), [
    (form, sentence) for form, sentences in NOT_A_QUANTITY.items() for sentence in sentences
])
def test_a_figure_that_counts_nothing_answers_no_how_many_or_how_much(form: str, sentence: str) -> None:
    assert not holds_type("number", sentence), form
    assert not holds_type("amount", sentence), form


@pytest.mark.parametrize("sentence", [
    "It holds 1.7 litres.",
    "Its base has a 360-degree connector.",
    "The workshop can store up to 20 bikes.",
    "Two hygienists work at the practice.",
    "You get at least 48 hours' notice.",
    "About 80% of requests are answered within a day.",
    "Since 2011 the workshop has stored up to 20 bikes at a time.",
    "Kayaks are hired to over-18s only.",
])
def test_counts_and_measures_still_answer_how_many_and_how_much(sentence: str) -> None:
    assert holds_type("number", sentence), sentence
    assert holds_type("amount", sentence), sentence


def test_money_answers_how_much_and_the_other_kinds_keep_their_figures() -> None:
    """"How much" may ask for money; a year still answers a "when", a phone number a "which
    number", a time of day an opening time."""
    assert holds_type("amount", "Entry is free.")
    assert holds_type("amount", "It costs EUR 49.")
    assert holds_type("date", "Dr Nandakumar has led the practice since 2011.")
    assert holds_type("date", "The pool opens at 8 am.")
    assert holds_type("phone", "Call +49 30 1234567 for help.")
