"""The offline confidence rule: the found band, the names asked about, and the figure asked for."""

from __future__ import annotations

from grounded_agent import aask, build_graph
from grounded_agent.context import Context
from grounded_agent.grounding.scoring import local_confidence
from tests.fakes import ScriptedSource, finding, found

LOANS = finding(
    source_id="loans", title="Borrowing", score=0.9,
    text="Members can borrow books, DVDs and board games. Books can be borrowed for 21 days.",
)
GAMES = finding(
    source_id="games", title="Board games", score=0.9,
    text="Board games can be borrowed by members. They are kept on the second floor, beside the cafe.",
)


def verdict(question: str, *passages):  # type: ignore[no-untyped-def]
    return local_confidence(question, list(passages), 0.75, 0.55)


def test_a_duration_question_answers_when_the_quoted_sentence_holds_one() -> None:
    conf = verdict("How long can I keep a book I borrowed?", LOANS)
    assert conf.can_answer and conf.level in ("HIGH", "MEDIUM")


def test_a_duration_question_is_declined_when_the_quoted_sentences_hold_none() -> None:
    conf = verdict("How long can I keep a board game I borrowed?", GAMES)
    assert conf.level == "NOT_RELEVANT" and not conf.can_answer
    assert "duration" in conf.reason


def test_a_question_for_a_name_is_not_declined_for_lack_of_a_figure() -> None:
    conf = verdict("Who can borrow board games?", GAMES)
    assert conf.can_answer


def test_below_the_found_band_the_figure_rule_is_not_what_decides() -> None:
    weak = GAMES.model_copy(update={"score": 0.6})
    assert verdict("How long can I keep a board game I borrowed?", weak).level == "LOW"


async def test_offline_the_graph_says_not_found_and_lists_the_passage_instead() -> None:
    kb = ScriptedSource("knowledge_base", [found("knowledge_base", GAMES)])
    graph = build_graph(chat_model=None, tools={"knowledge_base": kb.tool()})
    result = await aask("How long can I keep a board game I borrowed?", graph=graph,
                        context=Context(sources=["knowledge_base"]))
    assert result.status == "not_found" and result.citations == []
    assert [p.source_id for p in result.closest] == ["games"]
    assert any("duration" in t.detail for t in result.trail if t.node == "score_confidence")


KETTLE = finding(
    source_id="kettle", title="Zephyr Kettle", score=0.95,
    text="The Zephyr Kettle holds 1.7 litres and boils a full jug in under four minutes.",
)
PRICES = finding(
    source_id="prices", title="Price list", score=0.95,
    text="The Zephyr Kettle costs EUR 49 in our shop.",
)


def test_how_much_with_a_price_word_asks_for_a_price() -> None:
    from grounded_agent.grounding.answer_types import asked_type

    assert asked_type("How much does the Zephyr Kettle cost?") == "price"
    assert asked_type("How much is the late fee?") == "price"
    assert asked_type("How much water does the Zephyr Kettle hold?") == "amount"  # control


def test_a_measure_is_no_price() -> None:
    from grounded_agent.grounding.answer_types import holds_type

    for sentence in ("It holds 1.7 litres.", "A bag may weigh 20 kg.", "It draws 2200 W."):
        assert not holds_type("price", sentence), sentence
    for sentence in ("It costs EUR 49.", "The Pro plan costs 29 per user.", "Entry is free.",
                     "The late fee is 5% of the invoice."):
        assert holds_type("price", sentence), sentence


def test_the_deterministic_path_runs_the_same_type_check() -> None:
    """A price question over a passage with every key term and a capacity, no price: the
    decisive path no longer answers HIGH on it (the judged path's check), while the passage
    that states the price still decides at once (control)."""
    from grounded_agent.grounding.scoring import decisive

    question = "How much does the Zephyr Kettle cost?"
    assert decisive(question, [KETTLE], 0.75, 0.55) is None
    assert not verdict(question, KETTLE).can_answer
    answered = decisive(question, [PRICES], 0.75, 0.55)
    assert answered is not None and answered[0].can_answer
