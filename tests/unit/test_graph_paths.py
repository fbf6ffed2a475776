"""Every path of the graph with scripted models and scripted sources (no sockets, no database)."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage

from grounded_agent import InvalidQuestion, aask, build_graph
from grounded_agent.context import Context
from tests.fakes import (
    ScriptedChatModel,
    ScriptedSource,
    failed,
    finding,
    found,
    judged,
    not_found,
    text,
    tool_call,
)

PRO = (
    "The Pro plan costs 49 EUR per user per month. It includes priority support and single sign-on."
)
# The shipped judge's cut-offs are calibrated data that change with each calibration; these paths
# are decided by the scripted model, so the judge is off here (tests/unit/test_judge.py covers it).
CTX = Context(sources=["knowledge_base"], choose_one_source=True, judge_veto=0.0, judge_margin=1.0)


def graph(model, **sources):  # type: ignore[no-untyped-def]
    return build_graph(chat_model=model, tools={n: s.tool() for n, s in sources.items()})


async def test_found_answers_in_two_model_calls() -> None:
    kb = ScriptedSource(
        "knowledge_base", [found("knowledge_base", finding(text=PRO, title="Pricing", score=0.9))]
    )
    model = ScriptedChatModel(
        responses=[
            tool_call("knowledge_base", {"query": "Pro plan price"}),
            text("The Pro plan costs 49 EUR per user per month [1]."),
        ]
    )
    result = await aask(
        "What does the Pro plan cost?", graph=graph(model, knowledge_base=kb), context=CTX
    )
    assert result.status == "answered"
    assert model.calls == 2
    assert result.usage.llm_calls == 2
    assert result.citations[0].source_id == "doc-1"
    assert "[1]" in result.answer
    assert result.attempts == 1
    assert kb.queries == ["Pro plan price"]
    # today's date reaches the tool-choosing prompt
    from datetime import date

    assert date.today().isoformat() in str(model.received[0][0].content)


async def test_one_source_and_a_question_is_answered_in_one_model_call() -> None:
    """With one source there is one search to run: the model is not asked to choose it."""
    kb = ScriptedSource(
        "knowledge_base", [found("knowledge_base", finding(text=PRO, title="Pricing", score=0.9))]
    )
    model = ScriptedChatModel(responses=[text("The Pro plan costs 49 EUR per user per month [1].")])
    result = await aask("What does the Pro plan cost?", graph=graph(model, knowledge_base=kb),
                        context=Context(sources=["knowledge_base"]))
    assert result.status == "answered" and result.citations[0].source_id == "doc-1"
    assert model.calls == 1 and result.usage.llm_calls == 1
    assert kb.queries == ["What does the Pro plan cost?"]
    assert any(t.decision == "tools_chosen_without_model" for t in result.trail)


async def test_two_sources_still_let_the_model_choose() -> None:
    """The negative control: with a second source the model chooses the searches."""
    kb = ScriptedSource(
        "knowledge_base", [found("knowledge_base", finding(text=PRO, title="Pricing", score=0.9))]
    )
    web = ScriptedSource("web", [not_found("web")])
    model = ScriptedChatModel(responses=[
        tool_call("knowledge_base", {"query": "Pro plan price"}),
        text("The Pro plan costs 49 EUR per user per month [1]."),
    ])
    result = await aask("What does the Pro plan cost?", graph=graph(model, knowledge_base=kb, web=web),
                        context=Context(sources=["knowledge_base", "web"]))
    assert model.calls == 2 and kb.queries == ["Pro plan price"]
    assert not any(t.decision == "tools_chosen_without_model" for t in result.trail)


@pytest.mark.parametrize(
    ("requested", "asked", "expected"),
    [
        (["knowledge_base"], "What does the Pro plan cost?", True),
        (["wikipedia"], "Who founded Lumenary?", True),
        (["knowledge_base", "web"], "What does the Pro plan cost?", False),
        (["knowledge_base"], "Find the price lists from 2025", False),  # a document request
        (["knowledge_base"], "Wie viel kostet der Pro-Tarif pro Nutzer?", False),  # not read
    ],
)
def test_the_tool_choice_skips_the_model_only_when_nothing_is_left_to_choose(
    requested: list[str], asked: str, expected: bool
) -> None:
    from datetime import date

    from grounded_agent.nodes.route_request import nothing_to_choose

    assert nothing_to_choose(requested, asked, date(2026, 6, 1)) is expected


async def test_low_then_reformulate_then_found() -> None:
    kb = ScriptedSource(
        "knowledge_base",
        [
            found(
                "knowledge_base",
                finding(
                    source_id="faq",
                    text="Pro tier customers can change their plan every month.",
                    score=0.6,
                ),
            ),
            found("knowledge_base", finding(text=PRO, title="Pricing", score=0.9)),
        ],
    )
    model = ScriptedChatModel(
        responses=[
            tool_call("knowledge_base", {"query": "Pro tier fee"}),
            judged("LOW", False),
            text("Pro plan price"),
            text("The Pro plan costs 49 EUR per user per month [1]."),
        ]
    )
    result = await aask(
        "What is the fee for the Pro tier?", graph=graph(model, knowledge_base=kb), context=CTX
    )
    assert result.attempts == 2
    assert (
        result.queries == ["Pro tier fee", "Pro plan price"]
        or result.queries[-1] == "Pro plan price"
    )
    assert result.status == "answered"
    assert [t.node for t in result.trail].count("reformulate_query") == 1


async def test_a_low_judgement_proposes_the_rewrite_in_the_same_call() -> None:
    """The LOW verdict carries the second search's query: no rewrite call, one call fewer."""
    weak = finding(source_id="faq", text="Pro tier customers can change their plan every month.",
                   score=0.6)
    kb = ScriptedSource("knowledge_base", [
        found("knowledge_base", weak),
        found("knowledge_base", finding(text=PRO, title="Pricing", score=0.9)),
    ])
    model = ScriptedChatModel(responses=[
        judged("LOW", False, query="Pro plan price"),
        text("The Pro plan costs 49 EUR per user per month [1]."),
    ])
    one_source = Context(sources=["knowledge_base"], judge_veto=0.0, judge_margin=1.0)  # the tool is chosen without a model
    result = await aask(
        "What is the fee for the Pro tier?", graph=graph(model, knowledge_base=kb),
        context=one_source,
    )
    assert kb.queries == ["What is the fee for the Pro tier?", "Pro plan price"]
    assert result.status == "answered" and result.attempts == 2
    assert model.calls == 2 and result.usage.llm_calls == 2
    rewrite = next(t for t in result.trail if t.node == "reformulate_query")
    assert "proposed by the confidence judgement" in rewrite.detail


async def test_a_proposed_rewrite_that_repeats_a_search_asks_the_model_for_another() -> None:
    weak = found("knowledge_base", finding(
        source_id="faq", text="Pro tier customers can change their plan every month.", score=0.6))
    kb = ScriptedSource("knowledge_base", [weak, weak])
    question = "What is the fee for the Pro tier?"
    model = ScriptedChatModel(responses=[
        judged("LOW", False, query=question.upper()),  # the search already run
        text("Pro plan price"),
        judged("LOW", False, query="anything"),
    ])
    result = await aask(question, graph=graph(model, knowledge_base=kb),
                        context=Context(sources=["knowledge_base"]))
    assert kb.queries == [question, "Pro plan price"]
    assert result.status == "not_found" and result.attempts == 2  # the cap holds
    assert model.calls == 3


async def test_low_twice_ends_not_found_after_two_attempts_never_three() -> None:
    weak = found(
        "knowledge_base",
        finding(
            source_id="faq", text="Pro tier customers can change their plan every month.", score=0.6
        ),
    )
    kb = ScriptedSource("knowledge_base", [weak, weak, weak])
    model = ScriptedChatModel(
        responses=[
            tool_call("knowledge_base", {"query": "x"}),
            judged("LOW", False),
            text("y"),
            judged("LOW", False),
        ]
    )
    result = await aask(
        "What is the fee for the Pro tier?", graph=graph(model, knowledge_base=kb), context=CTX
    )
    assert result.status == "not_found"
    assert result.attempts == 2
    assert len(kb.queries) == 2
    assert model.calls == 4
    assert result.citations == []


async def test_not_relevant_short_circuits_after_one_attempt() -> None:
    kb = ScriptedSource("knowledge_base", [found("knowledge_base", finding(text=PRO, score=0.7))])
    model = ScriptedChatModel(
        responses=[tool_call("knowledge_base", {"query": "q"}), judged("NOT_RELEVANT", False)]
    )
    result = await aask(
        "What is the capital of Peru?", graph=graph(model, knowledge_base=kb), context=CTX
    )
    assert result.status == "not_found"
    assert result.attempts == 1
    assert len(kb.queries) == 1
    assert "reformulate_query" not in [t.node for t in result.trail]


async def test_every_source_failing_is_unavailable_without_reformulation_or_facts() -> None:
    kb = ScriptedSource("knowledge_base", [failed("knowledge_base", "timeout")])
    wiki = ScriptedSource("wikipedia", [failed("wikipedia", "unavailable")])
    model = ScriptedChatModel(responses=[tool_call("knowledge_base", {"query": "q"})])
    result = await aask(
        "What does the Pro plan cost?",
        sources=["knowledge_base", "wikipedia"],
        graph=graph(model, knowledge_base=kb, wikipedia=wiki),
        context=CTX,
    )
    assert result.status == "unavailable"
    assert result.status != "not_found"  # negative control: a failure is not an absence
    assert result.attempts == 1 and len(kb.queries) == 1
    assert result.citations == []
    assert "49" not in result.answer
    assert {s.source: s.status for s in result.sources} == {
        "knowledge_base": "error",
        "wikipedia": "error",
    }
    assert all(s.finding_count is None for s in result.sources)
    assert model.calls == 1


async def test_one_source_failing_one_found_is_partial_and_names_the_failed_one() -> None:
    kb = ScriptedSource(
        "knowledge_base", [found("knowledge_base", finding(text=PRO, title="Pricing", score=0.9))]
    )
    web = ScriptedSource("web", [failed("web", "config")])
    result = await aask(
        "What does the Pro plan cost?",
        sources=["knowledge_base", "web"],
        graph=graph(None, knowledge_base=kb, web=web),
        context=CTX,
    )
    assert result.status == "partial"
    assert "web search" in result.answer
    assert result.citations and result.citations[0].source == "knowledge_base"
    assert any(w.kind == "source_unavailable" for w in result.warnings)


async def test_unparseable_confidence_output_becomes_the_offline_verdict_after_one_retry() -> None:
    """Twice unreadable as JSON: the offline verdict, which answers nothing here, so the model
    is not asked for a free-text answer either (nodes/_judged.py)."""

    def kb() -> ScriptedSource:
        return ScriptedSource(
            "knowledge_base", [found("knowledge_base", finding(text=PRO, score=0.7))]
        )

    model = ScriptedChatModel(
        responses=[
            tool_call("knowledge_base", {"query": "q"}),
            text("I think it is fine"),
            text("still prose"),
        ]
    )
    ctx = Context(sources=["knowledge_base"], choose_one_source=True, max_attempts=1)
    result = await aask(
        "What does the Pro plan cost?", graph=graph(model, knowledge_base=kb()), context=ctx
    )
    offline = await aask(
        "What does the Pro plan cost?", graph=graph(None, knowledge_base=kb()), context=ctx
    )
    assert result.confidence.level == offline.confidence.level == "NOT_RELEVANT"
    assert result.confidence.can_answer is False
    assert result.status == offline.status == "not_found"
    assert model.calls == 3


async def test_unknown_tool_name_is_rejected_before_execution() -> None:
    kb = ScriptedSource(
        "knowledge_base", [found("knowledge_base", finding(text=PRO, score=0.9, title="Pricing"))]
    )
    model = ScriptedChatModel(
        responses=[
            tool_call("delete_everything", {"query": "q"}),
            text("The Pro plan costs 49 EUR per user per month [1]."),
        ]
    )
    result = await aask(
        "What does the Pro plan cost?", graph=graph(model, knowledge_base=kb), context=CTX
    )
    assert any(
        w.kind == "rejected_tool_call" and "delete_everything" in w.detail for w in result.warnings
    )
    assert kb.queries  # the allowed source was still searched
    assert result.status == "answered"


async def test_invalid_arguments_are_rejected() -> None:
    kb = ScriptedSource(
        "knowledge_base", [found("knowledge_base", finding(text=PRO, score=0.9, title="Pricing"))]
    )
    model = ScriptedChatModel(
        responses=[
            tool_call("knowledge_base", {"query": "q", "k": 500}),
            text("The Pro plan costs 49 EUR per user per month [1]."),
        ]
    )
    result = await aask(
        "What does the Pro plan cost?", graph=graph(model, knowledge_base=kb), context=CTX
    )
    assert any(w.kind == "rejected_tool_call" and "k" in w.detail for w in result.warnings)
    assert kb.queries == ["What does the Pro plan cost?"]  # fixed routing replaced the bad call


async def test_marker_without_source_is_removed() -> None:
    items = [finding(source_id=f"d{i}", title=f"Doc {i}", text=PRO, score=0.9) for i in range(3)]
    kb = ScriptedSource("knowledge_base", [found("knowledge_base", *items)])
    model = ScriptedChatModel(
        responses=[
            tool_call("knowledge_base", {"query": "q"}),
            text(
                "The Pro plan costs 49 EUR per user per month [7]. "
                "It includes priority support and single sign-on [1]."
            ),
        ]
    )
    result = await aask(
        "What does the Pro plan cost?", graph=graph(model, knowledge_base=kb), context=CTX
    )
    assert "[7]" not in result.answer
    assert any(w.kind == "citation_removed" and "numbered 7 " in w.detail for w in result.warnings)
    assert [c.n for c in result.citations] == [1]
    assert "49 EUR" not in result.answer  # its only marker pointed nowhere


async def test_unsupported_sentence_is_removed() -> None:
    kb = ScriptedSource(
        "knowledge_base", [found("knowledge_base", finding(text=PRO, title="Pricing", score=0.9))]
    )
    model = ScriptedChatModel(
        responses=[
            tool_call("knowledge_base", {"query": "q"}),
            text(
                "The Pro plan costs 49 EUR per user per month [1]. "
                "Enterprise customers get a dedicated Kubernetes cluster in Frankfurt [1]."
            ),
        ]
    )
    result = await aask(
        "What does the Pro plan cost?", graph=graph(model, knowledge_base=kb), context=CTX
    )
    assert "Kubernetes" not in result.answer
    assert "49 EUR" in result.answer
    assert any(w.kind == "unsupported_sentence" for w in result.warnings)


async def test_changed_number_is_unsupported() -> None:
    kb = ScriptedSource(
        "knowledge_base", [found("knowledge_base", finding(text=PRO, title="Pricing", score=0.9))]
    )
    model = ScriptedChatModel(
        responses=[
            tool_call("knowledge_base", {"query": "q"}),
            text("The Pro plan costs 59 EUR per user per month [1]."),
        ]
    )
    result = await aask(
        "What does the Pro plan cost?", graph=graph(model, knowledge_base=kb), context=CTX
    )
    # the model's only sentence is removed; the usable evidence is quoted instead, never a
    # "not found" while the knowledge base holds the answer
    assert result.status == "answered" and "49 EUR" in result.answer
    assert "59" not in result.answer
    assert any(w.kind == "unsupported_sentence" for w in result.warnings)
    assert any(t.decision == "model_draft_unusable" for t in result.trail)


async def test_model_call_budget_is_two_at_best_and_four_at_worst() -> None:
    weak = found(
        "knowledge_base",
        finding(
            source_id="faq", text="Pro tier customers can change their plan every month.", score=0.6
        ),
    )
    kb = ScriptedSource(
        "knowledge_base", [weak, found("knowledge_base", finding(text=PRO, score=0.7))]
    )
    model = ScriptedChatModel(
        responses=[
            tool_call("knowledge_base", {"query": "q"}),
            judged("LOW", False),
            text("Pro plan price"),
            judged("MEDIUM", True, "The Pro plan costs 49 EUR per user per month [1]."),
        ]
    )
    result = await aask(
        "What is the fee for the Pro tier?", graph=graph(model, knowledge_base=kb), context=CTX
    )
    # tool choice, judged draft (LOW), rewrite, judged draft (MEDIUM): the judgement rides on the
    # draft call, so no attempt spends a call of its own on it
    assert model.calls == 4
    assert result.usage.llm_calls == 4
    assert result.status == "answered_with_caveat"


async def test_invalid_question_is_refused_before_any_call() -> None:
    kb = ScriptedSource("knowledge_base", [not_found("knowledge_base")])
    model = ScriptedChatModel(responses=[])
    g = graph(model, knowledge_base=kb)
    for bad in ["", "   ", "x" * 4001]:
        with pytest.raises(InvalidQuestion):
            await aask(bad, graph=g, context=CTX)
    with pytest.raises(InvalidQuestion):
        await aask("fine question", sources=["intranet"], graph=g, context=CTX)
    assert model.calls == 0 and kb.queries == []


async def test_offline_not_found_says_what_was_searched() -> None:
    kb = ScriptedSource(
        "knowledge_base", [not_found("knowledge_base"), not_found("knowledge_base")]
    )
    result = await aask(
        "Who won the 1954 World Cup?", graph=graph(None, knowledge_base=kb), context=CTX
    )
    assert result.status == "not_found"
    assert result.attempts == 2
    assert "knowledge base" in result.answer
    assert result.sources[0].finding_count == 0
    assert any(t.decision == "offline_mode" for t in result.trail)
    assert result.usage.llm_calls == 0


async def test_raising_tool_becomes_error_outcome_not_crash() -> None:
    kb = ScriptedSource("knowledge_base", [RuntimeError("connection refused at 10.0.0.1")])
    result = await aask(
        "What does the Pro plan cost?", graph=graph(None, knowledge_base=kb), context=CTX
    )
    assert result.status == "unavailable"
    assert "10.0.0.1" not in result.model_dump_json()
    assert "RuntimeError" not in result.answer


async def test_model_saying_the_sources_do_not_answer_is_an_abstention() -> None:
    kb = ScriptedSource(
        "knowledge_base", [found("knowledge_base", finding(text=PRO, title="Pricing", score=0.9))]
    )
    model = ScriptedChatModel(
        responses=[
            tool_call("knowledge_base", {"query": "q"}),
            text("The sources do not say whether the Pro plan has a free trial."),
        ]
    )
    result = await aask(
        "Does the Pro plan have a free trial?", graph=graph(model, knowledge_base=kb), context=CTX
    )
    assert result.status == "not_found"
    assert result.citations == []
    assert any(t.decision == "model_abstained" for t in result.trail)
    assert not any(w.kind == "unsupported_sentence" for w in result.warnings)


class _BrokenModel(ScriptedChatModel):
    """A provider that cannot be reached: every call raises, as a refused connection would."""

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):  # type: ignore[no-untyped-def]
        self.received.append(list(messages))
        raise ConnectionError("connection refused")


@pytest.mark.parametrize("score", [0.7, 0.9])
async def test_unreachable_model_gives_the_offline_outcome(score: float) -> None:
    """A failed model call is no judgement: the outcome is offline's for the same evidence, not
    a more confident one (0.7: offline finds it too weak) and not an emptier one (0.9: offline
    answers, and so does the run whose model failed: the negative control)."""

    def kb() -> ScriptedSource:
        return ScriptedSource(
            "knowledge_base",
            [found("knowledge_base", finding(text=PRO, title="Pricing", score=score))] * 2,
        )

    source, model = kb(), _BrokenModel(responses=[])
    result = await aask(
        "What does the Pro plan cost?", graph=graph(model, knowledge_base=source), context=CTX
    )
    offline = await aask("What does the Pro plan cost?", graph=graph(None, knowledge_base=kb()),
                         context=CTX)
    assert result.confidence.level == offline.confidence.level
    assert result.status == offline.status
    assert (result.status == "not_found") == (score < 0.9)
    assert [c.source_id for c in result.citations] == [c.source_id for c in offline.citations]
    assert any(w.kind == "model_unavailable" for w in result.warnings)
    assert len(source.queries) == 1  # no re-query because the model failed
    # every attempted call counts, failed or not, and the hard cap holds
    assert result.usage.llm_calls == model.calls
    assert model.calls <= 5


async def test_failed_model_calls_count_against_the_cap() -> None:
    weak = found("knowledge_base", finding(source_id="faq", text="Pro tier customers can change their plan every month.", score=0.6))
    kb = ScriptedSource("knowledge_base", [weak, weak])
    model = _BrokenModel(responses=[])
    ctx = Context(sources=["knowledge_base"], choose_one_source=True, max_model_calls=2)
    result = await aask("What is the fee for the Pro tier?", graph=graph(model, knowledge_base=kb), context=ctx)
    assert model.calls <= 2
    assert result.usage.llm_calls == model.calls


async def test_a_source_called_twice_is_rejected_and_every_requested_source_is_read() -> None:
    kb = ScriptedSource("knowledge_base", [found("knowledge_base", finding(text=PRO, title="Pricing", score=0.9))])
    wiki = ScriptedSource("wikipedia", [not_found("wikipedia")])
    three_kb = AIMessage(content="", tool_calls=[
        {"id": f"c{i}", "name": "knowledge_base", "args": {"query": f"q{i}"}} for i in range(3)
    ])
    model = ScriptedChatModel(responses=[three_kb, text("The Pro plan costs 49 EUR per user per month [1].")])
    result = await aask("What does the Pro plan cost?", sources=["knowledge_base", "wikipedia"],
                        graph=graph(model, knowledge_base=kb, wikipedia=wiki), context=CTX)
    assert len(kb.queries) == 1 and len(wiki.queries) == 1
    assert {s.source: s.status for s in result.sources} == {"knowledge_base": "found", "wikipedia": "not_found"}
    assert result.status == "answered"


async def test_top_k_follows_the_tool_schema() -> None:
    with pytest.raises(ValueError, match="top_k"):
        Context(top_k=20)


async def test_model_written_rewrite_is_not_quoted_in_a_not_found_answer() -> None:
    kb = ScriptedSource("knowledge_base", [not_found("knowledge_base"), not_found("knowledge_base")])
    model = ScriptedChatModel(responses=[
        tool_call("knowledge_base", {"query": "2014 World Cup winner"}),
        text("Germany won the 2014 World Cup final against Argentina"),
    ])
    result = await aask("Who won the 2014 World Cup?", graph=graph(model, knowledge_base=kb), context=CTX)
    assert result.status == "not_found"
    assert "Germany" not in result.answer and "Argentina" not in result.answer
    assert "rewritten" in result.answer
    assert result.queries[-1].startswith("Germany")  # still reported, as data, in `queries`


async def test_one_word_question_is_not_searched_twice() -> None:
    kb = ScriptedSource("knowledge_base", [not_found("knowledge_base"), not_found("knowledge_base")])
    result = await aask("pricing", graph=graph(None, knowledge_base=kb), context=CTX)
    assert result.status == "not_found"
    assert kb.queries == ["pricing"]
    assert result.attempts == 1
    assert any(t.decision == "rewrite_repeats_query" for t in result.trail)


HOURS = "The library closes at 14:00 on 24 and 31 December."


async def test_not_found_lists_the_closest_documents_and_claims_nothing_from_them() -> None:
    kb = ScriptedSource("knowledge_base", [found(
        "knowledge_base",
        finding(source_id="hours", text=HOURS, title="Opening hours", section="Holidays",
                score=0.52),
        finding(source_id="hours", text="Open 09:00 to 20:00.", title="Opening hours",
                section="Weekdays", score=0.45),
        finding(source_id="rooms", text="Rooms can be booked.", title="Rooms", score=0.31),
        finding(source_id="fees", text="A new card costs EUR 4.", title="Fees", score=0.29),
    )])
    result = await aask(
        "When do you shut on New Year's Eve?", graph=graph(None, knowledge_base=kb),
        context=CTX,
    )
    assert result.status == "not_found" and result.citations == []
    # one entry per document, its closest passage, best first; under 0.3 none
    assert [(p.source_id, p.section, p.score) for p in result.closest] == [
        ("hours", "Holidays", 0.52), ("rooms", None, 0.31)]
    assert "14:00" not in result.answer and "[1]" not in result.answer  # a pointer, no claim


async def test_no_closest_documents_after_an_answer_or_from_a_failed_source() -> None:
    kb = ScriptedSource(
        "knowledge_base", [found("knowledge_base", finding(text=PRO, title="Pricing", score=0.9))]
    )
    answered = await aask(
        "What does the Pro plan cost?", graph=graph(None, knowledge_base=kb), context=CTX
    )
    assert answered.status == "answered" and answered.closest == []
    down = ScriptedSource("knowledge_base", [failed("knowledge_base", "timeout")])
    result = await aask(
        "What does the Pro plan cost?", graph=graph(None, knowledge_base=down), context=CTX
    )
    assert result.status == "unavailable" and result.closest == []


async def test_a_failed_source_does_not_hide_the_closest_documents_of_a_working_one() -> None:
    kb = ScriptedSource("knowledge_base", [found(
        "knowledge_base", finding(source_id="hours", text=HOURS, title="Opening hours",
                                  score=0.4))])
    web = ScriptedSource("web", [failed("web", "config")])
    result = await aask(
        "When do you shut on New Year's Eve?", sources=["knowledge_base", "web"],
        graph=graph(None, knowledge_base=kb, web=web), context=CTX,
    )
    assert result.status == "unavailable"  # the failed source keeps absence unestablished
    assert [p.source_id for p in result.closest] == ["hours"]
    strict = await aask(
        "When do you shut on New Year's Eve?", sources=["knowledge_base", "web"],
        graph=graph(None, knowledge_base=kb, web=web),
        context=Context(sources=["knowledge_base"], choose_one_source=True, closest_threshold=0.5),
    )
    assert strict.closest == []


WEAK = 0.45
"""Under the offline floor (low_threshold 0.55), over the model's (model_low_threshold 0.35)."""


def _weak_kb() -> ScriptedSource:
    hit = found("knowledge_base", finding(text=PRO, title="Pricing", score=WEAK))
    return ScriptedSource("knowledge_base", [hit, hit])


async def test_a_weak_passage_reaches_the_model_which_judges_it() -> None:
    """A question in other words than the document's scores under 0.55; with a model, the
    passage is read and judged instead of turned away, and the answer carries the caveat."""
    model = ScriptedChatModel(
        responses=[
            tool_call("knowledge_base", {"query": "premium tier monthly fee"}),
            judged("HIGH", True, "The Pro plan costs 49 EUR per user per month [1]."),
        ]
    )
    result = await aask(
        "How much is the premium tier a month?",
        graph=graph(model, knowledge_base=_weak_kb()), context=CTX,
    )
    assert result.status == "answered_with_caveat"
    assert result.citations[0].source_id == "doc-1"
    assert result.sources[0].status == "low_relevance"
    assert "partly matches" in result.answer
    held = [t for t in result.trail if t.node == "score_confidence"]
    assert held and "(with_draft)" in held[0].decision  # left open locally
    by_model = [t for t in result.trail if t.node == "draft_answer" and "(model)" in t.decision]
    assert by_model and by_model[0].decision == "HIGH (model)"


async def test_with_the_model_floor_at_the_offline_one_the_weak_passage_is_turned_away() -> None:
    """Negative control for the test above: the model floor is what let the passage through."""
    model = ScriptedChatModel(
        responses=[
            tool_call("knowledge_base", {"query": "premium tier monthly fee"}),
            text("premium tier price"),
        ]
    )
    ctx = Context(sources=["knowledge_base"], choose_one_source=True, model_low_threshold=0.55)
    result = await aask(
        "How much is the premium tier a month?",
        graph=graph(model, knowledge_base=_weak_kb()), context=ctx,
    )
    assert result.status == "not_found"
    assert result.citations == []
    assert result.sources[0].status == "not_found"


async def test_offline_a_weak_passage_is_not_used() -> None:
    """Offline nothing judges a weak passage, so the offline floor holds."""
    result = await aask(
        "How much is the premium tier a month?",
        graph=graph(None, knowledge_base=_weak_kb()), context=CTX,
    )
    assert result.status == "not_found"
    assert result.citations == []


async def test_a_failed_judgement_does_not_answer_from_a_weak_passage() -> None:
    """What reached the model only for it to judge is no evidence when the judgement fails: the
    local scorer reads it with the offline floor, and the failure is named."""
    model = _BrokenModel(responses=[])
    result = await aask(
        "How much is the premium tier a month?",
        graph=graph(model, knowledge_base=_weak_kb()), context=CTX,
    )
    assert result.status == "not_found"
    assert result.citations == []
    assert any(w.kind == "model_unavailable" for w in result.warnings)


def test_the_model_floor_applies_only_with_a_model() -> None:
    ctx = Context()
    assert ctx.run_thresholds(with_model=False).low == ctx.low_threshold == 0.55
    assert ctx.run_thresholds(with_model=True).low == ctx.model_low_threshold == 0.35
    # the lower of the two: raising the model floor above the offline one changes nothing
    assert Context(model_low_threshold=0.7).run_thresholds(with_model=True).low == 0.55
    # thresholds set for offline use do not clash with the model floor's default
    assert Context(found_threshold=0.3, low_threshold=0.2).run_thresholds(with_model=True).low == 0.2
    with pytest.raises(ValueError, match="model_low_threshold"):
        Context(model_low_threshold=1.5)
