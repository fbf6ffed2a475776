"""The local judge's gate (issue 47): whether the offline extract of the evidence stands,
decided by a logistic gate over the agent's own signals of its first attempt and the local judge's
reading of the same sentences.

The veto and margin (judge.reading) ask one question of one reader. The ceiling benchmark
(benchmarks/bench_gate_ceiling.py) found that the signals the offline agent already has (relevance,
its gap to the second passage, coverage, missing names, its local verdict, the trained judge's
reading) and the local judge's reading separate right extracts from wrong ones better together
than any of them alone. The gate's weights and its cut-off were fitted on the tuning data only, by
a rule fixed before the run (local_gate.json: `rule`), and are shipped beside the local judge's
cut-offs; the features are computed here for the agent and for the benchmark alike, so the
measurement is of this code.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from grounded_agent.context import Context
from grounded_agent.grounding.citations import check_answer
from grounded_agent.grounding.extractive import extractive_draft
from grounded_agent.grounding.judge import Judge, SentenceJudge
from grounded_agent.grounding.judge.reading import read
from grounded_agent.grounding.scoring import decisive, local_confidence, signals
from grounded_agent.schemas import Confidence, Finding

GATE = Path(__file__).resolve().parent / "local_gate.json"
FEATURES = ("relevance", "top_gap", "coverage", "top_coverage", "missing_names", "local_verdict",
            "judge_quoted", "judge_best", "judge_lead", "agent_answers")
"""The agent's own signals of its first attempt, in the gate's order."""
LOCAL_FEATURES = ("local_judge_quoted", "local_judge_best", "local_judge_lead")
"""The local judge's reading of the same sentences."""


def first_attempt(question: str, found: list[Finding], ctx: Context
                  ) -> tuple[list[Finding], Confidence, bool]:
    """What the offline agent keeps of a search, its local verdict, and whether it answers."""
    usable = [f for f in found if f.score >= ctx.low_threshold]
    verdict = decisive(question, usable, ctx.found_threshold, ctx.low_threshold)
    conf = verdict[0] if verdict else local_confidence(
        question, usable, ctx.found_threshold, ctx.low_threshold)
    return usable, conf, bool(usable) and conf.can_answer and conf.level in ("HIGH", "MEDIUM")


def agent_signals(question: str, found: list[Finding], ctx: Context, judge: Judge
                  ) -> tuple[list[float], bool]:
    """The agent's own signals (FEATURES) of the passages found, and whether its gate (the rules,
    then the trained judge's veto and margin at the manifest's cut-offs) answers."""
    s = signals(question, found)
    reading = read(question, found, judge)
    usable, conf, verdict = first_attempt(question, found, ctx)
    kept = read(question, usable, judge) if verdict else reading  # it reads the passages it kept
    agent = (verdict and kept.quoted >= judge.manifest.veto
             and kept.best - kept.quoted <= judge.manifest.margin)
    gap = found[0].score - (found[1].score if len(found) > 1 else 0.0) if found else 0.0
    return [s.best_score, gap, s.coverage, s.top_coverage, float(bool(s.missing)),
            float(conf.can_answer), reading.quoted, reading.best, reading.best - reading.quoted,
            float(agent)], agent


def local_signals(question: str, found: list[Finding], local: SentenceJudge) -> list[float]:
    """The local judge's reading (LOCAL_FEATURES) of the sentences the shipped judge read;
    raises what the local judge raises (LocalJudgeUnavailable)."""
    theirs = read(question, found, local)
    return [theirs.quoted, theirs.best, theirs.best - theirs.quoted]


def extract_cites(question: str, found: list[Finding]) -> bool:
    """Whether the offline extract of these passages cites any: where none, no gate decides."""
    return bool(check_answer(extractive_draft(question, found), found).citations)


@dataclass(frozen=True)
class LocalGate:
    """P(the extract is right) = logistic(weights . standardised signals + intercept); the extract
    stands at `cut` or above."""

    features: tuple[str, ...]
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    weights: tuple[float, ...]
    intercept: float
    cut: float

    def __post_init__(self) -> None:
        n = len(self.features)
        if not (len(self.mean) == len(self.scale) == len(self.weights) == n) or n == 0:
            raise ValueError("a gate needs one mean, scale and weight per feature")
        if any(s <= 0.0 for s in self.scale) or not 0.0 < self.cut < 1.0:
            raise ValueError("a gate's scales must be above 0 and its cut-off between 0 and 1")

    def prob(self, x: Sequence[float]) -> float:
        if len(x) != len(self.features):
            raise ValueError(f"the gate reads {len(self.features)} signals, not {len(x)}")
        z = self.intercept + sum(w * (v - m) / s for w, v, m, s in
                                 zip(self.weights, x, self.mean, self.scale, strict=True))
        return 1.0 / (1.0 + math.exp(-z)) if z > -700 else 0.0

    @classmethod
    def from_dict(cls, raw: dict[str, object]) -> LocalGate:
        def floats(key: str) -> tuple[float, ...]:
            value = raw[key]
            if not isinstance(value, list):
                raise ValueError(f"local gate: {key} must be a list")
            return tuple(float(v) for v in value)

        names = raw["features"]
        if not isinstance(names, list):
            raise ValueError("local gate: features must be a list")
        return cls(features=tuple(str(n) for n in names), mean=floats("mean"),
                   scale=floats("scale"), weights=floats("weights"),
                   intercept=float(str(raw["intercept"])), cut=float(str(raw["cut"])))


@cache
def load_gate(path: Path = GATE) -> LocalGate:
    """The shipped gate; its signals must be the ones computed here, in this order."""
    gate = LocalGate.from_dict(json.loads(path.read_text(encoding="utf-8")))
    if gate.features != (*FEATURES, *LOCAL_FEATURES):
        raise ValueError(f"{path.name} was fitted on other signals: {gate.features}")
    return gate


def gate_verdict(question: str, found: list[Finding], ctx: Context, judge: Judge,
                 local: SentenceJudge, gate: LocalGate) -> Confidence | None:
    """The gate's verdict on the extract of `found` (the evidence check_grounding keeps); None
    where that extract cites nothing (no gate decides there). Raises what the local judge raises:
    the caller then takes the trained judge's outcome."""
    if not found or not extract_cites(question, found):
        return None
    mine, _ = agent_signals(question, found, ctx, judge)
    p = gate.prob([*mine, *local_signals(question, found, local)])
    if p >= gate.cut:
        return Confidence(level="HIGH", can_answer=True,
                          reason=f"the local gate finds the quoted sentences answer "
                          f"(P {p:.2f} >= {gate.cut:.2f})")
    return Confidence(level="NOT_RELEVANT",
                      reason=f"the local gate doubts the quoted sentences answer "
                      f"(P {p:.2f} < {gate.cut:.2f})")
