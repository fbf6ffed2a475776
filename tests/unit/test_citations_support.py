"""The support check: quotes and close paraphrases stay, added or changed facts go, measured."""

from __future__ import annotations

import pytest

from grounded_agent.citations import SUPPORT_MIN, supports
from grounded_agent.text import split_sentences
from tests.fakes import finding
from tests.support.benchmarks import load_benchmark

BENCH = load_benchmark("bench_support")
ROWS = BENCH.load()
MEASURED = BENCH.measure(ROWS, SUPPORT_MIN)


def test_the_labelled_set_is_large_balanced_and_written_for_the_project() -> None:
    assert len(ROWS) >= 120
    labels = [r["label"] for r in ROWS]
    assert set(labels) == {"supported", "unsupported"}
    assert 0.4 <= labels.count("supported") / len(labels) <= 0.6
    assert {r["set"] for r in ROWS} == {"tune", "heldout", "fresh"}
    assert all(r["passage"] and r["title"] and r["sentence"] and r["why"] for r in ROWS)


def test_rates_on_the_tuning_rows_are_within_5_percent() -> None:
    """The 5% target holds on the rows the check and its threshold were tuned on."""
    tune = MEASURED["tune"]
    assert tune["false_removal_rate"] <= 0.05
    assert tune["false_keep_rate"] <= 0.05


def test_rates_on_rows_not_tuned_on_do_not_get_worse() -> None:
    """Ceilings at the rates measured when the check was last changed (see bench_support.py)."""
    assert MEASURED["heldout"]["false_removal_rate"] <= 0.084
    assert MEASURED["heldout"]["false_keep_rate"] <= 0.040
    assert MEASURED["fresh"]["false_removal_rate"] <= 0.152
    assert MEASURED["fresh"]["false_keep_rate"] <= 0.086
    assert MEASURED["all"]["false_removal_rate"] <= 0.080
    assert MEASURED["all"]["false_keep_rate"] <= 0.051


@pytest.mark.xfail(
    strict=True,
    reason="issue 14's 5% target is not met on rows the check was not tuned on: a lexical check "
    "does not follow inferences ('outside capital cities' for 'elsewhere'), paraphrases in new "
    "words ('reserved in advance' for 'booked ahead') or a swapped role word ('sent to your "
    "manager' where HR is named); on the six sets written blind it removes 17%, 34%, 56%, 58%, 96% "
    "and 80% of the supported sentences and keeps 20%, 18%, 40%, 24%, 8% and 10% of the unsupported "
    "ones; see bench_support.py --errors. In LLM mode these sentences go to the model's support "
    "judgement (support_judge.py). Remove this mark when the word check alone meets it",
)
def test_rates_on_all_rows_meet_the_5_percent_target() -> None:
    assert MEASURED["all"]["false_removal_rate"] <= 0.05
    assert MEASURED["all"]["false_keep_rate"] <= 0.05


def test_every_sentence_of_every_labelled_passage_supports_itself() -> None:
    """A quote always stays: each passage sentence, cited as it is written."""
    seen = set()
    for row in ROWS:
        if row["passage"] in seen:
            continue
        seen.add(row["passage"])
        f = finding(title=row["title"], text=row["passage"], section=row.get("section"))
        for sentence in split_sentences(row["passage"]):
            assert supports(sentence.lstrip("- "), [f]), sentence


PASSAGE = finding(
    title="Borrowing at Elmbrook Public Library",
    section="Loan periods",
    text="Books are lent for 21 days and DVDs for 7 days. Overdue DVDs cost 12.40 euros. "
    "Items can be renewed twice, unless another member has reserved them. "
    "The guest network is called EPL-Visitor and needs no password.",
)


@pytest.mark.parametrize(
    "sentence",
    [
        "DVD loans: 7 days",
        "DVDs are lent for seven days.",
        "Books have a 21-day loan period.",
        "An overdue DVD costs EUR 12.40.",
        "Overdue DVDs cost 12.4 euros.",
        "Items can be renewed two times unless they are reserved by another member.",
        "The EPL-Visitor network does not need a password.",
        "Loan periods: books 21 days",
    ],
)
def test_quotes_paraphrases_and_list_items_stay(sentence: str) -> None:
    assert supports(sentence, [PASSAGE])


@pytest.mark.parametrize(
    ("sentence", "why"),
    [
        ("DVDs are lent for 21 days.", "the books' number given to DVDs"),
        ("Books: 7 days", "the DVDs' number given to books"),
        ("Books are lent for 28 days.", "changed number"),
        ("Books are lent for 21 weeks.", "changed unit"),
        ("Overdue DVDs cost 14.20 euros.", "changed amount"),
        ("Items can be renewed three times.", "changed count"),
        ("The guest network is called EPL-Guest.", "different name"),
        ("The guest network needs a password.", "negation dropped"),
        ("Books are lent for 21 days and can be renewed online.", "added claim"),
        ("All items can always be renewed twice.", "overstated"),
        ("Books are lent for 21 days at the Harbour branch.", "added name"),
    ],
)
def test_added_or_changed_facts_go(sentence: str, why: str) -> None:
    assert not supports(sentence, [PASSAGE]), why


WASTE = finding(
    "knowledge_base",
    "waste",
    "Bins must be placed at the kerb by 07:00 on collection day. Extra bags left beside a bin "
    "will not be collected. Breakfast costs EUR 16 per adult if not included in your rate. "
    "API keys do not expire, but unused keys are disabled after 90 days.",
    title="Service rules",
)


@pytest.mark.parametrize(
    ("sentence", "supported"),
    [
        # a paraphrase of a clause without a negation is not held against another clause's one
        ("Bins need to be at the kerb by 07:00 on collection day.", True),
        # ... but repeating the negated clause without its negation still goes
        ("Extra bags left beside a bin will be collected.", False),
        ("API keys expire after 90 days.", False),
        # "unless" is "if not"
        ("Breakfast costs EUR 16 per adult unless it's included in your rate.", True),
        ("Breakfast costs EUR 16 per adult if it is included in your rate.", False),
    ],
)
def test_a_negation_belongs_to_the_clause_that_states_it(sentence: str, supported: bool) -> None:
    assert supports(sentence, [WASTE]) is supported


HOURS = finding(
    "knowledge_base",
    "pool",
    "The pool opens at 06:30 and closes at 21:00. Books are lent for 21 days. A 10-visit card "
    "is valid for 12 months and costs EUR 48. A single ticket is valid for 90 minutes. Annual "
    "membership costs EUR 120 a year. Students may resit an exam once in August.",
    title="Riverside services",
)


@pytest.mark.parametrize(
    ("sentence", "supported"),
    [
        ("The pool closes at 9 pm.", True),
        ("The pool closes at 9 am.", False),
        ("Books are lent for three weeks.", True),
        ("Books are lent for three months.", False),
        ("The 10-visit card stays valid for a year.", True),
        ("The 10-visit card stays valid for two years.", False),
        ("A single ticket is good for an hour and a half.", True),
        ("A single ticket is good for half an hour.", False),
        ("Annual membership costs EUR 120 a year.", True),
        ("Students can resit an exam once, in August.", True),
        ("Students can resit an exam twice, in August.", False),
    ],
)
def test_times_and_periods_written_differently_are_the_same(sentence: str, supported: bool) -> None:
    assert supports(sentence, [HOURS]) is supported


FEES = finding(
    "knowledge_base",
    "fees",
    "Late fees for DVDs are EUR 1 per day, with a maximum of EUR 10 per item. Each household may "
    "hold a maximum of two permits. The account fee is waived for customers under 26. Adding a "
    "spouse as a driver is free of charge; other extra drivers cost EUR 12 per day.",
    title="Fees",
)


@pytest.mark.parametrize(
    ("sentence", "supported"),
    [
        ("The DVD late fee never goes above EUR 10 per item.", True),
        ("The DVD late fee never goes above EUR 12 per item.", False),
        ("A household can't hold more than two permits.", True),
        ("A household can't hold more than three permits.", False),
        ("Customers under 26 don't pay the account fee.", True),
        ("Customers over 30 don't pay the account fee.", False),
        ("Adding a spouse as a driver doesn't cost anything.", True),
        ("Other extra drivers don't cost anything.", False),
    ],
)
def test_ceilings_and_waivers_said_with_a_negation(sentence: str, supported: bool) -> None:
    assert supports(sentence, [FEES]) is supported


RULES = finding(
    "knowledge_base",
    "rules",
    "Drivers under 25 pay a surcharge of EUR 15 per day. Printing costs 10 cents per "
    "black-and-white page. Tickets bought from the driver cost EUR 0.50 more than tickets "
    "bought in the app. Underground parking costs EUR 15 per night; spaces cannot be reserved "
    "in advance.",
    title="Rules",
)


@pytest.mark.parametrize(
    ("sentence", "supported"),
    [
        # what a number is counted per
        ("Drivers under 25 pay a surcharge of EUR 15 a day.", True),
        ("Drivers under 25 pay a surcharge of EUR 15 per rental.", False),
        ("Black-and-white printing is 10 cents per page.", True),
        # the two sides of a comparison
        ("Tickets bought from the driver cost EUR 0.50 more than tickets bought in the app.", True),
        ("Tickets bought in the app cost EUR 0.50 more than tickets bought from the driver.", False),
        # a second predicate of one sentence is a claim of its own
        ("Underground parking costs EUR 15 per night and can be reserved in advance.", False),
        ("Underground parking costs EUR 15 per night.", True),
    ],
)
def test_rates_comparisons_and_second_predicates(sentence: str, supported: bool) -> None:
    assert supports(sentence, [RULES]) is supported


FERRY = finding(
    "knowledge_base",
    "ferry",
    "Adult tickets cost EUR 18 one way; children aged 4 to 15 pay EUR 9, and children under 4 "
    "travel free. Passengers older than 65 pay EUR 12.",
    title="Ferry fares",
)


@pytest.mark.parametrize(
    ("sentence", "supported"),
    [
        ("Children under 4 travel free.", True),
        ("Children younger than 4 travel free.", True),
        ("Children under 4 pay EUR 9.", False),
        ("Passengers above 65 pay EUR 12.", True),
        ("Passengers under 65 pay EUR 12.", False),
    ],
)
def test_one_side_of_a_limit_is_not_the_number_itself(sentence: str, supported: bool) -> None:
    assert supports(sentence, [FERRY]) is supported


DESK = finding(
    "knowledge_base",
    "desk",
    "Vehicles must check in at least 45 minutes before departure. Day passes cost EUR 25, "
    "including coffee, tea and Wi-Fi. A refundable deposit of EUR 100 is taken on a credit card.",
    title="Desk rules",
)


@pytest.mark.parametrize(
    ("sentence", "supported"),
    [
        # "you'll", "you're" are pronouns; "need to" is "must"
        ("If you're driving, you'll need to check in at least 45 minutes before departure.", True),
        # an item added to a list is a claim of its own
        ("Day passes cost EUR 25 and include coffee, tea, Wi-Fi and lunch.", False),
        ("Day passes cost EUR 25 and include coffee, tea and Wi-Fi.", True),
        ("The EUR 100 deposit can be paid in cash or by credit card.", False),
    ],
)
def test_pronoun_contractions_obligations_and_listed_items(sentence: str, supported: bool) -> None:
    assert supports(sentence, [DESK]) is supported


POOL = finding(
    "knowledge_base",
    "pool-hours",
    "Riverside Pool is open Monday to Friday from 06:30 to 21:00 and on weekends from 08:00 to "
    "18:00. The vaccination course covers two injections given 3 to 4 weeks apart.",
    title="Riverside Pool",
)


@pytest.mark.parametrize(
    ("sentence", "supported"),
    [
        ("On weekdays the pool opens at 6:30 and closes at 9 pm.", True),
        ("On weekdays the pool closes at 9 pm.", True),
        ("On weekdays the pool closes at 10 pm.", False),
        ("On weekdays the pool opens at 6:30 and closes at 22:00.", False),
        ("The two injections are given three to four weeks apart.", True),
        ("The two injections are given three to four months apart.", False),
    ],
)
def test_opening_hours_weekdays_and_ranges_written_differently(sentence: str, supported: bool) -> None:
    assert supports(sentence, [POOL]) is supported


ALL_ROWS = ROWS + BENCH.load_blind()


def test_in_llm_mode_no_unsupported_sentence_escapes_the_judgement() -> None:
    """Only a quote of whole passage sentences is decided by the word check alone; every
    unsupported labelled sentence goes to the model (a negative control for the routing: a
    route that kept paraphrases alone would leave some here)."""
    for name, r in BENCH.routes(ALL_ROWS).items():
        assert r["unsupported_kept_alone"] == 0, name


def test_with_a_judge_that_is_always_right_the_pipeline_keeps_nothing_unsupported() -> None:
    """What the design loses by itself: the digits rule may remove a figure it cannot convert,
    never more than 6% of a set's supported sentences (measured: 0-6%, bench_support.py)."""
    judged = BENCH.oracle_verdicts(ALL_ROWS)
    for name in {r["set"] for r in ALL_ROWS}:
        rates = BENCH.rates([j for j in judged if j[0]["set"] == name])
        assert rates["false_keep_rate"] == 0.0, name
        assert rates["false_removal_rate"] <= 0.06, name
