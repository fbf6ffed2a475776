"""The offline confidence step: relevance gates what is read, the judge decides what answers."""

from __future__ import annotations

from grounded_agent import aask, build_graph
from grounded_agent.context import Context
from grounded_agent.scoring import decisive, local_confidence
from tests.fakes import ScriptedSource, finding, found

QUESTION = "How many days can I borrow a book for?"
LOANS = finding(
    source_id="loans", title="Borrowing", score=0.9,
    text="Members can borrow books, DVDs and board games. Books can be borrowed for 21 days.",
)
CAFE = finding(
    source_id="cafe", title="Cafe", score=0.9,
    text="The cafe on the second floor serves coffee and cake. It is run by volunteers.",
)


def verdict(*passages, **kwargs):  # type: ignore[no-untyped-def]
    return local_confidence(QUESTION, list(passages), 0.75, 0.55, **kwargs)


def test_a_passage_with_an_answering_sentence_is_answered_high() -> None:
    conf = verdict(LOANS)
    assert conf.can_answer and conf.level == "HIGH" and "judge" in conf.reason


def test_a_relevant_looking_passage_that_answers_nothing_is_not_relevant() -> None:
    conf = verdict(CAFE)
    assert conf.level == "NOT_RELEVANT" and not conf.can_answer
    assert "answers it" in conf.reason


def test_below_the_low_threshold_nothing_is_read() -> None:
    conf = verdict(LOANS.model_copy(update={"score": 0.5}))
    assert conf.level == "NOT_RELEVANT" and "relevance threshold" in conf.reason


def test_the_judge_alone_gives_medium_in_the_low_band() -> None:
    conf = verdict(LOANS.model_copy(update={"score": 0.6}))
    assert conf.can_answer and conf.level == "MEDIUM"


def test_the_answer_threshold_is_the_runs_setting() -> None:
    assert verdict(LOANS, answer_threshold=1.0).level == "NOT_RELEVANT"
    assert verdict(CAFE, answer_threshold=0.0).can_answer


def test_with_a_model_only_a_high_verdict_skips_its_call() -> None:
    assert decisive(QUESTION, [LOANS], 0.75, 0.55) is not None
    assert decisive(QUESTION, [CAFE], 0.75, 0.55) is None  # the model judges the judge's "no"
    assert decisive(QUESTION, [LOANS.model_copy(update={"score": 0.6})], 0.75, 0.55) is None


async def test_offline_the_graph_says_not_found_and_lists_the_passage_instead() -> None:
    kb = ScriptedSource("knowledge_base", [found("knowledge_base", LOANS)])
    graph = build_graph(chat_model=None, tools={"knowledge_base": kb.tool()})
    strict = Context(sources=["knowledge_base"], answer_threshold=1.0)
    result = await aask(QUESTION, graph=graph, context=strict)
    assert result.status == "not_found" and result.citations == []
    assert [p.source_id for p in result.closest] == ["loans"]
    assert any("judge" in t.detail for t in result.trail if t.node == "score_confidence")
    answered = await aask(QUESTION, graph=graph, context=Context(sources=["knowledge_base"]))
    assert answered.status == "answered" and "21 days" in answered.answer
