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
