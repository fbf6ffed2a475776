"""Citation reading: every style models write, and a marker only ever cites the sentence it closes."""

from __future__ import annotations

import pytest

from grounded_agent.grounding.citations import (
    MARKER,
    attach_markers,
    check_answer,
    quoted_in,
    split_claims,
)
from tests.fakes import finding

LOANS = finding(
    source_id="loans",
    title="Loan periods",
    text="Books can be borrowed for 21 days. DVDs can be borrowed for 7 days. "
    "Items can be renewed twice.",
)
WIFI = finding(
    source_id="wifi",
    title="Guest Wi-Fi",
    text="The guest wireless network is called HPL-Guest. It needs no password.",
)
HOURS = finding(
    source_id="hours",
    title="Opening hours",
    text="The library is open from 9:00 to 18:00 on weekdays.",
)
SOURCES = [LOANS, WIFI, HOURS]
NETWORK = "The guest wireless network is called HPL-Guest"
BOOKS = "Books can be borrowed for 21 days"
DVDS = "DVDs can be borrowed for 7 days"
BOTH = "Books can be borrowed for 21 days and the guest wireless network is called HPL-Guest"


@pytest.mark.parametrize(
    ("draft", "text", "cited"),
    [
        pytest.param(f"{NETWORK}. [2]", f"{NETWORK} [1].", ["wifi"], id="after-stop-space"),
        pytest.param(f"{NETWORK}.[2]", f"{NETWORK} [1].", ["wifi"], id="after-stop-no-space"),
        pytest.param(f"{NETWORK} [2].", f"{NETWORK} [1].", ["wifi"], id="before-stop"),
        pytest.param(f"{NETWORK}[2].", f"{NETWORK} [1].", ["wifi"], id="before-stop-no-space"),
        pytest.param(f"{NETWORK} [2]", f"{NETWORK} [1].", ["wifi"], id="no-full-stop"),
        pytest.param(f"{BOTH} [1][2].", f"{BOTH} [1][2].", ["loans", "wifi"], id="adjacent"),
        pytest.param(f"{BOTH} [1, 2].", f"{BOTH} [1][2].", ["loans", "wifi"], id="comma-group"),
        pytest.param(f"{BOTH} [1,2].", f"{BOTH} [1][2].", ["loans", "wifi"], id="comma-no-space"),
        pytest.param(f"{BOTH} [1-2].", f"{BOTH} [1][2].", ["loans", "wifi"], id="range-hyphen"),
        pytest.param(f"{BOTH} [1–2].", f"{BOTH} [1][2].", ["loans", "wifi"], id="range-en-dash"),
        pytest.param(f"{BOTH}. [1][2]", f"{BOTH} [1][2].", ["loans", "wifi"], id="group-after-stop"),
        pytest.param(f"{BOTH} [2][1].", f"{BOTH} [1][2].", ["wifi", "loans"], id="order-of-use"),
        pytest.param(
            f"Loan periods:\n- {BOOKS} [1]\n- DVD loans: 7 days [1]",
            f"{BOOKS} [1]. DVD loans: 7 days [1].",
            ["loans"],
            id="bullet-list",
        ),
        pytest.param(
            "Loan periods:\n1. Books: 21 days [1]\n2. DVDs: 7 days [1]",
            "Books: 21 days [1]. DVDs: 7 days [1].",
            ["loans"],
            id="numbered-list",
        ),
        pytest.param(
            "* **DVD loans:** 7 days [1]", "DVD loans: 7 days [1].", ["loans"], id="markdown-item"
        ),
        pytest.param(f"{BOOKS}\n[1]", f"{BOOKS} [1].", ["loans"], id="marker-on-next-line"),
        pytest.param(f"{BOOKS} [1]\n{DVDS} [1]", f"{BOOKS} [1]. {DVDS} [1].", ["loans"],
                     id="line-ends"),
        pytest.param(
            f"{BOOKS}. [1] {DVDS}. [1]", f"{BOOKS} [1]. {DVDS} [1].", ["loans"], id="both-after-stop"
        ),
        pytest.param(
            f"{BOOKS}.[1] {DVDS}.[1]", f"{BOOKS} [1]. {DVDS} [1].", ["loans"], id="both-no-space"
        ),
        pytest.param(
            f"{NETWORK}. [2] {BOOKS}. [1]",
            f"{NETWORK} [1]. {BOOKS} [2].",
            ["wifi", "loans"],
            id="each-its-own-source",
        ),
        pytest.param(
            f"{BOOKS} [1].\n\nSources: [1] Loan periods",
            f"{BOOKS} [1].",
            ["loans"],
            id="sources-list-inline",
        ),
        pytest.param(
            f"{BOOKS} [1]. {NETWORK} [2].\n\nSources:\n[1] Loan periods\n[2] Guest Wi-Fi",
            f"{BOOKS} [1]. {NETWORK} [2].",
            ["loans", "wifi"],
            id="sources-list-lines",
        ),
        pytest.param(
            f"{BOOKS} [1].\n\n**References:**\n- [1] Loan periods, updated 2026",
            f"{BOOKS} [1].",
            ["loans"],
            id="references-heading",
        ),
        pytest.param(
            f"{BOOKS} [1]. Sources: [1]", f"{BOOKS} [1].", ["loans"], id="sources-same-line"
        ),
        pytest.param(
            f"{BOOKS} [1].\n\n[1] Loan periods", f"{BOOKS} [1].", ["loans"], id="headless-reference"
        ),
        pytest.param("According to [1], books can be borrowed for 21 days.",
                     f"{BOOKS} [1].", ["loans"], id="according-to"),
        pytest.param(f"{BOOKS} [source 1].", f"{BOOKS} [1].", ["loans"], id="source-word"),
        pytest.param(f"{BOOKS} [^1].", f"{BOOKS} [1].", ["loans"], id="footnote"),
    ],
)
def test_citation_styles_models_write(draft: str, text: str, cited: list[str]) -> None:
    """How markers are read, whatever the support: a sentence that quotes no passage (two facts
    joined, a list item) is kept here as a judge that read it would keep it."""
    judged = {sentence: True for sentence, _ in check_answer(draft, SOURCES).doubted}
    checked = check_answer(draft, SOURCES, judged=judged)
    assert checked.text == text
    assert [c.source_id for c in checked.citations] == cited
    assert [c.n for c in checked.citations] == list(range(1, len(cited) + 1))
    assert checked.unsupported == [] and checked.removed_markers == []


def test_a_sentence_no_judge_read_is_kept_only_as_a_quote() -> None:
    """Without a judgement, two facts joined into one sentence quote no passage: removed and
    listed for a judge; each fact quoted alone stays."""
    checked = check_answer(f"{BOTH} [1][2].", SOURCES)
    assert checked.citations == [] and checked.doubted == [(f"{BOTH}.", [1, 2])]
    checked = check_answer(f"{BOOKS} [1]. {NETWORK} [2].", SOURCES)
    assert checked.text == f"{BOOKS} [1]. {NETWORK} [2]." and checked.doubted == []


def test_the_issue_cases() -> None:
    """Issue 14: the sentence kept its marker after the full stop, and lost it."""
    checked = check_answer("The guest wireless network is called HPL-Guest. [1]", [WIFI])
    assert checked.text == "The guest wireless network is called HPL-Guest [1]."
    checked = check_answer(f"{BOOKS}. [1] {DVDS}. [1]", [LOANS])
    assert checked.text == f"{BOOKS} [1]. {DVDS} [1]."
    assert checked.unsupported == []


# --- negative controls: a marker never moves to another sentence -----------------------------


@pytest.mark.parametrize(
    "draft",
    [
        f"{BOOKS}. {DVDS}. [1]",
        f"{BOOKS}. {DVDS} [1].",
        f"{BOOKS}. {DVDS}.[1]",
        f"{BOOKS}\n{DVDS} [1]",
        f"- {BOOKS}\n- {DVDS} [1]",
    ],
)
def test_a_marker_does_not_reach_back_to_an_earlier_sentence(draft: str) -> None:
    checked = check_answer(draft, [LOANS])
    assert checked.text == f"{DVDS} [1]."
    assert checked.unsupported == [f"{BOOKS}."] or checked.unsupported == [BOOKS]


@pytest.mark.parametrize(
    "draft",
    [f"{BOOKS}. [1] {DVDS}.", f"{BOOKS}.[1] {DVDS}.", f"{BOOKS} [1]. {DVDS}."],
)
def test_a_marker_after_a_full_stop_does_not_go_to_the_next_sentence(draft: str) -> None:
    checked = check_answer(draft, [LOANS])
    assert checked.text == f"{BOOKS} [1]."
    assert checked.unsupported == [f"{DVDS}."]


def test_a_supported_sentence_citing_the_wrong_source_is_removed() -> None:
    checked = check_answer(f"{BOOKS} [2].", SOURCES)
    assert checked.text == "" and checked.citations == []
    assert checked.unsupported == [f"{BOOKS}."]


def test_each_sentence_is_checked_against_its_own_sources() -> None:
    # the network sentence cites the loan rules: it goes; the loan sentence stays
    checked = check_answer(f"{NETWORK} [1]. {BOOKS} [1].", SOURCES)
    assert checked.text == f"{BOOKS} [1]."
    assert checked.unsupported == [f"{NETWORK}."]


@pytest.mark.parametrize(
    ("draft", "removed"),
    [
        (f"{BOOKS} [9].", ["[9]"]),
        (f"{BOOKS}. [9]", ["[9]"]),
        (f"{BOOKS} [0].", ["[0]"]),
        (f"{BOOKS} [1-999].", ["[1-999]"]),
        (f"{BOOKS} [3-1].", ["[3-1]"]),
        (f"{BOOKS} &#91;9&#93;.", ["[9]"]),
    ],
)
def test_a_marker_outside_the_sources_is_removed_with_its_sentence(
    draft: str, removed: list[str]
) -> None:
    checked = check_answer(draft, [LOANS, WIFI])
    assert checked.removed_markers == removed
    assert checked.text == "" and checked.citations == []
    assert checked.unsupported == [f"{BOOKS}."]


@pytest.mark.parametrize(
    ("draft", "removed"),
    [
        (f"{BOOKS} [1][9].", ["[9]"]),
        (f"{BOOKS} [1, 9].", ["[9]"]),
        (f"{BOOKS} [1-3].", ["[3]"]),
    ],
)
def test_a_marker_outside_the_sources_goes_and_the_valid_one_stays(
    draft: str, removed: list[str]
) -> None:
    checked = check_answer(draft, [LOANS, WIFI])
    assert checked.removed_markers == removed
    assert checked.text == f"{BOOKS} [1]."
    assert [c.source_id for c in checked.citations] == ["loans"]


def test_an_out_of_range_marker_in_a_sources_list_is_reported() -> None:
    checked = check_answer(f"{BOOKS} [1].\n\nSources:\n[1] Loan periods\n[9] Made up", [LOANS])
    assert checked.text == f"{BOOKS} [1]."
    assert checked.removed_markers == ["[9]"]


def test_a_marker_citing_a_source_that_says_nothing_of_it_is_dropped() -> None:
    """[3] (opening hours) adds nothing to a sentence about loans: no citation for it."""
    checked = check_answer(f"{BOOKS} [1][3].", SOURCES)
    assert checked.text == f"{BOOKS} [1]."
    assert [c.source_id for c in checked.citations] == ["loans"]


def test_a_sentence_without_a_marker_is_removed_but_a_lead_in_is_no_claim() -> None:
    checked = check_answer(f"## Loans\nHere is what I found:\n- {BOOKS} [1]\nHave a nice day.", SOURCES)
    assert checked.text == f"{BOOKS} [1]."
    assert checked.unsupported == ["Have a nice day."]


def test_a_references_list_is_no_claim() -> None:
    claims, refs = split_claims(f"{BOOKS} [1].\nSources:\n[1] Loan periods", [LOANS])
    assert [c.text for c in claims] == [f"{BOOKS} ."]
    assert refs == ["Sources:", "[1] Loan periods"]


def test_a_numbered_line_that_states_a_fact_is_a_claim_not_a_reference() -> None:
    claims, refs = split_claims(f"{BOOKS} [1].\n[1] DVDs can be borrowed for 7 days.", [LOANS])
    assert refs == []
    assert [c.markers for c in claims] == [[1], [1]]


def test_abbreviations_and_decimals_do_not_end_a_sentence() -> None:
    claims, _ = split_claims("It costs approx. 12.40 euros, e.g. at St. Mary's [1]. Next [2].")
    assert [(c.text, c.markers) for c in claims] == [
        ("It costs approx. 12.40 euros, e.g. at St. Mary's .", [1]),
        ("Next .", [2]),
    ]


def test_marker_pattern_reads_groups() -> None:
    assert [m.group(1) for m in MARKER.finditer("a [1] b [2, 3] c [4-6] d [7–8] e [10]")] == [
        "1", "2, 3", "4-6", "7–8", "10"
    ]


def test_attach_markers_goes_before_the_final_punctuation() -> None:
    assert attach_markers("Loans last 21 days.", "[1][2]") == "Loans last 21 days [1][2]."
    assert attach_markers("Loans last 21 days", "[1]") == "Loans last 21 days [1]"


QUOTES = finding(
    source_id="names",
    title="Early settlers",
    text='Johnson was known to the Iroquois as Warraghiggey, meaning "He who does great things." '
    "He spoke their languages. The river carries nearly 1,000 m3/s (35,000 cu ft/s) of water "
    "in spring.\nOxygen gas (O\n2) can be toxic at high partial pressures.",
)


def test_a_sentence_ending_in_a_quote_keeps_its_marker() -> None:
    """The check splits after '." He' as the sentence choice does, so the quote stays cited."""
    from grounded_agent.grounding.extractive import extractive_draft

    draft = extractive_draft("What was Johnson's Iroquois name?", [QUOTES])
    checked = check_answer(draft, [QUOTES])
    assert "Warraghiggey" in checked.text
    assert checked.citations and checked.citations[0].source_id == "names"
    assert not checked.unsupported


def test_a_word_for_word_quote_with_units_is_supported_and_a_changed_number_is_not() -> None:
    quote = "The river carries nearly 1,000 m3/s (35,000 cu ft/s) of water in spring"
    assert check_answer(f"{quote} [1].", [QUOTES]).text == f"{quote} [1]."
    assert quoted_in(quote, [QUOTES]) == [0]
    changed = quote.replace("1,000", "2,000")
    assert check_answer(f"{changed} [1].", [QUOTES]).text == ""
    # half a sentence is no quote
    assert not quoted_in("He who does great things", [QUOTES])


def test_a_line_that_only_looks_like_a_numbered_item_continues_its_sentence() -> None:
    from grounded_agent.grounding.sentences import split_sentences

    assert "Oxygen gas (O 2) can be toxic at high partial pressures." in split_sentences(QUOTES.text)
    assert split_sentences("Steps:\n1. Open the lid\n2. Press start") == [
        "Steps:", "Open the lid", "Press start",
    ]
    assert split_sentences("To do\n1) Open the lid\n2) Press start") == [
        "To do", "Open the lid", "Press start",
    ]


@pytest.mark.parametrize(
    ("draft", "claims"),
    [
        pytest.param(
            "Call the hotline to report: [1] For billing call us [1].",
            [("Call the hotline to report:", [1]), ("For billing call us .", [1])],
            id="capital-after-colon-marker-starts-a-sentence",
        ),
        pytest.param(
            "Hotline: [1] 0800 200 999 [1].",
            [("Hotline:  0800 200 999 .", [1, 1])],
            id="number-after-colon-marker-goes-on",
        ),
    ],
)
def test_a_marker_after_a_colon(draft: str, claims: list[tuple[str, list[int]]]) -> None:
    got, _ = split_claims(draft, [QUOTES])
    assert [(c.text, c.markers) for c in got] == claims
