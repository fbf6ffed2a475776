"""Where offline answers to answerable questions are lost (issue 9), per knowledge base.

The thresholds-only path (the grounding check alone, `evals.baselines`) is replayed on one top-k
search per question, and every answerable question lands in one row:

- correct: the answer holds a gold answer and cites the gold document (at the gold version);
- abstained, gold first: the best relevance is under `found_threshold` although the top passage
  is the gold document (the relevance gate, blind to paraphrase);
- abstained, otherwise: under the threshold with the gold document lower or not retrieved;
- wrong, sentence choice: a quoted passage holds the gold answer, the quoted sentences do not;
- wrong, passage choice: another of the three passages the answer chooses from holds it;
- wrong, out of reach: only a passage below those three holds it;
- wrong, not retrieved: no usable passage of the gold document holds the answer string (retrieval,
  or an answer the passage words differently from the gold string);
- removed by the check: the draft held the gold answer, the citation check took it out.

Below the rows, "correct with no gate": the same extraction answering every question from every
passage retrieved, the most any relevance gate or confidence step could reach.

`--sentences N` quotes N sentences instead of 2 (the agent's setting). Gold answers are graded by
containment, so a longer answer is "correct" more often; compare sentence and passage choices
at the same N.

Needs nothing but the checkout for the project's own knowledge bases (benchmarks/kbs/); the
SQuAD-derived sets (and their swapped roles) are added where the data is found (--data, default
$GROUNDED_AGENT_EVAL_DATA or ../shared/eval/squad), with `--sample` questions per kind and seed.

    .venv/bin/python benchmarks/bench_extraction.py [--seeds 0 1 2] [--sentences 2] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the evaluation harness lives beside the package, not in it

from evals.cli import build_parser, resolve_sets  # noqa: E402
from evals.data import EvalQuestion, EvalSet, stratified_sample  # noqa: E402
from evals.grading import contains_answer, gold_citation  # noqa: E402
from grounded_agent.context import Context  # noqa: E402
from grounded_agent.grounding.citations import check_answer  # noqa: E402
from grounded_agent.grounding.extractive import extractive_draft  # noqa: E402
from grounded_agent.schemas import Finding  # noqa: E402

ROWS = (
    "correct",
    "abstained, gold first",
    "abstained, otherwise",
    "wrong, sentence choice",
    "wrong, passage choice",
    "wrong, out of reach",
    "wrong, not retrieved",
    "removed by the check",
)
UNGATED = "correct with no gate"
"""Not a row of the partition: the same extraction from every passage retrieved, every question
answered; what any gate could at most reach."""
CHOICE = 3
"""The answer quotes one of the first three usable passages (`extractive_draft`)."""
_MARKER = re.compile(r"\[(\d{1,3})\]")


def default_data() -> Path:
    raw = os.environ.get("GROUNDED_AGENT_EVAL_DATA", "").strip()
    return Path(raw).expanduser() if raw else ROOT.parent / "shared" / "eval" / "squad"


def _is_gold(q: EvalQuestion, f: Finding) -> bool:
    if f.source_id != q.gold_doc_id:
        return False
    return q.gold_version is None or f.version == q.gold_version


def classify(q: EvalQuestion, findings: Sequence[Finding], ctx: Context, sentences: int) -> str:
    """The row of one answerable question (see the module docstring)."""
    best = max((f.score for f in findings), default=None)
    if best is None or best < ctx.found_threshold:
        first = bool(findings) and findings[0].source_id == q.gold_doc_id
        return ROWS[1] if first else ROWS[2]
    usable = [f for f in findings if f.score >= ctx.low_threshold]
    draft = extractive_draft(q.question, usable, max_sentences=sentences)
    checked = check_answer(draft, usable)
    cites_gold, _ = gold_citation(q, [c.source_id for c in checked.citations],
                                  [c.version for c in checked.citations])
    if cites_gold and contains_answer(checked.text, q.answers):
        return ROWS[0]
    if contains_answer(draft, q.answers) and any(_is_gold(q, usable[int(n) - 1]) for n in
                                                 _MARKER.findall(draft) if int(n) <= len(usable)):
        return ROWS[7]
    holding = [i for i, f in enumerate(usable) if _is_gold(q, f) and contains_answer(f.text, q.answers)]
    quoted = {int(n) - 1 for n in _MARKER.findall(draft)}
    if any(i in quoted for i in holding):
        return ROWS[3]
    if any(i < CHOICE for i in holding):
        return ROWS[4]
    if holding:
        return ROWS[5]
    return ROWS[6]


async def measure(label: str, eval_set: EvalSet, questions: Sequence[EvalQuestion],
                  sentences: int) -> Counter[str]:
    from evals.harness import aingest, open_eval_store

    ctx = Context()
    ungated = Context(found_threshold=0.0, low_threshold=0.0)
    store = open_eval_store(eval_set)
    counts: Counter[str] = Counter()
    try:
        await aingest(eval_set, store, progress=False)
        for q in questions:
            findings = await store.asearch(q.question, k=ctx.top_k)
            counts[classify(q, findings, ctx, sentences)] += 1
            counts[UNGATED] += classify(q, findings, ungated, sentences) == ROWS[0]
    finally:
        await store.aclose()
    print(f"{label}: {_total(counts)} answerable questions", file=sys.stderr, flush=True)
    return counts


def _answerable(questions: Sequence[EvalQuestion]) -> list[EvalQuestion]:
    return [q for q in questions if q.kind == "answerable"]


def sets(args: argparse.Namespace) -> list[tuple[str, EvalSet, list[EvalQuestion]]]:
    """The knowledge bases `make eval` runs (its own discovery), with their answerable questions:
    a SQuAD set's are the union of the seeds' samples."""
    eval_args = build_parser().parse_args([
        "--all", "--data", str(args.data), "--kbs-root", str(args.kbs_root),
        "--sample", str(args.sample),
    ])
    specs, skipped = resolve_sets(eval_args)
    for reason in skipped:
        print(f"skipped {reason}", file=sys.stderr)
    out: list[tuple[str, EvalSet, list[EvalQuestion]]] = []
    for spec in specs:
        es = spec.load()
        if not es.sampled:
            out.append((spec.label, es, _answerable(es.questions)))
            continue
        chosen: dict[str, EvalQuestion] = {}
        for seed in args.seeds:
            for q in stratified_sample(es.questions, args.sample, seed, kinds=("answerable",)):
                chosen.setdefault(q.id, q)
        out.append((spec.label, es, list(chosen.values())))
    return out


def _total(counts: Counter[str]) -> int:
    return sum(counts[row] for row in ROWS)


def render(results: dict[str, Counter[str]]) -> str:
    labels = list(results)
    width = max(len(r) for r in ROWS)
    head = f"{'':{width}s} " + " ".join(f"{lab[:14]:>14s}" for lab in labels)
    lines = [head, "-" * len(head)]
    for row in ROWS:
        cells = []
        for lab in labels:
            n, total = results[lab][row], _total(results[lab])
            cells.append(f"{n:5d} {n / total:6.1%} " if total else f"{'-':>14s}")
        lines.append(f"{row:{width}s} " + " ".join(f"{c:>14s}" for c in cells))
    totals = " ".join(f"{_total(results[lab]):>14d}" for lab in labels)
    lines.append(f"{'questions':{width}s} {totals}")
    ceiling = [f"{results[lab][UNGATED]:5d} {results[lab][UNGATED] / _total(results[lab]):6.1%} "
               if _total(results[lab]) else f"{'-':>14s}" for lab in labels]
    lines.append(f"{UNGATED:{width}s} " + " ".join(f"{c:>14s}" for c in ceiling))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=default_data(),
                        help="folder of the SQuAD-derived set (skipped when absent)")
    parser.add_argument("--kbs-root", type=Path, default=ROOT / "benchmarks" / "kbs")
    parser.add_argument("--sample", type=int, default=300, help="SQuAD questions per seed")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--sentences", type=int, default=2, help="sentences quoted (agent: 2)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.sentences < 1:
        parser.error("--sentences must be at least 1")

    async def run() -> dict[str, Counter[str]]:
        return {label: await measure(label, es, qs, args.sentences)
                for label, es, qs in sets(args)}

    results = asyncio.run(run())
    if args.json:
        print(json.dumps({k: {row: v[row] for row in (*ROWS, UNGATED)} for k, v in results.items()},
                         indent=2))
    else:
        print(f"thresholds-only path, {args.sentences} sentence(s) quoted; answerable questions")
        print(render(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
