"""What the offline judge reads of an answer the rules would give, and when that answer stands.

Two readers look at the same passages: the rules choose the sentences an offline answer quotes
(extractive.py), the trained judge scores every sentence they could have chosen. The answer stands
only when the judge finds the quoted sentences answer the question (`veto`) and rates no other
sentence of those passages clearly higher (`margin`): where the two readers disagree, neither is
trusted, and the agent abstains with the passages listed rather than quote the wrong one. Both
cut-offs are chosen on the judge's tuning split (benchmarks/calibrate_judge.py) and kept in its
manifest.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from grounded_agent.grounding.citations import split_claims
from grounded_agent.grounding.extractive import READ_PASSAGES, extractive_draft
from grounded_agent.grounding.instructions import looks_like_instruction
from grounded_agent.grounding.judge import SentenceJudge
from grounded_agent.grounding.sentences import answer_units
from grounded_agent.schemas import Citation, Confidence, Finding


@dataclass(frozen=True)
class Reading:
    """The judge's probability for the sentences the answer quotes (their best) and for the best
    sentence of the passages the rules chose among."""

    quoted: float
    best: float


def quoted_claims(question: str, evidence: Sequence[Finding]) -> list[tuple[Finding | None, str]]:
    """Each sentence the offline answer would quote, read by the same claim parser as every
    draft, with the passage it cites (None where it cites none of `evidence`)."""
    found = list(evidence)
    claims, _ = split_claims(extractive_draft(question, found), found)
    return [
        (found[c.markers[0] - 1] if c.markers and c.markers[0] <= len(found) else None, c.text)
        for c in claims
        if c.text.strip()
    ]


def quoted_sentences(question: str, evidence: Sequence[Finding]) -> list[tuple[str, str]]:
    """(title, sentence) of each sentence the offline answer would quote."""
    return [(f.title if f else "", text) for f, text in quoted_claims(question, evidence)]


def candidate_sentences(evidence: Sequence[Finding]) -> list[tuple[str, str]]:
    """(title, sentence) of every sentence the rules could have quoted."""
    return [
        (f.title, s)
        for f in list(evidence)[:READ_PASSAGES]
        for s in answer_units(f.text)
        if not looks_like_instruction(s)
    ]


def read(question: str, evidence: Sequence[Finding], judge: SentenceJudge,
         quoted: Sequence[tuple[str, str]] | None = None) -> Reading:
    """The judge's reading of the sentences an answer quotes (the offline answer's when None)
    against every sentence the rules could have quoted."""
    said = quoted_sentences(question, evidence) if quoted is None else quoted
    (reading,) = _readings(question, evidence, judge, [said])
    return reading


def judged_pairs(evidence: Sequence[Finding], answers: Sequence[Sequence[tuple[str, str]]]
                 ) -> tuple[list[list[tuple[str, str]]], list[tuple[str, str]], int]:
    """Each answer's quoted sentences as candidates, and every (title, sentence) a judge scores:
    the quoted ones first (how many: the last value), then the rest of the candidates."""
    candidates = candidate_sentences(evidence)
    # a claim comes back from the parser with its spacing changed ("days ." for "days."): the
    # candidate it was quoted from is scored, so one sentence never gets two scores
    as_written = {(title, "".join(s.split())): (title, s) for title, s in candidates}
    chosen = [[as_written.get((title, "".join(s.split())), (title, s)) for title, s in said]
              for said in answers]
    own = list(dict.fromkeys(p for c in chosen for p in c))
    return chosen, list(dict.fromkeys([*own, *candidates])), len(own)


def _readings(question: str, evidence: Sequence[Finding], judge: SentenceJudge,
              answers: Sequence[Sequence[tuple[str, str]]]) -> list[Reading]:
    """One reading per answer's quoted sentences, the candidates scored once for all."""
    chosen, pairs, own = judged_pairs(evidence, answers)
    scores = dict(zip(pairs, judge.score(question, pairs, quoted=own), strict=True))
    best = max(scores.values(), default=0.0)
    return [Reading(quoted=max((scores[p] for p in c), default=0.0), best=best) for c in chosen]


def below_offline(question: str, evidence: Sequence[Finding], judge: SentenceJudge,
                  quoted: Sequence[tuple[str, str]]) -> str | None:
    """Why a model's answer (`quoted`) gives way to the offline answer for the same evidence: the
    judge rates the offline answer's sentences above the model's. None where it does not: an
    answer the model words no worse than the offline one, by the judge that lets both stand."""
    mine, offline = _readings(question, evidence, judge,
                              [quoted, quoted_sentences(question, evidence)])
    return _below(mine, offline)


def model_doubt(question: str, evidence: Sequence[Finding], judge: SentenceJudge, veto: float | None,
                margin: float | None, quoted: Sequence[tuple[str, str]]) -> tuple[str, str] | None:
    """(decision, why) where a model's answer (`quoted`) cannot stand: the judge does not let its
    sentences stand (`doubt`), or rates the offline answer's above them (`below_offline`); one
    scoring pass for both."""
    mine, offline = _readings(question, evidence, judge,
                              [quoted, quoted_sentences(question, evidence)])
    why = _doubted(mine, *_cutoffs(judge, veto, margin), judge.name)
    if why is not None:
        return "model_answer_vetoed", why
    below = _below(mine, offline)
    return None if below is None else ("model_answer_below_offline", below)


def _below(mine: Reading, offline: Reading) -> str | None:
    if mine.quoted >= offline.quoted:
        return None
    return (f"the trained judge rates the sentences the offline answer quotes above the model's "
            f"({offline.quoted:.2f} vs {mine.quoted:.2f})")


def judge_veto(
    question: str,
    evidence: Sequence[Finding],
    conf: Confidence,
    judge: SentenceJudge,
    veto: float | None = None,
    margin: float | None = None,
) -> Confidence:
    """An answer the rules allow, unless the judge finds its quoted sentences do not answer, or
    finds another sentence answers clearly better (the manifest's cut-offs when None)."""
    if not conf.can_answer:
        return conf
    why = doubt(question, evidence, judge, veto, margin)
    return conf if why is None else Confidence(level="NOT_RELEVANT", reason=why)


def doubt(
    question: str,
    evidence: Sequence[Finding],
    judge: SentenceJudge,
    veto: float | None = None,
    margin: float | None = None,
    quoted: Sequence[tuple[str, str]] | None = None,
) -> str | None:
    """Why the judge does not let the sentences stand (an offline answer's, or `quoted`), or None
    where it does or both cut-offs are off."""
    cut, gap = _cutoffs(judge, veto, margin)
    if cut <= 0.0 and gap >= 1.0:  # both off: nothing to score
        return None
    return _doubted(read(question, evidence, judge, quoted), cut, gap, judge.name)


def _cutoffs(judge: SentenceJudge, veto: float | None, margin: float | None) -> tuple[float, float]:
    """The veto and margin asked for, the manifest's where None."""
    return (judge.manifest.veto if veto is None else veto,
            judge.manifest.margin if margin is None else margin)


def _doubted(reading: Reading, cut: float, gap: float, name: str) -> str | None:
    if reading.quoted < cut:
        return (f"the {name} finds the sentences an answer would quote do not answer it "
                f"({reading.quoted:.2f} < {cut:.2f})")
    if reading.best - reading.quoted > gap:
        return (f"the {name} rates another sentence of the passages above the ones an "
                f"answer would quote ({reading.best:.2f} vs {reading.quoted:.2f}): the reading "
                f"is not sure which one answers")
    return None


def model_sentences(text: str, citations: Sequence[Citation]) -> list[tuple[str, str]]:
    """(title, sentence) of each claim of a checked answer (its markers number `citations`)."""
    titles = {c.n: c.title for c in citations}
    claims, _ = split_claims(text)
    return [(titles.get(c.markers[0], "") if c.markers else "", c.text)
            for c in claims if c.text.strip() and not c.lead_in]
