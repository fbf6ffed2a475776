"""`grounded-agent eval`: arguments, and the run from data files to a report directory."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from grounded_agent.evaluation.baselines import SYSTEMS
from grounded_agent.evaluation.data import KINDS, EvalDataError, load_eval_set, stratified_sample

REPO_ROOT = Path(__file__).resolve().parents[3]
DEFAULT_DATA = REPO_ROOT.parent / "shared" / "eval" / "squad"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--questions", type=Path, default=DEFAULT_DATA / "questions.jsonl",
        help="questions.jsonl of the SQuAD-derived set, or an official SQuAD 2.0 JSON file "
        "(dev-v2.0.json); default: ../shared/eval/squad/questions.jsonl beside the repository",
    )
    parser.add_argument(
        "--kb", type=Path, default=None,
        help="knowledge base JSON Lines (doc_id, title, text) for JSON Lines questions; "
        "default: kb_corpus.jsonl beside the questions file",
    )
    parser.add_argument("--kinds", nargs="+", choices=KINDS, default=list(KINDS),
                        help="kinds of question to evaluate (default: all three)")
    parser.add_argument("--sample", type=int, default=300, help="questions per kind (default 300)")
    parser.add_argument("--seed", type=int, default=0, help="sampling seed (default 0)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON on stdout")
    parser.add_argument("--report", type=Path, default=None,
                        help="report directory (default ./reports/eval-<timestamp>)")
    parser.add_argument(
        "--holdout-articles", type=int, default=5,
        help="official SQuAD file only: articles kept out of the knowledge base, whose questions "
        "become out_of_kb (default 5)",
    )
    parser.add_argument("--systems", nargs="+", choices=SYSTEMS, default=list(SYSTEMS),
                        help="systems to run on the same store and sample (default: all)")
    parser.add_argument("--concurrency", type=int, default=4, help="questions in flight (default 4)")
    parser.add_argument("--offline", action="store_true",
                        help="no language model even if one is configured (local scorer, "
                        "extractive answers)")
    parser.add_argument("--found-threshold", type=float, default=None,
                        help="Context.found_threshold for this run (default: Context's)")
    parser.add_argument("--low-threshold", type=float, default=None,
                        help="Context.low_threshold for this run (default: Context's)")
    parser.add_argument("--table", default=None,
                        help="store table for the corpus (default: eval_<model>_<corpus digest>)")
    parser.add_argument("--no-plots", action="store_true", help="skip the PNG plots")


def _err(msg: str) -> None:
    print(f"grounded-agent eval: {msg}", file=sys.stderr)


def run_eval(args: argparse.Namespace) -> int:
    questions: Path = args.questions
    kb: Path | None = args.kb
    if kb is None and questions.suffix.lower() == ".jsonl":
        kb = questions.parent / "kb_corpus.jsonl"
    if args.sample < 1:
        _err("--sample must be at least 1")
        return 2
    try:
        eval_set = load_eval_set(questions, kb, holdout_articles=args.holdout_articles,
                                 holdout_seed=args.seed)
    except EvalDataError as exc:
        _err(str(exc))
        return 2
    sample = stratified_sample(eval_set.questions, args.sample, args.seed, kinds=args.kinds)
    if not sample:
        _err(f"no questions of the kinds {', '.join(args.kinds)} in {questions}")
        return 2
    report_dir: Path = args.report or Path("reports") / f"eval-{datetime.now():%Y%m%d-%H%M%S}"
    report = asyncio.run(_arun(args, eval_set, sample, report_dir))
    if args.json:
        print(json.dumps(report, indent=2, ensure_ascii=False))
    else:
        from grounded_agent.evaluation.report import render_table

        print(render_table(report))
        print(f"\nreport: {report_dir}")
    return 0


async def _arun(args: argparse.Namespace, eval_set: Any, sample: list[Any], report_dir: Path) -> dict[str, Any]:
    from grounded_agent.context import Context
    from grounded_agent.deps import _AUTO, llm_configured
    from grounded_agent.evaluation.harness import aingest, arun_sample, awarm_up, open_eval_store
    from grounded_agent.evaluation.plots import write_plots
    from grounded_agent.evaluation.report import build_report, render_table, write_report
    from grounded_agent.graph.builder import build_graph

    started = time.perf_counter()
    interactive = sys.stderr.isatty()
    offline = args.offline or not llm_configured()
    store = open_eval_store(eval_set, args.table)
    print(f"knowledge base: {sum(1 for _ in eval_set.iter_kb())} documents -> table "
          f"{store.table_name} ({store.backend} store); "
          f"{'offline mode' if offline else 'language model configured'}", file=sys.stderr)
    ingest = await aingest(eval_set, store, progress=interactive)
    if ingest.errors:
        _err(f"{len(ingest.errors)} knowledge-base record(s) could not be ingested, "
             f"first: {ingest.errors[0].file}: {ingest.errors[0].reason}")
    warm_s = await awarm_up(store)
    kwargs: dict[str, Any] = {}
    if args.found_threshold is not None:
        kwargs["found_threshold"] = args.found_threshold
    if args.low_threshold is not None:
        kwargs["low_threshold"] = args.low_threshold
    ctx = Context(sources=["knowledge_base"], **kwargs)
    graph = build_graph(chat_model=None if offline else _AUTO, store=store)
    run = await arun_sample(sample, store=store, graph=graph, ctx=ctx, systems=args.systems,
                            concurrency=args.concurrency, progress=interactive)
    meta = {
        "questions_file": str(args.questions),
        "corpus": eval_set.name,
        "kb_documents": ingest.documents,
        "table": store.table_name,
        "store_backend": store.backend,
        "embedding_model": store.model_id,
        "ingest": {"added": ingest.added, "skipped": ingest.skipped, "chunks": ingest.chunks,
                   "seconds": round(ingest.elapsed_seconds, 1)},
        "warm_up_seconds": round(warm_s, 1),
        "mode": "offline" if offline else "llm",
        "sample_per_kind": args.sample,
        "seed": args.seed,
        "kinds": list(args.kinds),
        "n_questions": len(sample),
        "systems": list(args.systems),
        "concurrency": args.concurrency,
        "top_k": ctx.top_k,
        "found_threshold": ctx.found_threshold,
        "low_threshold": ctx.low_threshold,
        "run_seconds": round(run.seconds, 1),
        "total_seconds": 0.0,
        "finished_at": datetime.now().isoformat(timespec="seconds"),
        "report_dir": str(report_dir),
    }
    report = build_report(run.rows, run.gold_ranks, meta)
    meta["total_seconds"] = round(time.perf_counter() - started, 1)
    write_report(report, run.rows, report_dir)
    if not args.no_plots:
        report["meta"]["plots"] = [str(p) for p in write_plots(run.rows, report_dir)]
        write_report(report, run.rows, report_dir)
    if args.json:
        print(render_table(report), file=sys.stderr)
    await store.aclose()
    return report
