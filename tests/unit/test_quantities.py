"""Figures as quantities: what the support judgement may confirm, and what stays a changed figure."""

from __future__ import annotations

import pytest

from grounded_agent.grounding.quantities import Quantity, figures_stated, quantities

SOURCE = (
    "Refunds are paid within 14 days. A fifth of the fee is kept. The bottle holds 500 ml. "
    "Loans last 24 months. The Pro plan costs EUR 1,200.00 a year."
)


@pytest.mark.parametrize(
    "sentence",
    [
        "Refunds are paid within 2 weeks.",
        "20% of the fee is kept.",
        "The bottle holds 0.5 l.",
        "Loans last 2 years.",
        "Pro costs EUR 1200 a year.",
        "Refunds are paid within two weeks.",  # no digits: nothing for this rule to check
    ],
)
def test_the_same_figure_in_another_unit_is_stated(sentence: str) -> None:
    assert figures_stated(sentence, SOURCE)


@pytest.mark.parametrize(
    "sentence",
    [
        "Refunds are paid within 3 weeks.",
        "25% of the fee is kept.",
        "The bottle holds 0.75 l.",
        "Pro costs EUR 1,100 a year.",
    ],
)
def test_a_changed_figure_is_not(sentence: str) -> None:
    assert not figures_stated(sentence, SOURCE)


def test_a_number_written_in_the_sources_counts_whatever_its_unit() -> None:
    """The rule reads figures, not what they count: "24 weeks" where the source says "24 months"
    is left to the judgement."""
    assert figures_stated("Loans last 24 weeks.", SOURCE)


def test_quantities_are_read_in_base_units() -> None:
    assert set(quantities("2 weeks and half an hour, 3%")) == {
        Quantity("time", 1209600.0), Quantity("time", 1800.0), Quantity("share", 0.03)
    }


HOURS = "The desk opens at 06:30 and closes at 21:00. Refunds take ten days; twenty-five seats."


@pytest.mark.parametrize(
    "sentence",
    [
        "The desk opens at 6:30 am.",
        "It closes at 9 pm.",
        "It closes at 9 p.m.",
        "It is open from 6.30 a.m. to 9 p.m.",
        "Refunds take 10 days.",
        "There are 25 seats.",
    ],
)
def test_a_time_of_day_or_a_number_word_written_another_way_is_stated(sentence: str) -> None:
    assert figures_stated(sentence, HOURS)


@pytest.mark.parametrize(
    "sentence",
    [
        "It closes at 9 am.",  # 09:00 is not 21:00
        "The desk opens at 7 am.",
        "Refunds take 11 days.",
        "There are 26 seats.",
    ],
)
def test_a_changed_time_or_count_is_not(sentence: str) -> None:
    assert not figures_stated(sentence, HOURS)


def test_the_tables_come_from_the_data_file() -> None:
    # one table of number words and units (data/quantities.txt), read by the figure check and
    # by answer_types alike
    from grounded_agent.grounding.answer_types import holds_type
    from grounded_agent.grounding.quantities import NUMBER_WORDS, TIME_UNITS

    assert NUMBER_WORDS["seventy"] == 70 and "fortnight" in TIME_UNITS
    assert quantities("a fortnight") == quantities("14 days")
    assert holds_type("duration", "Keys are returned within a fortnight.")
    assert holds_type("number", "Seventy rooms face the sea.")
