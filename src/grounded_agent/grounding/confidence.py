"""The offline judgement of one question's evidence: relevance bands, missing names, the asked-for
kind of answer, and the learned judge's veto over the sentences an answer would quote."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from grounded_agent.context import Context
from grounded_agent.grounding.extractive import extractive_draft
from grounded_agent.grounding.judge import Judge, SentenceJudge
from grounded_agent.grounding.judge.gate import LocalGate, gate_verdict, load_gate
from grounded_agent.grounding.judge.local import LocalJudgeUnavailable
from grounded_agent.grounding.judge.reading import judge_veto
from grounded_agent.grounding.scoring import local_confidence
from grounded_agent.schemas import Confidence, Finding


@dataclass
class LocalJudgement:
    """The offline judgement of one question's evidence, over the sentences an answer would quote
    (built once: the offline scorer and the draft without a model read them; the judge's veto
    reads them in judge/reading.py)."""

    question: str
    evidence: list[Finding]
    ctx: Context
    get_judge: Callable[[], Judge]
    get_local_judge: Callable[[], SentenceJudge | None] | None = None
    """Offline, opt-in: the local judge that decides in the trained judge's place (None, or a
    factory returning None: the trained judge alone)."""
    get_gate: Callable[[], LocalGate] = load_gate
    """The local judge's gate (Context.local_judge_rule 'gate'): the shipped one by default."""
    extract: str = field(init=False)
    judged_by: str = field(init=False, default="")
    """For the trail: which judge decided the last `vetted`, and why where it fell back."""

    def __post_init__(self) -> None:
        self.extract = extractive_draft(self.question, self.evidence)

    def gated(self) -> Confidence | None:
        """The local gate's verdict on the extract of the evidence, where the run asks
        for a local judge with the rule 'gate' and the extract cites a passage; None otherwise,
        and where the local judge fails (the trail says so): the trained judge's path decides."""
        if self.get_local_judge is None or self.ctx.local_judge_rule != "gate":
            return None
        local = self.get_local_judge()
        if local is None:
            return None
        try:
            out = gate_verdict(self.question, self.evidence, self.ctx, self.get_judge(), local,
                               self.get_gate())
        except LocalJudgeUnavailable as exc:
            self._fell_back(exc)
            return None
        if out is not None:
            self._decided("local gate", local)
        return out

    def vetted(self, conf: Confidence, among: list[Finding]) -> Confidence:
        """`conf` unless a judge doubts the sentences its answer would quote: the local judge
        with its own cut-offs where there is one, its rule is 'veto' and it answers, else the
        trained judge with the run's (a local judge that fails gives the trained judge's outcome,
        never its own)."""
        local = (self.get_local_judge() if self.get_local_judge is not None
                 and self.ctx.local_judge_rule == "veto" else None)
        if local is not None and conf.can_answer:
            try:
                out = judge_veto(self.question, among, conf, local)
            except LocalJudgeUnavailable as exc:
                self._fell_back(exc)
            else:
                self._decided("local judge", local)
                return out
        return judge_veto(self.question, among, conf, self.get_judge(), self.ctx.judge_veto,
                          self.ctx.judge_margin)

    def _decided(self, who: str, local: SentenceJudge) -> None:
        read = getattr(local, "read_last", None)
        self.judged_by = f"{who} decided" if read is None else f"{who} decided ({read} sentences read)"

    def _fell_back(self, exc: LocalJudgeUnavailable) -> None:
        self.judged_by = f"local judge unavailable ({exc}): the trained judge decided"

    def verdict(self) -> Confidence:
        """The offline verdict; what reached the model only for the model to judge does not
        count without it."""
        kept = [e for e in self.evidence if e.score >= self.ctx.low_threshold]
        quoted = (self.extract if len(kept) == len(self.evidence)
                  else extractive_draft(self.question, kept))
        conf = local_confidence(self.question, kept, self.ctx.found_threshold,
                                self.ctx.low_threshold, quoted)
        return offline_verdict(self.vetted(conf, kept))


def offline_verdict(conf: Confidence) -> Confidence:
    """Offline, weak evidence is final: the local rewrite re-asks with the question's own words,
    and on five evaluated knowledge bases its second attempt answered nothing right (5 of 106
    second attempts answered, all wrongly). Only a model's rewrite can find other words."""
    if conf.level != "LOW":
        return conf
    return Confidence(level="NOT_RELEVANT", reason=f"{conf.reason}; no better wording offline")


