"""The local judge's gate (grounding/judge/gate.py): the shipped file is read and checked, a
malformed one is refused with a clear error, and the signals are those the gate was fitted on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from grounded_agent.context import Context
from grounded_agent.grounding.judge import load_judge
from grounded_agent.grounding.judge.gate import (
    FEATURES,
    GATE,
    LOCAL_FEATURES,
    LocalGate,
    agent_signals,
    gate_verdict,
    load_gate,
)
from grounded_agent.grounding.judge.local import LocalJudgeUnavailable
from tests.fakes import finding

QUESTION = "How many days can I borrow a book for?"
LOANS = finding(source_id="loans", title="Borrowing", score=0.9,
                text="Members can borrow books and games. Books can be borrowed for 21 days.")
FEES = finding(source_id="fees", title="Late fees", score=0.85,
               text="A book returned late costs 20 cents a day. Fees are paid at the desk.")
OFF_TOPIC = finding(source_id="cafe", title="Cafe", score=0.2, text="The cafe serves coffee.")


class Reads:
    """A local judge that gives every sentence the same score (or fails), counting its calls."""

    name = "scripted"
    veto = 0.0
    margin = 1.0

    def __init__(self, p: float | None) -> None:
        self.p, self.calls = p, 0

    def score(self, question: str, candidates: list[tuple[str, str]], quoted: int = 0
              ) -> list[float]:
        self.calls += 1
        if self.p is None:
            raise LocalJudgeUnavailable("refused")
        return [self.p] * len(candidates)


def test_the_shipped_gate_reads_the_signals_computed_here() -> None:
    gate = load_gate()
    assert gate.features == (*FEATURES, *LOCAL_FEATURES) and 0.0 < gate.cut < 1.0
    raw = json.loads(GATE.read_text(encoding="utf-8"))
    assert "Fixed before the run" in raw["rule"] and "qwen2.5-coder-1.5b" in raw["model"]


def test_a_malformed_gate_is_refused(tmp_path: Path) -> None:
    raw = json.loads(GATE.read_text(encoding="utf-8"))
    with pytest.raises(ValueError, match="one mean, scale and weight per feature"):
        LocalGate.from_dict({**raw, "weights": raw["weights"][:-1]})
    with pytest.raises(ValueError, match="scales must be above 0"):
        LocalGate.from_dict({**raw, "scale": [0.0] * len(raw["scale"])})
    with pytest.raises(ValueError, match="must be a list"):
        LocalGate.from_dict({**raw, "mean": "0.5"})
    other = tmp_path / "gate.json"
    other.write_text(json.dumps({**raw, "features": raw["features"][::-1]}), encoding="utf-8")
    with pytest.raises(ValueError, match="fitted on other signals"):
        load_gate(other)
    with pytest.raises(ValueError, match="reads 13 signals, not 2"):
        load_gate().prob([0.0, 1.0])


def test_the_agents_own_signals_and_its_gate() -> None:
    ctx = Context(sources=["knowledge_base"])
    x, answers = agent_signals(QUESTION, [LOANS, FEES], ctx, load_judge())
    assert len(x) == len(FEATURES) and answers
    assert x[0] == pytest.approx(0.9) and x[1] == pytest.approx(0.05)  # relevance and its gap
    assert x[FEATURES.index("agent_answers")] == 1.0
    # nothing the rules would answer from: the agent's gate does not answer
    x, answers = agent_signals(QUESTION, [OFF_TOPIC], ctx, load_judge())
    assert not answers and x[FEATURES.index("agent_answers")] == 0.0


def test_the_gate_follows_the_local_judges_reading_and_never_turns_a_failure_into_a_verdict(
) -> None:
    ctx, judge, gate = Context(sources=["knowledge_base"]), load_judge(), load_gate()
    found = [LOANS, FEES]
    yes = gate_verdict(QUESTION, found, ctx, judge, Reads(0.97), gate)
    no = gate_verdict(QUESTION, found, ctx, judge, Reads(0.02), gate)
    assert yes is not None and yes.can_answer and yes.level == "HIGH"
    assert no is not None and not no.can_answer and no.level == "NOT_RELEVANT"
    # negative control: a judge that is down raises; it is neither a "no" nor a "yes"
    with pytest.raises(LocalJudgeUnavailable):
        gate_verdict(QUESTION, found, ctx, judge, Reads(None), gate)
    # where the extract cites nothing, no gate decides and no local judge is asked
    silent = Reads(0.97)
    assert gate_verdict(QUESTION, [], ctx, judge, silent, gate) is None and silent.calls == 0
