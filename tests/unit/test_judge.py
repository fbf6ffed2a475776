"""The shipped offline judge: what it is, what it reads, and which questions may score it."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from evals.data import EvalQuestion
from evals.splits import article_of, select
from grounded_agent import aask, build_graph
from grounded_agent.context import Context
from grounded_agent.grounding.judge import MODEL_DIR, Judge, JudgeError, load_judge
from grounded_agent.grounding.judge.reading import Reading, below_offline, judge_veto, read
from grounded_agent.schemas import Confidence
from tests.fakes import (
    ScriptedChatModel,
    ScriptedSource,
    finding,
    found,
    judged,
    text,
    tool_call,
)

QUESTION = "How many days can I borrow a book for?"
ANSWER = "Books can be borrowed for 21 days."
OTHER = "The cafe on the second floor serves coffee and cake."


def test_the_shipped_model_is_the_one_its_manifest_names() -> None:
    manifest = load_judge().manifest.raw
    digest = hashlib.sha256((MODEL_DIR / "judge.onnx").read_bytes()).hexdigest()
    assert digest == manifest["onnx_sha256"]
    assert (MODEL_DIR / "judge.onnx").stat().st_size <= 30 * 1024 * 1024
    assert 0.0 < manifest["threshold"] < 1.0


def test_train_tune_and_test_articles_do_not_overlap() -> None:
    articles = load_judge().manifest.raw["articles"]
    train, tune, test = (set(articles[k]) for k in ("train", "tune", "test"))
    assert train and tune and test
    assert not (train & tune) and not (train & test) and not (tune & test)


def test_an_answering_sentence_scores_above_an_unrelated_one() -> None:
    right, unrelated = load_judge().score(QUESTION, [("Loans", ANSWER), ("Loans", OTHER)])
    assert 0.0 <= unrelated < right <= 1.0


def test_scores_are_the_same_batched_or_alone() -> None:
    judge = load_judge()
    alone = judge.score(QUESTION, [("Loans", OTHER)])
    batched = judge.score(QUESTION, [("Loans", ANSWER), ("Loans", OTHER)] * 20)
    assert batched[1] == pytest.approx(alone[0], abs=1e-5)
    assert len(set(round(x, 6) for x in batched)) == 2


def test_a_missing_model_is_a_judge_error_not_a_crash(tmp_path: Path) -> None:
    with pytest.raises(JudgeError, match="could not be loaded"):
        Judge.from_dir(tmp_path)


def test_the_judge_loads_and_scores_without_torch() -> None:
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "from grounded_agent.grounding.judge import load_judge\n"
        f"print(load_judge().score({QUESTION!r}, [('Loans', {ANSWER!r})])[0])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert 0.0 <= float(out.stdout.strip()) <= 1.0


LOANS = finding(source_id="loans", title="Borrowing", score=0.9,
                text=f"Members can borrow books, DVDs and board games. {ANSWER}")
CAFE = finding(source_id="cafe", title="Cafe", score=0.9, text=OTHER)
HIGH = Confidence(level="HIGH", can_answer=True, reason="rules")


def test_the_veto_keeps_an_answer_whose_quoted_sentence_answers() -> None:
    assert judge_veto(QUESTION, [LOANS], HIGH, load_judge(), 0.5, 1.0) is HIGH


def test_the_veto_turns_an_answer_quoting_no_answer_into_an_abstention() -> None:
    vetoed = judge_veto(QUESTION, [CAFE], HIGH, load_judge(), 0.5, 1.0)
    assert vetoed.level == "NOT_RELEVANT" and not vetoed.can_answer
    assert "trained judge" in vetoed.reason
    # negative control: at 0 the veto is off, and an abstention is never turned into an answer
    assert judge_veto(QUESTION, [CAFE], HIGH, load_judge(), 0.0, 1.0) is HIGH
    low = Confidence(level="NOT_RELEVANT", reason="rules")
    assert judge_veto(QUESTION, [LOANS], low, load_judge(), 0.0, 0.0) is low


class ScriptedJudge(Judge):
    """Scores sentences from a table: the decision under test is the policy, not the model."""

    def __init__(self, scores: dict[str, float]) -> None:
        self.scores = scores
        self.manifest = load_judge().manifest

    def score(self, question: str, candidates: Sequence[tuple[str, str]], quoted: int = 0
              ) -> list[float]:
        return [self.scores.get(sentence, 0.0) for _, sentence in candidates]


LIST = "Members can borrow books, DVDs and board games."
DISAGREE = ScriptedJudge({LIST: 0.2, ANSWER: 0.4, OTHER: 0.9})
LOANS_AND_CAFE = finding(source_id="loans", title="Borrowing", score=0.9,
                         text=f"{LIST} {ANSWER} {OTHER}")


def test_the_reading_scores_every_sentence_the_rules_could_quote() -> None:
    assert read(QUESTION, [LOANS_AND_CAFE], DISAGREE) == Reading(quoted=0.4, best=0.9)
    # the real judge agrees with the rules here: the quoted sentence is its best
    real = read(QUESTION, [LOANS], load_judge())
    assert real.quoted == real.best > 0.5


def test_an_answer_the_judge_rates_clearly_below_another_sentence_is_withdrawn() -> None:
    withdrawn = judge_veto(QUESTION, [LOANS_AND_CAFE], HIGH, DISAGREE, 0.0, 0.3)
    assert withdrawn.level == "NOT_RELEVANT" and "another sentence" in withdrawn.reason
    # negative controls: a margin wider than the gap keeps it, and so does 1 (off)
    assert judge_veto(QUESTION, [LOANS_AND_CAFE], HIGH, DISAGREE, 0.0, 0.6) is HIGH
    assert judge_veto(QUESTION, [LOANS_AND_CAFE], HIGH, DISAGREE, 0.0, 1.0) is HIGH
    assert judge_veto(QUESTION, [LOANS], HIGH, load_judge(), 0.0, 0.0) is HIGH


def test_a_model_answer_the_judge_rates_below_the_offline_one_gives_way() -> None:
    """Context.judge_model_answers: the offline answer quotes ANSWER (0.4); a model quoting the
    list (0.2) words a worse answer by the judge that lets both stand."""
    why = below_offline(QUESTION, [LOANS_AND_CAFE], DISAGREE, [("Borrowing", LIST)])
    assert why is not None and "0.40 vs 0.20" in why
    # negative controls: the offline answer's own sentence, or one rated higher, stands
    assert below_offline(QUESTION, [LOANS_AND_CAFE], DISAGREE, [("Borrowing", ANSWER)]) is None
    assert below_offline(QUESTION, [LOANS_AND_CAFE], DISAGREE,
                         [("Borrowing", LIST), ("Borrowing", OTHER)]) is None


def test_the_margin_is_validated() -> None:
    with pytest.raises(ValueError, match="judge_margin"):
        Context(sources=["knowledge_base"], choose_one_source=True, judge_margin=1.5)


async def test_offline_the_vetoed_question_is_not_found_with_the_passage_listed() -> None:
    kb = ScriptedSource("knowledge_base", [found("knowledge_base", LOANS)])
    graph = build_graph(chat_model=None, tools={"knowledge_base": kb.tool()})
    strict = await aask(QUESTION, graph=graph,
                        context=Context(sources=["knowledge_base"], choose_one_source=True, judge_veto=0.99))
    assert strict.status == "not_found" and strict.citations == []
    assert [p.source_id for p in strict.closest] == ["loans"]
    assert any("trained judge" in t.detail for t in strict.trail if t.node == "score_confidence")
    off = await aask(QUESTION, graph=graph,
                     context=Context(sources=["knowledge_base"], choose_one_source=True, judge_veto=0.0))
    assert off.status == "answered" and "21 days" in off.answer


async def test_with_a_model_the_judges_doubt_goes_to_the_model_instead_of_skipping_it() -> None:
    def run(veto: float, replies: list[object]):  # type: ignore[no-untyped-def]
        kb = ScriptedSource("knowledge_base", [found("knowledge_base", LOANS)])
        model = ScriptedChatModel(responses=replies)
        graph = build_graph(chat_model=model, tools={"knowledge_base": kb.tool()})
        ctx = Context(sources=["knowledge_base"], choose_one_source=True, judge_veto=veto)
        return model, aask(QUESTION, graph=graph, context=ctx)

    call, answer = tool_call("knowledge_base", {"query": "loan period"}), text(f"{ANSWER} [1]")
    model, pending = run(0.0, [call, answer])
    assert (await pending).status == "answered" and model.calls == 2  # confidence call skipped
    model, pending = run(0.99, [call, judged("HIGH", True, f"{ANSWER} [1]")])
    result = await pending  # the doubted evidence is judged by the draft call: one call, not two
    assert result.status == "answered" and model.calls == 2 and "21 days" in result.answer
    assert any(t.decision == "HIGH (model)" for t in result.trail if t.node == "draft_answer")


def _q(qid: str, doc: str | None) -> EvalQuestion:
    return EvalQuestion(id=qid, question="q", kind="answerable", answers=("a",), gold_doc_id=doc)


def test_evaluation_splits_drop_the_judges_training_articles() -> None:
    articles = load_judge().manifest.raw["articles"]
    train, tune, test = articles["train"][0], articles["tune"][0], articles["test"][0]
    qs = [_q("1", f"{train}#0"), _q("2", f"{tune}#3"), _q("3", f"{test}#1"), _q("4", "kb-doc")]
    assert [q.id for q in select(qs, "test")] == ["3", "4"]
    assert [q.id for q in select(qs, "tune")] == ["2", "4"]
    assert [q.id for q in select(qs, "untrained")] == ["2", "3", "4"]
    assert [q.id for q in select(qs, "all")] == ["1", "2", "3", "4"]
    assert article_of("Super_Bowl_50#12") == "Super_Bowl_50" and article_of("faq") is None
