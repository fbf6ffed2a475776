"""LLM-mode evaluation through the model double: how many of an oracle's correct drafts reach the
user, per citation style (issue 14).

    python benchmarks/bench_llm_oracle.py [--sample 300] [--seed 0] [--styles STYLE ...] [--json]
        [--kb-dir benchmarks/kbs/NAME ...] [--model-low-threshold 0.35]

The double (tests/support/openai_double.py) runs on a loopback port in "oracle" mode: it calls
the knowledge base with the question, rates the evidence HIGH when the gold passage is among it
(LOW otherwise), and answers by quoting the sentence of the gold passage that holds a gold answer,
with the marker number that passage has in the sources block, in the style under test (a second
sentence quoting another source follows, so a marker handed to the wrong sentence shows). For
each style, `python -m evals --kinds answerable --systems full_graph --json` runs as a
subprocess with OPENAI_BASE_URL pointing at the double; it ingests the SQuAD knowledge base into
its own table (once; later runs reuse it) in the configured store.

Per style, the table gives:
- answered with the gold citation: share of all questions;
- reached: of the oracle's correct drafts (the gold passage was in the sources and quoted), the
  share answered with the gold citation on the quoted sentence: the pipeline's own loss is 1 - it;
- misattributed: answered questions where a surviving sentence carries a marker it did not close
  in the draft (target 0);
- model calls per question, mean, best and worst, as the agent counts them (usage.llm_calls) and
  as the double received them (HTTP requests, OpenAI-client retries included), and the requests
  per question by the step that sent them.

Needs the SQuAD-derived data (--data, default $GROUNDED_AGENT_EVAL_DATA or ../shared/eval/squad),
or project knowledge bases (--kb-dir, every answerable question; the checkout has them). There
"answered with the gold citation" is what LLM mode can reach with a judge that is always right:
the share of answerable questions whose right document gets to the model at all.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the double lives in the repository's tests, not in the package

from tests.support.openai_double import STYLES, Behaviour, ModelDouble, Oracle  # noqa: E402

ANSWERED = frozenset({"answered", "answered_with_caveat", "partial"})
TARGET_REACHED = 0.99
_GROUP = re.compile(r"\s*[.!?]?[\"'”’)]*\s*((?:\[\d{1,3}(?:\s*[,\-–]\s*\d{1,3})*\]\s*)+)")


def default_data() -> Path:
    raw = os.environ.get("GROUNDED_AGENT_EVAL_DATA", "").strip()
    return Path(raw).expanduser() if raw else ROOT.parent / "shared" / "eval" / "squad"


def attached(answer: str, sentence: str) -> list[int] | None:
    """Marker numbers closing `sentence` in the final answer; None when the sentence is gone."""
    # the answer node keeps a sentence without its closing ";" or ":" and without **emphasis**
    core = re.sub(r"\*\*|__", "", " ".join(sentence.split()))
    core = re.sub(r"\s*[.!?;:,][\"')\]]*$", "", core)
    flat = " ".join(answer.split())
    at = flat.find(core)
    if at < 0:
        return None
    m = _GROUP.match(flat, at + len(core))
    numbers: list[int] = []
    for group in re.findall(r"\[([^\]]*)\]", m.group(1) if m else ""):
        for part in re.split(r"\s*,\s*", group):
            lo, _, hi = part.partition("-")
            numbers.extend(range(int(lo), int(hi or lo) + 1))
    return numbers


def judge_row(row: dict[str, Any], draft: dict[str, Any] | None) -> dict[str, bool]:
    """reached: the gold sentence is in the answer, closed by the gold citation;
    misattributed: some quoted sentence carries a citation its draft did not give it."""
    out = {"correct_draft": bool(draft and draft.get("correct")), "reached": False,
           "misattributed": False}
    if row["status"] not in ANSWERED or not draft or not draft.get("items"):
        return out
    cited: list[str] = list(row.get("cited") or [])
    for i, item in enumerate(draft["items"]):
        got = attached(row.get("answer") or "", item["sentence"])
        if got is None:
            continue
        ids = {cited[n - 1] for n in got if 1 <= n <= len(cited)}
        # a source the double could not map to a document gets no verdict
        if None not in item["doc_ids"] and ids - set(item["doc_ids"]):
            out["misattributed"] = True
        if i == 0 and draft.get("correct") and draft["gold_doc_id"] in ids:
            out["reached"] = True
    return out


def run_style(
    double: ModelDouble, style: str, args: argparse.Namespace, base_url: str, workdir: Path,
    kb_dir: Path | None = None,
) -> dict[str, Any]:
    double.configure(mode="oracle", style=style)  # a fresh log and fresh drafts
    report = workdir / (f"report-{style}" if kb_dir is None else f"report-{kb_dir.name}-{style}")
    env = {**os.environ, "OPENAI_BASE_URL": base_url, "OPENAI_API_KEY": "test",
           "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    if args.home:
        env["GROUNDED_AGENT_HOME"] = str(args.home)
    if kb_dir is None:
        corpus = ["--questions", str(args.data / "questions.jsonl"),
                  "--kb", str(args.data / "kb_corpus.jsonl"),
                  "--sample", str(args.sample), "--seed", str(args.seed)]
    else:  # a project knowledge base: every question is asked
        corpus = ["--kb-dir", str(kb_dir)]
    floor = ([] if args.model_low_threshold is None
             else ["--model-low-threshold", str(args.model_low_threshold)])
    cmd = [
        sys.executable, "-m", "evals",  # the harness lives in the checkout (cwd=ROOT)
        *corpus, "--kinds", *args.kinds, *floor,
        "--systems", "full_graph", "--json", "--report", str(report), "--no-plots",
        "--concurrency", str(args.concurrency),
    ]
    started = time.perf_counter()
    done = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, check=False,
                          timeout=args.timeout)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"eval failed for {style} (exit {done.returncode}):\n{done.stderr[-3000:]}")
    rows = [json.loads(line) for path in sorted(report.rglob("questions.jsonl"))
            for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    rows = [r for r in rows if r.get("system") == "full_graph"]
    assert double.oracle is not None
    drafts = dict(double.oracle.drafts)
    judged = [judge_row(r, drafts.get(r["id"])) for r in rows]
    with (report / "drafts.jsonl").open("w", encoding="utf-8") as fh:  # what the oracle wrote
        for r, j in zip(rows, judged, strict=True):
            fh.write(json.dumps({"id": r["id"], **j, "draft": drafts.get(r["id"]),
                                 "status": r["status"], "answer": r.get("answer")}) + "\n")
    http = Counter(req["question"] for req in double.requests)
    n = len(rows)
    correct = [j for j in judged if j["correct_draft"]]
    calls = [int(r["llm_calls"]) for r in rows]
    requests = [http.get(r["question"], 0) for r in rows]
    return {
        "set": "squad" if kb_dir is None else kb_dir.name,
        "style": style,
        "n": n,
        "answered_gold": sum(1 for r in rows if r["status"] in ANSWERED and r["cites_gold"]) / n,
        "correct_drafts": len(correct),
        "reached": (sum(1 for j in correct if j["reached"]) / len(correct)) if correct else None,
        "misattributed": sum(1 for j in judged if j["misattributed"]),
        "statuses": dict(Counter(r["status"] for r in rows)),
        "calls_mean": statistics.fmean(calls) if calls else 0.0,
        "calls_max": max(calls, default=0),
        "calls_min": min(calls, default=0),
        # the double's requests per question, by the step that sent them (HTTP retries included)
        "calls_by_step": {step: round(count / n, 3) for step, count in sorted(
            Counter(req["step"] for req in double.requests).items())} if n else {},
        "http_mean": statistics.fmean(requests) if requests else 0.0,
        "http_max": max(requests, default=0),
        "seconds": round(seconds, 1),
        "report": str(report),
    }


def render(results: list[dict[str, Any]]) -> str:
    head = (f"{'set':<18}{'style':<14}{'n':>5}{'answered+gold':>15}{'reached':>15}{'misattr.':>10}"
            f"{'calls mean min-max':>16}{'HTTP mean/max':>15}{'s':>7}")
    lines = [head, "-" * len(head)]
    for r in results:
        reached = "-" if r["reached"] is None else f"{100 * r['reached']:.1f}% of {r['correct_drafts']}"
        lines.append(
            f"{r['set'][:17]:<18}{r['style']:<14}{r['n']:>5}{100 * r['answered_gold']:>14.1f}%{reached:>15}"
            f"{r['misattributed']:>10}{r['calls_mean']:>8.2f} {r['calls_min']}-{r['calls_max']:<2}"
            f"{r['http_mean']:>10.2f} / {r['http_max']:<2}{r['seconds']:>7.0f}"
        )
    for r in results:
        steps = ", ".join(f"{k} {v:.2f}" for k, v in r.get("calls_by_step", {}).items())
        lines.append(f"{r['set'][:17]} {r['style']}: model requests per question by step: {steps}")
    lines.append(f"target: reached >= {100 * TARGET_REACHED:.0f}% for every style, misattributed 0")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sample", type=int, default=300, help="answerable questions (default 300)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--styles", nargs="+", choices=STYLES, default=list(STYLES))
    parser.add_argument("--data", type=Path, default=default_data(),
                        help="folder with questions.jsonl and kb_corpus.jsonl")
    parser.add_argument("--home", type=Path, default=None,
                        help="GROUNDED_AGENT_HOME for the eval runs (default: the environment's)")
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--timeout", type=float, default=7200, help="seconds per style")
    parser.add_argument("--keep", type=Path, default=None, help="keep the eval reports here")
    parser.add_argument("--kinds", nargs="+", default=["answerable"],
                        choices=["answerable", "unanswerable_in_kb_topic", "out_of_kb"],
                        help="kinds of question asked (default answerable; with others, the "
                        "shares are of every question asked and the calls count them all)")
    parser.add_argument("--kb-dir", type=Path, nargs="+", default=None,
                        help="project knowledge bases (benchmarks/kbs/NAME) instead of SQuAD")
    parser.add_argument("--model-low-threshold", type=float, default=None,
                        help="Context.model_low_threshold for the runs (default: Context's)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    targets: list[tuple[Path | None, Oracle]] = []
    if args.kb_dir:
        from evals.data import read_kb_dir_docs

        for kb_dir in args.kb_dir:
            questions = kb_dir / "questions.jsonl"
            if not questions.exists() or not (kb_dir / "docs").is_dir():
                print(f"bench_llm_oracle: {kb_dir} lacks questions.jsonl / docs/", file=sys.stderr)
                return 2
            targets.append((kb_dir, Oracle(questions, docs=read_kb_dir_docs(kb_dir / "docs"))))
    else:
        questions = args.data / "questions.jsonl"
        if not questions.exists() or not (args.data / "kb_corpus.jsonl").exists():
            print(f"bench_llm_oracle: {args.data} lacks questions.jsonl / kb_corpus.jsonl (the "
                  "SQuAD-derived set lives outside the project, in ../shared/eval/squad; "
                  "--kb-dir benchmarks/kbs/NAME runs a project knowledge base instead)",
                  file=sys.stderr)
            return 2
        targets.append((None, Oracle(questions, args.data / "kb_corpus.jsonl")))
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-llm-oracle-") as tmp:
        workdir = args.keep or Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        for kb_dir, oracle in targets:
            double = ModelDouble(Behaviour(mode="oracle"), oracle)
            with double.serve() as base_url:
                for style in args.styles:
                    print(f"== {kb_dir.name if kb_dir else 'squad'}: {style}", file=sys.stderr,
                          flush=True)
                    results.append(run_style(double, style, args, base_url, workdir, kb_dir))
                    print(render(results[-1:]).splitlines()[2], file=sys.stderr, flush=True)
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        print(render(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
