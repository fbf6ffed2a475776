"""The one lexical layer and the answer-type checks: what carries over between knowledge bases."""

from __future__ import annotations

import pytest

from grounded_agent.grounding.answer_types import asked_type, holds_type
from grounded_agent.grounding.citations import check_answer
from grounded_agent.grounding.extractive import extractive_draft
from grounded_agent.grounding.sentences import answer_units, split_sentences
from grounded_agent.grounding.text import (
    asked_part,
    key_terms,
    match_credit,
    missing_names,
    stem,
    term_weights,
    terms,
    tokens,
    weighted_coverage,
)
from grounded_agent.schemas import Finding


def test_everyday_words_meet_the_documents_words() -> None:
    assert stem("monthly") == stem("month")
    assert stem("prices") == stem("price")
    assert stem("policies") == stem("policy")
    assert stem("renewed") == stem("renew")
    # respond / response differ by Snowball; a long shared prefix gives partial credit
    assert stem("respond") != stem("response")
    assert match_credit(stem("respond"), {stem("response")}) == pytest.approx(0.5)
    assert match_credit(stem("water"), {stem("waiver")}) == 0.0


def test_tokens_keep_numbers_and_split_hyphenated_names() -> None:
    assert tokens("Acme-Guest costs EUR 12.40, or 61,200 in all") == [
        "acme", "guest", "costs", "eur", "12.40", "or", "61,200", "in", "all"
    ]


def test_one_domain_words_do_not_drown_the_question() -> None:
    # a utility's KB: "water" and "charge" are everywhere, "base" is rare
    n, dfs = 22, {"water": 15, "charg": 9, "base": 1, "month": 3}
    w = term_weights("What is the monthly base charge for water?", n, dfs)
    assert w["base"] > w["charg"] > w["water"] > 0.0
    passage = "Base charge: every residential connection pays EUR 12.40 per month."
    assert weighted_coverage(w, passage) > 0.75


def test_coverage_meets_plural_and_singular_stems() -> None:
    weights = key_terms("How long is the loan period for DVDs?")
    assert weighted_coverage(weights, "DVD loans last 7 days.") > 0.5
    assert weighted_coverage(weights, "Parking permits last 7 days.") < 0.5


def test_names_missing_from_the_passage() -> None:
    assert missing_names("What does Contoso pay?", "Northwind pays 61,200 euros.") == ["Contoso"]
    assert missing_names("What does Northwind pay?", "Northwind pays 61,200 euros.") == []


def test_the_users_own_circumstances_are_not_names_asked_about() -> None:
    rule = "Bins on odd floors are emptied on Monday, on even floors on Tuesday."
    assert missing_names("When are bins emptied if my flat is on floor 3?", rule) == []
    assert missing_names("When are bins emptied for Contoso?", rule) == ["Contoso"]
    form = "A shop files form B2 with the trade office every quarter."
    told = "I run a shop in Lyon and I sell books. Which form does a shop file?"
    assert missing_names(told, form) == []
    # a statement with no question mark is asked in full
    assert missing_names("Form for a shop in Lyon", form) == ["Lyon"]
    assert asked_part("If I'm a member, what does Contoso charge?").split() == [
        ",", "what", "does", "Contoso", "charge?"
    ]


@pytest.mark.parametrize(
    ("question", "kind"),
    [
        ("How much do I pay each month for water?", "price"),  # "how much" with paying: money
        ("How long can I keep a DVD?", "duration"),
        ("When does the Harbor branch open on Saturdays?", "date"),
        ("Which number do I call when a pipe bursts?", "phone"),
        ("How many books can I borrow at once?", "number"),
        ("Who wrote the contract?", "person"),
        ("Where is the nearest branch?", "place"),
        ("Can I bring my dog into the library?", None),
        # the question's form wins over a topic word in it
        ("How many days do I have to pay once the bill is issued?", "duration"),
        ("How often will I get a water bill?", "frequency"),
        ("the printer is jammed, who do I ring?", "phone"),
        ("How many receipts can I scan in one go on my phone?", "number"),
        # a word that names a price asks for one; "how much" alone may ask for time
        ("If I call off a room booking the day before, is it refunded?", "price"),
        ("I need a doctor's note for my insurance - price?", "price"),
        ("How much warning do I get before the water is switched off?", "amount"),
        # "pay" names a price only as something owed
        ("Do I have to pay to get a copy of my medical file?", "price"),
        ("Can customers pay me by card straight from the invoice?", None),
        # a relative "who" is not a question about a person
        ("Do people who can only look at things cost me a seat?", "price"),
        ("A copy of the charter appeared when?", "date"),
        ("What is the number of plant species?", None),
    ],
)
def test_asked_type(question: str, kind: str | None) -> None:
    assert asked_type(question) == kind


def test_holds_type() -> None:
    assert holds_type("duration", "DVDs can be borrowed for 7 days.")
    assert not holds_type("duration", "DVDs can be borrowed at every branch.")
    assert holds_type("amount", "The base charge is EUR 12.40.")
    assert holds_type("amount", "Printing in black and white is free of charge.")
    assert not holds_type("amount", "Printing is available at all branches.")
    # "how much notice" is answered by a duration; a fee is not
    assert holds_type("amount", "You get at least 48 hours' notice.")
    assert holds_type("price", "The second reminder costs EUR 5.00.")
    assert holds_type("price", "A copy costs 12.50 per page.")
    assert not holds_type("price", "A sick note can be given for up to 5 days.")
    assert not holds_type("price", "Call between 08:00 and 10:00, or within two to four weeks.")
    assert not holds_type("price", "Reminders are sent within 10 working days.")
    assert holds_type("phone", "Call 0800 123 456 day and night.")
    assert not holds_type("phone", "Call the hotline day and night.")
    assert holds_type(None, "anything")
    # "monthly" is how often, not how long; a count with a unit is both
    monthly = "Monthly subscriptions are not refunded for the month already started."
    assert not holds_type("duration", monthly)
    assert holds_type("frequency", monthly)
    assert holds_type("duration", "Refunds usually take 5 to 10 business days to arrive.")
    assert holds_type("duration", "Boil the water for a minute before use.")
    # an ordinal counts no time: a floor, a day of the month
    assert not holds_type("duration", "Board games are kept on the second floor.")
    assert not holds_type("duration", "Rent is due on the first day of the month.")
    assert holds_type("duration", "Loans last two weeks.")
    # nor does it count anything: "how many" wants a count, not "the 1st"
    assert not holds_type("number", "Exports run every month, on the 1st.")
    assert holds_type("number", "Up to 25 schedules, on the 1st of each month.")
    assert holds_type("date", "Exports run every month, on the 1st.")
    assert holds_type("frequency", "The meter is read once a year.")
    assert not holds_type("frequency", "The meter is read by a technician.")
    assert holds_type("date", "Sprinklers may be used on Tuesdays and Saturdays.")


def test_terms_are_what_relevance_counts() -> None:
    assert terms("The guest Wi-Fi network") == ["guest", "wi", "fi", "network"]


# A passage wrapped at 80 columns puts a decimal or a count at the start of a line; read as a
# numbered list item, it cut a sentence in two and the offline answer carried a marker in its
# middle, which the support check then rejected (the sample SLA's service credits).
WRAPPED = (
    "If availability falls below the commitment, the customer receives a credit: 10% below\n"
    "99.9%, 25% below\n99.5%, and 50% below 99.0%. Credits must be claimed within\n"
    "30 days.\n"
    "1. Open a ticket.\n"
    "2) Attach the invoice."
)


def test_a_wrapped_line_starting_with_a_number_is_not_a_list_item() -> None:
    units = answer_units(WRAPPED)
    assert units == [
        "If availability falls below the commitment, the customer receives a credit: "
        "10% below 99.9%, 25% below 99.5%, and 50% below 99.0%.",
        "Credits must be claimed within 30 days.",
        "Open a ticket.",
        "Attach the invoice.",
    ]


def test_the_offline_answer_from_a_wrapped_passage_survives_the_support_check() -> None:
    passage = Finding(
        source="knowledge_base", source_id="sla", title="Service Level Agreement",
        section="Service credits", text=WRAPPED, score=0.8,
    )
    question = "What credit do I get when availability drops below 99.5%?"
    draft = extractive_draft(question, [passage], max_sentences=1)
    assert draft.count("[1]") == 1 and draft.endswith("[1].")
    checked = check_answer(draft, [passage])
    assert checked.unsupported == []
    assert "25% below 99.5%" in checked.text


def test_sentence_choice_and_citation_check_split_at_the_same_full_stops() -> None:
    """One abbreviation list: "p." and "Lt." end no sentence for either, so a quoted sentence
    is the same unit in the passage and in the checked answer."""
    passage = Finding(
        source="knowledge_base", source_id="guide", title="Refunds", score=0.9,
        text="Refund forms are listed on p. 4 of the guide, signed by Lt. Jones. Call us first.",
    )
    assert split_sentences(passage.text)[0].endswith("signed by Lt. Jones.")
    draft = extractive_draft("Where are the refund forms listed?", [passage], max_sentences=1)
    checked = check_answer(draft, [passage])
    assert checked.text == "Refund forms are listed on p. 4 of the guide, signed by Lt. Jones [1]."


def _page(section: str, text: str, doc: str = "billing", score: float = 0.96) -> Finding:
    return Finding(
        source="knowledge_base", source_id=doc, title="Bills and payment", section=section,
        text=text, score=score,
    )


def test_sections_of_one_page_are_chosen_by_their_sentences_not_their_order() -> None:
    """The sources' order ranks documents; among one document's sections, which all score
    alike, the one whose sentence answers is quoted (here the second, not the page's intro)."""
    intro = _page("Bills", "This page explains what a bill shows and how it can be paid. "
                  "Customer Service answers questions by phone.")
    when = _page("When bills are sent", "Household customers receive a bill every two months.")
    draft = extractive_draft("How often will I get a water bill?", [intro, when])
    assert "every two months" in draft and draft.endswith("[2].")
    # a section of another document ranked second is still outranked by the first document
    other = _page("When bills are sent", "Household customers receive a bill every two months.",
                  doc="old-billing")
    assert "[1]" in extractive_draft("How often will I get a water bill?", [intro, other])


def test_an_answer_to_a_figure_question_quotes_a_sentence_with_the_figure() -> None:
    """The question's words meet the sentences about changing a password; the figure asked for
    stands in a sentence that shares fewer of them. One quoted sentence holds it."""
    passage = Finding(
        source="knowledge_base", source_id="passwords", title="Password policy", score=0.9,
        text="Passwords expire after 90 days. Employees may change their password at any time in "
        "the portal. A compromised password must be changed immediately.",
    )
    draft = extractive_draft("How often do I have to change my password?", [passage])
    assert "90 days" in draft
    assert "change their password at any time" in draft  # the best match stays
