"""Figures as quantities: what the support judgement may confirm, and what stays a changed figure."""

from __future__ import annotations

import pytest

from grounded_agent.quantities import Quantity, figures_stated, quantities

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
    is left to the judgement (and to the word check's units when the judgement fails)."""
    assert figures_stated("Loans last 24 weeks.", SOURCE)


def test_quantities_are_read_in_base_units() -> None:
    assert set(quantities("2 weeks and half an hour, 3%")) == {
        Quantity("time", 1209600.0), Quantity("time", 1800.0), Quantity("share", 0.03)
    }
