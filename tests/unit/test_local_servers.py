"""What small local models and their servers need: requests every server takes, tool calls
written as text, drafts without markers, per-step token limits."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_openai import ChatOpenAI

from grounded_agent import aask, build_graph
from grounded_agent.context import Context
from grounded_agent.deps import _portable_chat_openai, portable_payload
from grounded_agent.grounding.cite_unmarked import cite_unmarked, says_no_answer
from grounded_agent.llm.calls import text_tool_calls, tool_names
from tests.fakes import ScriptedChatModel, ScriptedSource, finding, found, text, tool_call

PRO = "The Pro plan costs 49 EUR per user per month. It includes priority support."
# whether offline answers is the premise of the fallbacks below, so the calibrated judge is off
# (its verdicts change with each calibration; tests/unit/test_judge.py covers it)
CTX = Context(sources=["knowledge_base"], choose_one_source=True, judge_veto=0.0, judge_margin=1.0)
TOOLS = [{"type": "function", "function": {"name": "knowledge_base", "parameters": {}}}]
DIALOG = [
    HumanMessage("q"),
    AIMessage(content="", tool_calls=[{"id": "c1", "name": "knowledge_base", "args": {"query": "q"}}]),
    ToolMessage(content="STATUS: found", tool_call_id="c1"),
]


def _payload(model: Any) -> dict[str, Any]:
    payload: dict[str, Any] = model._get_request_payload(DIALOG)
    return payload


def test_langchain_openai_alone_sends_null_content_and_max_completion_tokens() -> None:
    """Why the portable client exists (and the control for the test after it)."""
    plain = _payload(ChatOpenAI(model="m", api_key="x", max_tokens=64))  # type: ignore[arg-type]
    assert plain["messages"][1]["content"] is None
    assert plain["max_completion_tokens"] == 64 and "max_tokens" not in plain


def test_the_portable_client_sends_what_every_server_takes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    portable = _portable_chat_openai()(model="m", api_key="x", max_tokens=64)  # type: ignore[call-arg]
    payload = _payload(portable)
    assert [m["content"] for m in payload["messages"]] == ["q", "", "STATUS: found"]
    assert payload["messages"][1]["tool_calls"]  # the calls themselves are kept
    assert payload["max_tokens"] == 64 and "max_completion_tokens" not in payload
    # OpenAI's own API (no base URL) keeps the name it requires
    assert "max_completion_tokens" in portable_payload(
        {"messages": [], "max_completion_tokens": 64}, local=False
    )


@pytest.mark.parametrize(
    "reply",
    [
        '{"name": "knowledge_base", "arguments": {"query": "pro price"}}',
        'I will search.\n```json\n{"name": "knowledge_base", "parameters": {"query": "pro price"}}\n```',
        '[{"type": "function", "function": {"name": "knowledge_base", '
        '"arguments": "{\\"query\\": \\"pro price\\"}"}}]',
    ],
    ids=["bare", "fenced_after_prose", "openai_shape_string_args"],
)
def test_a_tool_call_written_as_text_is_read_as_the_call(reply: str) -> None:
    message = text_tool_calls(AIMessage(content=reply), tool_names(TOOLS))
    assert [(c["name"], c["args"]) for c in message.tool_calls] == [
        ("knowledge_base", {"query": "pro price"})
    ]


@pytest.mark.parametrize(
    "reply",
    ['{"name": "delete_everything", "arguments": {"query": "x"}}',
     '{"query": "pro price"}', "The Pro plan costs 49 EUR.", '{"name": "knowledge_base", '
     '"arguments": "not json"}'],
    ids=["tool_not_offered", "no_name", "prose", "arguments_not_json"],
)
def test_text_that_names_no_offered_tool_is_no_call(reply: str) -> None:
    message = AIMessage(content=reply)
    assert text_tool_calls(message, tool_names(TOOLS)) is message


async def test_the_routing_reply_written_as_text_runs_the_models_search() -> None:
    kb = ScriptedSource("knowledge_base", [found("knowledge_base", finding(text=PRO, score=0.9))])
    model = ScriptedChatModel(responses=[
        text('{"name": "knowledge_base", "arguments": {"query": "Pro plan price"}}'),
        text("The Pro plan costs 49 EUR per user per month [1]."),
    ])
    graph = build_graph(chat_model=model, tools={"knowledge_base": kb.tool()})
    result = await aask("What does the Pro plan cost?", graph=graph, context=CTX)
    assert kb.queries == ["Pro plan price"]  # the model's query, not the question
    assert result.status == "answered" and not result.warnings


async def test_a_text_call_still_passes_the_tools_schema() -> None:
    """Negative control: text is read as a call, not trusted as one: a query that fails the
    schema is rejected and the source searched with the question."""
    kb = ScriptedSource("knowledge_base", [found("knowledge_base", finding(text=PRO, score=0.9))])
    model = ScriptedChatModel(responses=[
        text('{"name": "knowledge_base", "arguments": {"query": "", "k": 99}}'),
        text("The Pro plan costs 49 EUR per user per month [1]."),
    ])
    graph = build_graph(chat_model=model, tools={"knowledge_base": kb.tool()})
    result = await aask("What does the Pro plan cost?", graph=graph, context=CTX)
    assert kb.queries == ["What does the Pro plan cost?"]
    assert any(w.kind == "rejected_tool_call" for w in result.warnings)


def test_each_unmarked_sentence_gets_the_marker_of_the_passage_it_quotes_or_is_closest_to() -> None:
    sources = [finding(source_id="a", text="Support is open from 9:00 to 17:00 on weekdays."),
               finding(source_id="b", text=PRO)]
    draft = ("The Pro plan costs 49 EUR per user per month. Pro users get priority support. "
             "It comes with a free pony.")
    cited, quoting, closest = cite_unmarked(draft, sources)
    assert (quoting, closest) == (1, 1)
    assert "per month [2]." in cited  # the quote: its passage
    assert "priority support [2]." in cited  # a paraphrase: the closest passage, to be judged
    assert "pony." in cited and "pony [" not in cited  # shares no word: no marker


def test_a_plain_statement_that_the_sources_do_not_answer_is_recognised() -> None:
    assert says_no_answer("The sources do not contain the answer to this question.")
    assert says_no_answer("I couldn't find any information about parking.")
    assert not says_no_answer("The Pro plan costs 49 EUR per user per month.")


async def test_an_unmarked_draft_is_answered_with_its_supported_sentence_cited() -> None:
    kb = ScriptedSource("knowledge_base", [found("knowledge_base", finding(text=PRO, score=0.9))])
    model = ScriptedChatModel(responses=[
        tool_call("knowledge_base", {"query": "Pro plan price"}),
        text("The Pro plan costs 49 EUR per user per month. Annual billing saves 20%."),
    ])
    graph = build_graph(chat_model=model, tools={"knowledge_base": kb.tool()})
    result = await aask("What does the Pro plan cost?", graph=graph, context=CTX)
    assert result.status == "answered"
    assert result.answer.startswith("The Pro plan costs 49 EUR per user per month [1].")
    assert "20%" not in result.answer  # a paraphrase no judge confirmed is removed
    assert any(t.decision == "model_draft_cited" for t in result.trail)
    assert any(w.kind == "unsupported_sentence" for w in result.warnings)


async def test_an_unmarked_draft_nothing_supports_is_not_shown() -> None:
    """Neither an abstention (it says no such thing) nor shown: the evidence is quoted."""
    kb = ScriptedSource("knowledge_base", [found("knowledge_base", finding(text=PRO, score=0.9))])
    model = ScriptedChatModel(responses=[
        tool_call("knowledge_base", {"query": "Pro plan price"}),
        text("It is 99 USD per seat."),
    ])
    graph = build_graph(chat_model=model, tools={"knowledge_base": kb.tool()})
    result = await aask("What does the Pro plan cost?", graph=graph, context=CTX)
    assert result.status == "answered" and "49 EUR" in result.answer
    assert "99 USD" not in result.answer
    assert any(t.decision == "draft_extractive" for t in result.trail)


async def test_each_step_asks_for_its_own_token_limit() -> None:
    kb = ScriptedSource("knowledge_base", [found("knowledge_base", finding(text=PRO, score=0.9))])
    seen: list[Any] = []

    class Recording(ScriptedChatModel):
        def _generate(self, messages, stop=None, run_manager=None, **kwargs):  # type: ignore[no-untyped-def]
            seen.append(kwargs.get("max_tokens"))
            return super()._generate(messages, stop, run_manager, **kwargs)

    model = Recording(responses=[
        tool_call("knowledge_base", {"query": "Pro plan price"}),
        text("The Pro plan costs 49 EUR per user per month [1]."),
    ])
    ctx = Context(sources=["knowledge_base"], choose_one_source=True, judgement_max_tokens=111, answer_max_tokens=333)
    graph = build_graph(chat_model=model, tools={"knowledge_base": kb.tool()})
    result = await aask("What does the Pro plan cost?", graph=graph, context=ctx)
    assert result.status == "answered"
    assert seen == [111, 333]


OWED = "If I'm on the low-income scheme, how long can I take to pay off what I already owe?"
MOVING = ("The final bill is sent within 4 weeks of the moving-out date. If the account is in "
          "credit, the credit is refunded within 14 days of the final bill.")


def _judged_medium_then_unsupported(question_words: str) -> ScriptedChatModel:
    """A small model's run: it calls MEDIUM and drafts, in the same reply, a sentence no judge
    confirms."""
    return ScriptedChatModel(responses=[
        tool_call("knowledge_base", {"query": question_words}),
        tool_call("JudgedDraft", {"level": "MEDIUM", "reason": "close", "can_answer": True,
                                  "answer": "You can take up to 4 weeks to pay it off."}),
        tool_call("SupportJudgement", {"supported": []}),
    ])


async def test_an_unusable_draft_is_not_replaced_by_an_extract_offline_would_not_show() -> None:
    """The model's MEDIUM put an unrelated passage before the answer step; its draft kept no
    sentence. The extract in its place would be the offline answer, and offline this evidence
    answers nothing (clearwater, Qwen2.5 0.5B through llama-server: wrong answers offline
    abstained on)."""
    kb = ScriptedSource("knowledge_base",
                        [found("knowledge_base", finding(text=MOVING, score=0.62))])
    model = _judged_medium_then_unsupported("low-income scheme repayment")
    graph = build_graph(chat_model=model, tools={"knowledge_base": kb.tool()})
    result = await aask(OWED, graph=graph, context=CTX)
    assert result.status == "not_found" and not result.citations, result.answer
    assert any(t.decision == "model_draft_unusable" for t in result.trail)
    # the level reported is offline's too, not the MEDIUM of the judgement that fell with its draft
    assert result.confidence.level == "NOT_RELEVANT" and not result.confidence.can_answer


async def test_an_unusable_draft_still_gives_the_extract_where_offline_answers() -> None:
    """Control: the same run on evidence the offline mode answers from shows its extract."""
    kb = ScriptedSource("knowledge_base", [found("knowledge_base", finding(text=PRO, score=0.8))])
    model = _judged_medium_then_unsupported("Pro plan price")
    graph = build_graph(chat_model=model, tools={"knowledge_base": kb.tool()})
    result = await aask("What is the price of Pro for each person on the team?", graph=graph,
                        context=CTX)
    assert any(t.decision == "MEDIUM (model)" for t in result.trail)  # the model judged it
    assert result.status in ("answered", "answered_with_caveat"), result.trail
    assert "49 EUR" in result.answer
    offline = next(t for t in result.trail if t.node == "score_confidence")
    assert result.confidence.reason in offline.detail  # offline's verdict for the extract


INVENTED = "The Pro plan includes priority phone support around the clock."
RESTATED = "Each user on the Pro plan costs 49 EUR per month."


def _confirms_everything() -> ScriptedChatModel:
    """A small model whose support judgement confirms every sentence it is shown."""
    return ScriptedChatModel(responses=[
        tool_call("knowledge_base", {"query": "Pro plan"}),
        text(f"{RESTATED[:-1]} [1]. {INVENTED[:-1]} [1]."),
        tool_call("SupportJudgement", {"supported": [1, 2]}),
    ])


async def _ask_with_words_rule(on: bool) -> Any:
    kb = ScriptedSource("knowledge_base", [found("knowledge_base", finding(text=PRO, score=0.9))])
    graph = build_graph(chat_model=_confirms_everything(), tools={"knowledge_base": kb.tool()})
    ctx = Context(sources=["knowledge_base"], choose_one_source=True,
                  judged_words_from_sources=on)
    return await aask("What do I get with the Pro plan, and what does it cost?", graph=graph,
                      context=ctx)


async def test_a_judged_sentence_with_words_no_source_uses_is_removed_when_asked() -> None:
    """Context.judged_words_from_sources: what the judge confirmed must also take its words from
    the question or its cited passages; the restatement in their words stays, the invention
    ("phone", "clock": no source says so) goes, with the judge's confirmation."""
    result = await _ask_with_words_rule(on=True)
    assert result.status == "answered"
    assert result.answer.startswith("Each user on the Pro plan costs 49 EUR per month [1].")
    assert "phone" not in result.answer
    assert any(w.kind == "unsupported_sentence" for w in result.warnings)
    assert any(t.decision == "support_judged" and "1 of those removed" in t.detail
               for t in result.trail), result.trail


async def test_without_the_words_rule_the_judge_alone_decides() -> None:
    """Negative control: the same run with the rule off shows the invention the judge confirmed
    (so the test before this one fails if the rule is taken out)."""
    result = await _ask_with_words_rule(on=False)
    assert "phone support around the clock [1]" in result.answer


async def test_a_judged_draft_with_no_sentence_left_falls_back_as_without_the_rule() -> None:
    """Every sentence removed by the rule: the answer is the extract where offline answers, as
    for any model draft that keeps no sentence; never the invention."""
    kb = ScriptedSource("knowledge_base", [found("knowledge_base", finding(text=PRO, score=0.9))])
    model = ScriptedChatModel(responses=[
        tool_call("knowledge_base", {"query": "Pro plan"}),
        text(f"{INVENTED[:-1]} [1]."),
        tool_call("SupportJudgement", {"supported": [1]}),
    ])
    graph = build_graph(chat_model=model, tools={"knowledge_base": kb.tool()})
    ctx = Context(sources=["knowledge_base"], choose_one_source=True,
                  judged_words_from_sources=True, judge_veto=0.0, judge_margin=1.0)
    result = await aask("What does the Pro plan include?", graph=graph, context=ctx)
    assert "phone" not in result.answer
    assert any(t.decision == "model_draft_unusable" for t in result.trail)
    assert result.status == "answered" and "priority support" in result.answer


@pytest.mark.parametrize(("variable", "setting", "default"), [
    ("GROUNDED_AGENT_JUDGED_WORDS_FROM_SOURCES", "judged_words_from_sources", False),
    ("GROUNDED_AGENT_JUDGE_SUPPORT", "judge_support", True),
    ("GROUNDED_AGENT_JUDGE_MODEL_ANSWERS", "judge_model_answers", False),
])
def test_the_local_model_switches_come_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, variable: str, setting: str, default: bool
) -> None:
    """The words rule is off by default (it removes right paraphrases), the support judgement on;
    the local model's setup prints the switch that flips each."""
    monkeypatch.delenv(variable, raising=False)
    assert getattr(Context(), setting) is default
    monkeypatch.setenv(variable, "0" if default else "1")
    assert getattr(Context(), setting) is (not default)
