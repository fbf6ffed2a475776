"""The three intents with scripted models (controlled tool calls), a scripted document store and
scripted sources: routing, validation of the router's arguments, the selection a combined
answer is confined to, coverage, and pages without the model."""

from __future__ import annotations

from datetime import date
from typing import Any

import pytest

from grounded_agent import Context, aask, asearch, build_graph
from grounded_agent.intents import confirms_documents, offline_intent
from grounded_agent.store.errors import StoreUnavailable
from grounded_agent.tools.knowledge_base import KnowledgeBaseArgs
from tests.fakes import (
    ScriptedChatModel,
    ScriptedDocuments,
    ScriptedSource,
    document,
    finding,
    found,
    judged,
    text,
    tool_call,
)

# the answers are decided by the scripted model and the offline rules, so the calibrated
# judge is off (its verdicts change with each calibration; tests/unit/test_judge.py covers it)
CTX = Context(sources=["knowledge_base"], choose_one_source=True, judge_veto=0.0, judge_margin=1.0)
TODAY = date.today()

SUPPORT = {
    "pl-2026-de": "Preisliste 2026: Support per E-Mail innerhalb von 8 Stunden.",
    "pl-2026-at": "Preisliste Österreich 2026: Support per Telefon rund um die Uhr.",
}


def docs(n: int = 2) -> ScriptedDocuments:
    ids = [*SUPPORT, *(f"extra-{i}" for i in range(max(0, n - len(SUPPORT))))][:n]
    return ScriptedDocuments(
        [document(d, title=f"Preisliste {d}", language="de", document_date=date(2026, 3, 1))
         for d in ids]
    )


def kb_source(*doc_ids: str, score: float = 0.9) -> ScriptedSource:
    items = [finding(source_id=d, text=SUPPORT.get(d, f"Text von {d}."), title=d, score=score,
                     language="de")
             for d in doc_ids]
    return ScriptedSource("knowledge_base", [found("knowledge_base", *items)],
                          args_schema=KnowledgeBaseArgs)


def graph(model: Any, store: ScriptedDocuments, kb: ScriptedSource) -> Any:
    return build_graph(chat_model=model, store=store, tools={"knowledge_base": kb.tool()})  # type: ignore[arg-type]


# --- each intent --------------------------------------------------------------------------------


async def test_search_intent_lists_documents_with_one_model_call() -> None:
    store, kb = docs(), kb_source()
    model = ScriptedChatModel(responses=[tool_call(
        "search_documents",
        {"text": "Preisliste", "language": "de", "date_from": f"{TODAY.year}-01-01",
         "date_to": f"{TODAY.year}-12-31"},
    )])
    result = await aask("Find this year's German price lists", graph=graph(model, store, kb),
                        context=CTX)
    assert result.result_type == "search"
    assert result.status == "answered"
    assert result.usage.llm_calls == model.calls == 1
    assert result.documents is not None and [i.doc_id for i in result.documents.items] == list(SUPPORT)
    assert result.search is not None and result.search.sort == "relevance"  # normalised
    assert result.search.date_from == date(TODAY.year, 1, 1)
    assert kb.queries == []  # no passage search for a list of documents
    # the router saw today's date and both kinds of tools
    system = str(model.received[0][0].content)
    assert TODAY.isoformat() in system
    assert {t["function"]["name"] for t in model.bound_tools[0]} == {
        "knowledge_base", "search_documents", "search_and_ask"
    }


async def test_ask_intent_is_todays_answer_in_the_same_number_of_calls() -> None:
    store, kb = docs(), kb_source("pl-2026-de")
    model = ScriptedChatModel(responses=[
        tool_call("knowledge_base", {"query": "support Preisliste"}),
        judged("HIGH", True, "Support kommt per E-Mail innerhalb von 8 Stunden [1]."),
        JUDGED_SUPPORTED,
    ])
    result = await aask("How fast is support?", graph=graph(model, store, kb), context=CTX)
    assert result.result_type == "answer"
    assert (result.documents, result.search, result.coverage_limited) == (None, None, False)
    # routing, the judged answer and its support check (a paraphrase): the routing call was
    # the tool choice, not an extra call
    assert result.usage.llm_calls == model.calls == 3
    assert kb.queries == ["support Preisliste"]
    assert store.queries == []


JUDGED_SUPPORTED = tool_call("SupportJudgement", {"supported": [1, 2]})
"""The support judgement of a draft that shortens its sources' sentences: every sentence stated."""
GERMAN_ANSWER = "Support per E-Mail innerhalb von 8 Stunden [1]. Support per Telefon rund um die Uhr [2]."
RUSSIAN_ANSWER = "Поддержка по e-mail в течение 8 часов [1]. По телефону круглосуточно [2]."


async def test_search_and_ask_answers_only_within_the_page_in_the_asked_language() -> None:
    """Russian request about German documents: the search and the retrieval filter on de; the
    answer is written and checked in German, then translated into Russian; the knowledge base's
    scope is the page's document ids."""
    store, kb = docs(), kb_source(*SUPPORT)
    model = ScriptedChatModel(responses=[
        tool_call("search_and_ask", {
            "text": "Preisliste", "language": "de", "query": "Support Reaktionszeit",
            "answer_language": "ru",
        }),
        judged("HIGH", True, GERMAN_ANSWER),
        JUDGED_SUPPORTED,
        text(RUSSIAN_ANSWER),
    ])
    result = await aask("Найди немецкие прайс-листы и сравни условия поддержки",
                        graph=graph(model, store, kb), context=CTX)
    assert result.result_type == "combined"
    assert result.documents is not None and result.search is not None
    assert result.search.language == "de"
    [args] = kb.args
    assert isinstance(args, KnowledgeBaseArgs)
    assert args.doc_ids == list(SUPPORT) and args.language == "de"  # enforced, not suggested
    assert kb.queries == ["Support Reaktionszeit"]
    answer_prompt = str(model.received[1][0].content)
    assert "Answer in German, the language of the sources" in answer_prompt
    assert "You check a drafted answer" in str(model.received[2][0].content)
    assert "translate a checked answer into ru" in str(model.received[3][0].content)
    assert result.usage.llm_calls == 4
    assert result.status in ("answered", "answered_with_caveat")
    assert result.answer.startswith(RUSSIAN_ANSWER) and len(result.citations) == 2


async def test_a_translation_that_loses_a_marker_is_not_shown() -> None:
    """Negative control: the citations were checked on the German text; a translation that drops
    [2] would cite less than it claims, so the checked German answer is given instead."""
    store, kb = docs(), kb_source(*SUPPORT)
    model = ScriptedChatModel(responses=[
        tool_call("search_and_ask", {"text": "Preisliste", "language": "de",
                                     "query": "Support", "answer_language": "ru"}),
        judged("HIGH", True, GERMAN_ANSWER),
        JUDGED_SUPPORTED,
        text("Поддержка по e-mail в течение 8 часов [1]. По телефону круглосуточно."),
    ])
    result = await aask("Найди немецкие прайс-листы и сравни условия поддержки",
                        graph=graph(model, store, kb), context=CTX)
    assert result.status in ("answered", "answered_with_caveat")
    assert result.answer.startswith(GERMAN_ANSWER) and len(result.citations) == 2
    assert any(t.decision == "translation_not_used" for t in result.trail)


async def test_an_answer_in_the_sources_language_is_not_translated() -> None:
    store, kb = docs(), kb_source(*SUPPORT)
    model = ScriptedChatModel(responses=[
        tool_call("search_and_ask", {"text": "Preisliste", "language": "de",
                                     "query": "Support", "answer_language": "de"}),
        judged("HIGH", True, GERMAN_ANSWER),
        JUDGED_SUPPORTED,
    ])
    result = await aask("Finde die Preislisten und vergleiche den Support",
                        graph=graph(model, store, kb), context=CTX)
    assert result.usage.llm_calls == 3 and result.answer.startswith(GERMAN_ANSWER)
    assert not any(t.decision.startswith("translat") for t in result.trail)


# --- what the router may not do ----------------------------------------------------------------


async def test_an_unknown_tool_is_rejected_and_nothing_else_runs_in_its_place() -> None:
    store, kb = docs(), kb_source("pl-2026-de")
    model = ScriptedChatModel(responses=[
        tool_call("delete_documents", {"all": True}),
        text("Support kommt per E-Mail innerhalb von 8 Stunden [1]."),
    ])
    result = await aask("How fast is support?", graph=graph(model, store, kb), context=CTX)
    assert result.result_type == "answer"
    assert any("'delete_documents' is not allowed" in w.detail for w in result.warnings
               if w.kind == "rejected_tool_call")
    assert kb.queries == ["How fast is support?"]  # fixed routing with the question itself
    assert store.queries == []


INVALID = {
    "page 0": ({"text": "Preisliste", "page": 0}, "page: must be at least 1"),
    "page_size 51": ({"text": "Preisliste", "page_size": 51}, "page_size: must be at most 50"),
    "unknown sort": ({"text": "Preisliste", "sort": "popular"}, "sort must be one of"),
    "date_from after date_to": (
        {"date_from": "2026-05-01", "date_to": "2026-01-31"}, "is after date_to"
    ),
    "malformed date": ({"date_from": "01.02.2026"}, "must be a date written YYYY-MM-DD"),
    "date_from in the future": (
        {"date_from": f"{TODAY.year + 2}-01-01"}, "is after today"
    ),
    "unknown argument": ({"text": "x", "limit": 5}, "limit: is not a search parameter"),
}


@pytest.mark.parametrize("name", list(INVALID))
async def test_each_invalid_argument_is_rejected_and_the_router_may_correct_it(name: str) -> None:
    bad, reason = INVALID[name]
    store, kb = docs(), kb_source()
    model = ScriptedChatModel(responses=[
        tool_call("search_documents", bad, "call_bad"),
        tool_call("search_documents", {"text": "Preisliste"}, "call_good"),
    ])
    result = await aask("Find the price lists", graph=graph(model, store, kb), context=CTX)
    rejected = [w.detail for w in result.warnings if w.kind == "rejected_tool_call"]
    assert len(rejected) == 1 and reason in rejected[0]
    # the model was told why, before its second call
    feedback = [m for m in model.received[1] if m.type == "tool"]
    assert feedback and reason in str(feedback[0].content)
    # only the corrected call ran
    assert [q.text for q in store.queries] == ["Preisliste"]
    assert [q.page for q in store.queries] == [1]
    assert result.result_type == "search" and result.usage.llm_calls == 2


async def test_two_refusals_fall_back_to_the_offline_rule() -> None:
    store, kb = docs(), kb_source()
    model = ScriptedChatModel(responses=[
        tool_call("search_documents", {"page": 0}),
        tool_call("search_documents", {"page_size": 500}),
    ])
    result = await aask("Find contracts from 2026", graph=graph(model, store, kb), context=CTX)
    assert len([w for w in result.warnings if w.kind == "rejected_tool_call"]) == 2
    assert result.result_type == "search"
    [query] = store.queries  # the rule's criteria, not the refused ones
    assert (query.text, query.date_from, query.date_to, query.page, query.page_size) == (
        "contracts", date(2026, 1, 1), date(2026, 12, 31), 1, 20
    )
    assert any(t.decision == "router_gave_up" for t in result.trail)
    assert model.calls == 2


DOCUMENT_CALLS = {
    "search_documents": {"text": "support"},
    "search_and_ask": {"text": "support", "query": "support"},
}


@pytest.mark.parametrize("tool", list(DOCUMENT_CALLS))
async def test_a_document_tool_for_an_ordinary_question_is_not_followed(tool: str) -> None:
    """A small model picks a document tool for a plain question: the offline rule sees no
    document request, so the question is answered from the sources searched with it, and no
    document list is shown. No second routing call either."""
    store, kb = docs(), kb_source("pl-2026-de")
    model = ScriptedChatModel(responses=[
        tool_call(tool, DOCUMENT_CALLS[tool]),
        judged("HIGH", True, "Support kommt per E-Mail innerhalb von 8 Stunden [1]."),
        JUDGED_SUPPORTED,
    ])
    result = await aask("How fast is support?", graph=graph(model, store, kb), context=CTX)
    assert result.result_type == "answer"
    assert (result.documents, result.search) == (None, None)
    assert store.queries == []  # negative control: the document intent would search the store
    assert kb.queries == ["How fast is support?"]  # fixed routing with the question itself
    assert any(t.decision == "document_intent_not_confirmed" for t in result.trail)
    assert any(t.decision == "intent:ask" and t.detail.startswith("rule:") for t in result.trail)
    # routing, the judged answer, support check: no second routing or tool-choice call
    assert result.usage.llm_calls == model.calls == 3


async def test_a_document_tool_stands_where_the_rule_sees_a_document_request() -> None:
    """The same call for a request the rule reads as a search: the model's criteria are used."""
    store, kb = docs(), kb_source()
    model = ScriptedChatModel(responses=[tool_call("search_documents", {"text": "Preisliste"})])
    result = await aask("Find the price lists", graph=graph(model, store, kb), context=CTX)
    assert result.result_type == "search"
    assert [q.text for q in store.queries] == ["Preisliste"]  # the model's, not the rule's
    assert not any(t.decision == "document_intent_not_confirmed" for t in result.trail)


@pytest.mark.parametrize(
    ("request_text", "confirmed"),
    [
        ("Find the price lists", True),  # the rule's own search
        ("find the 2026 contracts and summarise their notice periods", True),
        ("How fast is support?", False),
        ("Can you get me a book from another library?", False),
        ("Which contracts were signed in 2026?", False),  # a question, not a find/list request
        ("wifi password?", False),  # too short to tell: the rule decides
        ("Finde die Preislisten und vergleiche den Support", True),  # not English: the model's
        ("Найди немецкие прайс-листы и сравни условия поддержки", True),
        ("Busca los contratos de 2024 y compara los precios", True),
    ],
)
def test_which_document_intents_stand(request_text: str, confirmed: bool) -> None:
    assert confirms_documents(request_text, TODAY) is confirmed


# --- the selection ------------------------------------------------------------------------------


async def test_an_empty_selection_is_not_found_and_never_the_whole_knowledge_base() -> None:
    store, kb = ScriptedDocuments([]), kb_source("pl-2026-de")
    model = ScriptedChatModel(responses=[
        tool_call("search_and_ask", {"text": "Vertrag", "date_from": "2019-01-01",
                                     "date_to": "2019-12-31", "query": "Kündigungsfrist"}),
    ])
    result = await aask("Find the 2019 contracts and tell me their notice periods",
                        graph=graph(model, store, kb), context=CTX)
    assert result.result_type == "combined"
    assert result.status == "not_found"
    assert "No document matched the criteria" in result.answer
    assert result.documents is not None and result.documents.total_items == 0
    assert kb.queries == []  # negative control: a fallback would have searched the whole KB
    assert result.citations == []
    assert model.calls == 1  # no answer call either


async def test_coverage_is_limited_when_more_documents_matched_than_the_page_holds() -> None:
    store, kb = docs(3), kb_source(*SUPPORT)
    model = ScriptedChatModel(responses=[
        tool_call("search_and_ask", {"text": "Preisliste", "page_size": 2, "query": "Support"}),
        text("Support per E-Mail innerhalb von 8 Stunden [1], per Telefon rund um die Uhr [2]."),
    ])
    result = await aask("Find the price lists and compare their support",
                        graph=graph(model, store, kb), context=CTX)
    assert result.documents is not None
    assert (result.documents.total_items, len(result.documents.items)) == (3, 2)
    assert result.coverage_limited is True
    assert "not an analysis of every matching document" in result.answer
    [args] = kb.args
    assert isinstance(args, KnowledgeBaseArgs) and args.doc_ids == list(SUPPORT)  # page 1 only


async def test_coverage_is_limited_when_a_page_document_gave_no_passage() -> None:
    store, kb = docs(2), kb_source("pl-2026-de")  # only one of the two yields evidence
    model = ScriptedChatModel(responses=[
        tool_call("search_and_ask", {"text": "Preisliste", "query": "Support"}),
        text("Support per E-Mail innerhalb von 8 Stunden [1]."),
    ])
    result = await aask("Find the price lists and summarise support",
                        graph=graph(model, store, kb), context=CTX)
    assert result.documents is not None and not result.documents.has_more
    assert result.coverage_limited is True
    assert "rests on 1 of the 2 matching document(s)" in result.answer


async def test_a_failed_document_search_is_unavailable_not_empty() -> None:
    store = ScriptedDocuments([], fail=StoreUnavailable("database down"))
    kb = kb_source("pl-2026-de")
    model = ScriptedChatModel(responses=[
        tool_call("search_and_ask", {"text": "Preisliste", "query": "Support"}),
    ])
    result = await aask("Find the price lists and summarise support",
                        graph=graph(model, store, kb), context=CTX)
    assert result.status == "unavailable"  # absence is not established
    assert result.sources[0].status == "error" and result.sources[0].error_kind == "unavailable"
    assert kb.queries == []
    assert "database down" not in result.answer  # details go to the log


# --- pages without the model ---------------------------------------------------------------------


async def test_page_two_makes_no_model_call_and_keeps_the_combined_answer() -> None:
    store, kb = docs(3), kb_source(*SUPPORT)
    model = ScriptedChatModel(responses=[
        tool_call("search_and_ask", {"text": "Preisliste", "page_size": 2, "query": "Support"}),
        text("Support per E-Mail innerhalb von 8 Stunden [1], per Telefon rund um die Uhr [2]."),
    ])
    first = await aask("Find the price lists and compare their support",
                       graph=graph(model, store, kb), context=CTX)
    calls = model.calls
    assert first.search is not None
    second = await asearch(first.search, page=2, previous=first, store=store)  # type: ignore[arg-type]
    assert model.calls == calls  # negative control: a recomputed answer would call the model
    assert second.usage.llm_calls == 0
    assert second.result_type == "combined"
    assert second.answer == first.answer and second.citations == first.citations
    assert second.documents is not None and [i.doc_id for i in second.documents.items] == [
        "extra-0"
    ]
    assert second.search is not None and second.search.page == 2
    assert (second.search.text, second.search.page_size) == ("Preisliste", 2)
    # without the earlier answer the same parameters give a plain page
    plain = await asearch(first.search, page=2, store=store)  # type: ignore[arg-type]
    assert plain.result_type == "search" and plain.usage.llm_calls == 0


# --- offline ----------------------------------------------------------------------------------


async def test_offline_rule_routes_in_the_graph_without_a_model() -> None:
    store, kb = docs(3), kb_source(*SUPPORT)
    g = graph(None, store, kb)
    listed = await aask("List the price lists from this year", graph=g, context=CTX)
    assert listed.result_type == "search" and listed.usage.llm_calls == 0
    [query] = store.queries
    assert (query.text, query.date_from) == ("price lists", date(TODAY.year, 1, 1))
    combined = await aask("find the price lists and compare their support terms", graph=g,
                          context=CTX)
    assert combined.result_type == "combined" and combined.usage.llm_calls == 0
    assert kb.queries == ["compare their support terms"]
    asked = await aask("What support does the price list include?", graph=g, context=CTX)
    assert asked.result_type == "answer" and asked.documents is None


@pytest.mark.parametrize(
    ("request_text", "intent", "criteria"),
    [
        ("find contracts from 2026", "search", {"text": "contracts", "date_from": date(2026, 1, 1),
                                                 "date_to": date(2026, 12, 31)}),
        ("Find the contracts we signed in 2026 in German", "search",
         {"text": "contracts", "language": "de", "date_from": date(2026, 1, 1)}),
        ("list all documents from last year", "search",
         {"text": None, "date_from": date(TODAY.year - 1, 1, 1),
          "date_to": date(TODAY.year - 1, 12, 31)}),
        ("show me the oldest policies", "search", {"text": "policies", "sort": "oldest"}),
        ("search for documents about backups since 2025", "search",
         {"text": "backups", "date_from": date(2025, 1, 1), "date_to": None}),
        ("find the 2026 price lists and compare their support terms", "search_and_ask",
         {"text": "price lists", "date_from": date(2026, 1, 1)}),
        ("What does the Pro plan cost?", "ask", {}),
        ("Find the Pro plan price", "ask", {}),  # no document word, no year: a question
        ("Which contracts were signed in 2026?", "ask", {}),  # not a find/list/show request
    ],
)
def test_the_offline_rule(request_text: str, intent: str, criteria: dict[str, Any]) -> None:
    decision = offline_intent(request_text, TODAY)
    assert decision.intent == intent
    for key, value in criteria.items():
        assert decision.search is not None and getattr(decision.search, key) == value, key
