"""`python -m evals`: arguments, and the run from data files to a report directory.

What is evaluated (several may be combined; default: the SQuAD-derived set):
- the SQuAD-derived set in `--data` (questions.jsonl + kb_corpus.jsonl), or `--questions`/`--kb`;
- `--swapped`: the same files with their roles swapped (heldout_corpus.jsonl as the KB);
- `--kb-dir DIR`: a project knowledge base (DIR/docs/*.md and DIR/questions.jsonl);
- `--all`: SQuAD and swapped SQuAD when the data is present, and every folder of `--kbs-root`.

Data paths are resolved from the current working directory (or the options and
$GROUNDED_AGENT_EVAL_DATA), never from where the package is installed: this is a developer tool,
run from a checkout.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evals.baselines import SYSTEMS
from evals.data import (
    KINDS,
    EvalDataError,
    EvalQuestion,
    EvalSet,
    load_eval_set,
    load_kb_dir,
    load_swapped_set,
    stratified_sample,
)
from evals.splits import SPLITS, select

if TYPE_CHECKING:
    from grounded_agent.store import KnowledgeStore

DATA_ENV = "GROUNDED_AGENT_EVAL_DATA"
DEFAULT_KBS_ROOT = Path("benchmarks") / "kbs"
"""Project knowledge bases, relative to the current working directory (the repository root)."""


def default_data_dir() -> Path:
    """$GROUNDED_AGENT_EVAL_DATA, else ../shared/eval/squad relative to the working directory."""
    raw = os.environ.get(DATA_ENV, "").strip()
    return Path(raw).expanduser() if raw else Path("..") / "shared" / "eval" / "squad"


DEFAULT_DATA = default_data_dir()
"""The default SQuAD data folder as resolved at import (kept for scripts that import it)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--data", type=Path, default=None,
        help="folder of the SQuAD-derived set (questions.jsonl, kb_corpus.jsonl, "
        f"heldout_corpus.jsonl); default ${DATA_ENV}, else ../shared/eval/squad relative to the "
        "current directory",
    )
    parser.add_argument(
        "--questions", type=Path, default=None,
        help="questions.jsonl of the SQuAD-derived set, or an official SQuAD 2.0 JSON file "
        "(dev-v2.0.json); default: questions.jsonl in --data",
    )
    parser.add_argument(
        "--kb", type=Path, default=None,
        help="knowledge base JSON Lines (doc_id, title, text) for JSON Lines questions; "
        "default: kb_corpus.jsonl beside the questions file",
    )
    parser.add_argument(
        "--swapped", action="store_true",
        help="the SQuAD-derived set with roles swapped: heldout_corpus.jsonl is the knowledge "
        "base, its questions answerable, the KB articles' questions out_of_kb",
    )
    parser.add_argument(
        "--kb-dir", type=Path, action="append", default=None, metavar="DIR",
        help="a project knowledge base: DIR/docs/*.md and DIR/questions.jsonl; every question is "
        "asked (repeatable)",
    )
    parser.add_argument(
        "--all", action="store_true",
        help="SQuAD and swapped SQuAD (when --data is present) and every folder of --kbs-root; "
        "one table per knowledge base",
    )
    parser.add_argument(
        "--kbs-root", type=Path, default=None,
        help="folder of project knowledge bases for --all (default ./benchmarks/kbs)",
    )
    parser.add_argument("--kinds", nargs="+", choices=KINDS, default=list(KINDS),
                        help="kinds of question to evaluate (default: all three)")
    parser.add_argument("--sample", type=int, default=300,
                        help="questions per kind of a SQuAD set (default 300); project KBs "
                        "use all their questions")
    parser.add_argument("--seed", type=int, default=0, help="sampling seed (default 0)")
    parser.add_argument("--seeds", type=int, nargs="+", default=None, metavar="SEED",
                        help="several sampling seeds: each SQuAD set is run once per seed and the "
                        "table gives the mean (overrides --seed)")
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
    parser.add_argument("--model-low-threshold", type=float, default=None,
                        help="Context.model_low_threshold for this run: with a model, passages "
                        "from this relevance on reach it (default: Context's)")
    parser.add_argument("--time-budget", type=float, default=None,
                        help="Context.time_budget_s per question (default: Context's)")
    parser.add_argument("--model-timeout", type=float, default=None,
                        help="Context.model_timeout_s per model call (default: Context's)")
    parser.add_argument("--table", default=None,
                        help="store table for the corpus (default: eval_<model>_<corpus digest>); "
                        "only with a single knowledge base")
    parser.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    parser.add_argument(
        "--through", choices=("store", "vectorstore"), default="store",
        help="the full graph's source: the built-in store (default), or the same chunks in a "
        "LangChain InMemoryVectorStore through grounded_agent.sources.from_vectorstore (a "
        "user's own store; the baselines still read the built-in one)",
    )
    parser.add_argument(
        "--judge-split", choices=SPLITS, default="test",
        help="SQuAD questions scored: 'test' (default) drops the articles the offline judge was "
        "trained or tuned on, 'tune' keeps only its tuning articles, 'untrained' drops only the "
        "training articles, 'all' keeps everything (trained-on questions flatter the judge)",
    )


def _err(msg: str) -> None:
    print(f"evals: {msg}", file=sys.stderr)


@dataclass
class SetSpec:
    """One knowledge base to evaluate, loaded only when its turn comes."""

    label: str
    load: Callable[[], EvalSet]
    source: str


def _squad_spec(args: argparse.Namespace, data: Path) -> SetSpec:
    questions: Path = args.questions or data / "questions.jsonl"
    kb: Path | None = args.kb
    if kb is None and questions.suffix.lower() == ".jsonl":
        kb = questions.parent / "kb_corpus.jsonl"

    def load() -> EvalSet:
        return load_eval_set(questions, kb, holdout_articles=args.holdout_articles,
                             holdout_seed=args.seed)

    return SetSpec("squad", load, str(questions))


def resolve_sets(args: argparse.Namespace) -> tuple[list[SetSpec], list[str]]:
    """The knowledge bases this invocation evaluates, and what was skipped (with why).

    Raises EvalDataError when something asked for explicitly is missing.
    """
    data: Path = args.data or default_data_dir()
    specs: list[SetSpec] = []
    skipped: list[str] = []
    squad_present = (data / "questions.jsonl").exists()
    if args.all:
        if squad_present or args.questions:
            specs.append(_squad_spec(args, data))
        else:
            skipped.append(f"SQuAD: {data} not found (pass --data or set {DATA_ENV})")
        if squad_present and (data / "heldout_corpus.jsonl").exists():
            specs.append(SetSpec("squad-swapped", partial(load_swapped_set, data), str(data)))
        else:
            skipped.append(f"swapped SQuAD: {data}/heldout_corpus.jsonl not found (pass --data "
                           f"or set {DATA_ENV})")
        root: Path = args.kbs_root or DEFAULT_KBS_ROOT
        if not root.is_dir():
            raise EvalDataError(
                f"project knowledge bases: {root} not found (resolved from {Path.cwd()}); run "
                "from the repository root or pass --kbs-root"
            )
        dirs = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith((".", "_")))
        if not dirs:
            skipped.append(f"project knowledge bases: no folder in {root}")
        for d in dirs:
            specs.append(SetSpec(d.name, partial(load_kb_dir, d), str(d)))
    else:
        if args.swapped:
            if not (data / "heldout_corpus.jsonl").exists():
                raise EvalDataError(
                    f"--swapped: {data}/heldout_corpus.jsonl not found; the swapped set is built "
                    f"from the SQuAD-derived files (pass --data or set {DATA_ENV})"
                )
            specs.append(SetSpec("squad-swapped", partial(load_swapped_set, data), str(data)))
        if not args.swapped and not args.kb_dir:
            specs.append(_squad_spec(args, data))
    known = {Path(s.source).resolve() for s in specs if s.label not in ("squad", "squad-swapped")}
    for d in args.kb_dir or []:
        if d.resolve() in known:
            continue
        known.add(d.resolve())
        specs.append(SetSpec(d.name, partial(load_kb_dir, d), str(d)))
    labels = [s.label for s in specs]
    for i, s in enumerate(specs):  # two KB folders of one name: keep report folders apart
        if labels.count(s.label) > 1:
            s.label = f"{s.label}-{i}"
    return specs, skipped


def run_eval(args: argparse.Namespace) -> int:
    if args.sample < 1:
        _err("--sample must be at least 1")
        return 2
    try:
        specs, skipped = resolve_sets(args)
    except EvalDataError as exc:
        _err(str(exc))
        return 2
    if args.table and len(specs) > 1:
        _err("--table names the table of one knowledge base; drop it when evaluating several")
        return 2
    for s in skipped:
        _err(f"skipped {s}")
    if not specs:
        _err("nothing to evaluate")
        return 2
    single = len(specs) == 1 and not args.all  # --all: a folder and a JSON entry per KB
    report_dir: Path = args.report or Path("reports") / f"eval-{datetime.now():%Y%m%d-%H%M%S}"
    results, failures = asyncio.run(_arun_sets(args, specs, report_dir, single))
    if not results:
        return 2
    if args.json:
        if single and len(results) == 1:
            print(json.dumps(next(iter(results.values())), indent=2, ensure_ascii=False))
        else:
            print(json.dumps({"sets": results, "skipped": skipped, "failed": failures},
                             indent=2, ensure_ascii=False))
    else:
        if single:
            print(render_single(next(iter(results.values()))))
        verdict = render_verdict(results)
        if verdict:
            print(verdict)
        if not single:
            from evals.report import render_bands_table

            bands = render_bands_table(results)
            if bands:
                print(f"\n{bands}")
    if not single and not args.no_plots:
        _write_relevance_by_kb(results, report_dir)
    if not args.json:
        print(f"\nreport: {report_dir}")
    return 1 if failures else 0


def _write_relevance_by_kb(results: dict[str, dict[str, Any]], report_dir: Path) -> None:
    """relevance_by_kb.png in the report root: where each kind of question falls, every KB."""
    from evals.plots import write_relevance_by_kb
    from evals.report import BAND_GROUPS

    bands = {k: r["relevance_bands"] for k, r in results.items() if r.get("relevance_bands")}
    path = write_relevance_by_kb(bands, report_dir / "relevance_by_kb.png", BAND_GROUPS)
    if path is not None:
        print(f"relevance per kind of question and knowledge base: {path}", file=sys.stderr)


def render_single(result: dict[str, Any]) -> str:
    """One KB: the detailed per-kind table (one seed) and the KB table."""
    from evals.report import render_kb_table, render_table

    parts = [] if "per_seed" in result else [render_table(result)]
    return "\n\n".join([*parts, render_kb_table(result)])


def render_verdict(results: dict[str, dict[str, Any]]) -> str:
    """The issue-9 criterion over every KB run: "" when fewer than two KBs have it."""
    crits = {k: r["criterion"] for k, r in results.items() if r.get("criterion")}
    if len(crits) < 2:
        return ""
    losing = [k for k, c in crits.items() if not c["beats"]]
    return ("full graph beats thresholds-only on the mean credited score on every KB: "
            + ("yes" if not losing else f"NO (not on {', '.join(losing)})"))


def _questions_for(eval_set: EvalSet, args: argparse.Namespace, seed: int) -> list[EvalQuestion]:
    if eval_set.sampled:
        pool = select(eval_set.questions, args.judge_split)
        return stratified_sample(pool, args.sample, seed, kinds=args.kinds)
    return [q for q in eval_set.questions if q.kind in args.kinds]


async def _arun_sets(
    args: argparse.Namespace, specs: Sequence[SetSpec], report_root: Path, single: bool
) -> tuple[dict[str, dict[str, Any]], list[str]]:
    from evals.report import render_kb_table

    results: dict[str, dict[str, Any]] = {}
    failures: list[str] = []
    for spec in specs:
        try:
            eval_set = spec.load()
        except EvalDataError as exc:
            _err(f"{spec.label}: {exc}")
            failures.append(spec.label)
            continue
        for w in eval_set.warnings[:10]:
            _err(f"{spec.label}: warning: {w}")
        if len(eval_set.warnings) > 10:
            _err(f"{spec.label}: ... {len(eval_set.warnings) - 10} more warnings in report.json")
        seeds = (args.seeds or [args.seed]) if eval_set.sampled else [args.seed]
        if eval_set.sampled:
            kept = len(select(eval_set.questions, args.judge_split))
            print(f"{spec.label}: judge split {args.judge_split!r}: {kept} of "
                  f"{len(eval_set.questions)} questions remain", file=sys.stderr)
        if not any(_questions_for(eval_set, args, s) for s in seeds[:1]):
            _err(f"{spec.label}: no questions of the kinds {', '.join(args.kinds)}")
            failures.append(spec.label)
            continue
        set_dir = report_root if single else report_root / spec.label
        result = await _arun_set(args, eval_set, spec, seeds, set_dir)
        results[spec.label] = result
        if args.json:
            print(render_kb_table(result), file=sys.stderr)
        elif not single:  # each KB's table as soon as it is done
            print(render_kb_table(result) + "\n", flush=True)
    return results, failures


async def _arun_set(
    args: argparse.Namespace, eval_set: EvalSet, spec: SetSpec, seeds: Sequence[int],
    set_dir: Path,
) -> dict[str, Any]:
    """One knowledge base: ingest once, then one run per seed; the report, or the seeds' mean."""
    from evals.harness import USER_SOURCE, aingest, awarm_up, open_eval_store, vectorstore_source
    from evals.report import summarise_seeds
    from grounded_agent.context import Context
    from grounded_agent.deps import AUTO, llm_configured
    from grounded_agent.graph.builder import build_graph

    offline = args.offline or not llm_configured()
    store = open_eval_store(eval_set, args.table)
    try:
        n_docs = sum(1 for _ in eval_set.iter_kb())
        print(f"{spec.label}: knowledge base: {n_docs} documents -> table "
              f"{store.table_name} ({store.backend} store); "
              f"{'offline mode' if offline else 'language model configured'}", file=sys.stderr)
        ingest = await aingest(eval_set, store, progress=sys.stderr.isatty())
        if ingest.errors:
            _err(f"{spec.label}: {len(ingest.errors)} knowledge-base record(s) could not be "
                 f"ingested, first: {ingest.errors[0].file}: {ingest.errors[0].reason}")
        warm_s = await awarm_up(store)
        kwargs: dict[str, Any] = {}
        if args.found_threshold is not None:
            kwargs["found_threshold"] = args.found_threshold
        if args.low_threshold is not None:
            kwargs["low_threshold"] = args.low_threshold
        if args.model_low_threshold is not None:
            kwargs["model_low_threshold"] = args.model_low_threshold
        if args.time_budget is not None:
            kwargs["time_budget_s"] = args.time_budget
        if args.model_timeout is not None:
            kwargs["model_timeout_s"] = args.model_timeout
        model = None if offline else AUTO
        if args.through == "vectorstore":
            ctx = Context(sources=[USER_SOURCE], **kwargs)
            graph = build_graph(chat_model=model, store=store,
                                tools={USER_SOURCE: await vectorstore_source(store)})
        else:
            ctx = Context(sources=["knowledge_base"], **kwargs)
            graph = build_graph(chat_model=model, store=store)
        counts = await _acounts(store)
        base_meta = {
            "set": spec.label,
            "questions_file": spec.source,
            "corpus": eval_set.name,
            "set_info": eval_set.info,
            "data_warnings": eval_set.warnings,
            "sampled": eval_set.sampled,
            "kb_documents": ingest.documents,
            "table": store.table_name,
            **counts,
            "store_backend": store.backend,
            "embedding_model": store.model_id,
            "ingest": {"added": ingest.added, "skipped": ingest.skipped, "chunks": ingest.chunks,
                       "errors": len(ingest.errors), "seconds": round(ingest.elapsed_seconds, 1)},
            "warm_up_seconds": round(warm_s, 1),
            "mode": "offline" if offline else "llm",
            "through": args.through,
            "sample_per_kind": args.sample if eval_set.sampled else None,
            "judge_split": args.judge_split if eval_set.sampled else None,
            "kinds": list(args.kinds),
            "systems": list(args.systems),
            "concurrency": args.concurrency,
            "top_k": ctx.top_k,
            "found_threshold": ctx.found_threshold,
            "low_threshold": ctx.low_threshold,
            "model_low_threshold": None if offline else ctx.model_low_threshold,
        }
        reports = []
        for seed in seeds:
            run_dir = set_dir / f"seed-{seed}" if len(seeds) > 1 else set_dir
            sample = _questions_for(eval_set, args, seed)
            reports.append(await _arun_seed(args, store, graph, ctx, sample,
                                            {**base_meta, "seed": seed}, run_dir))
    finally:
        await store.aclose()
    if len(reports) == 1:
        return reports[0]
    summary = summarise_seeds(reports)
    write_summary(summary, set_dir, plots=not args.no_plots,
                  thresholds=(ctx.low_threshold, ctx.found_threshold))
    return summary


def write_summary(
    summary: dict[str, Any], directory: Path, *, plots: bool, thresholds: Sequence[float]
) -> None:
    """summary.json (the seeds' mean) and the pooled reliability.png in the KB's folder."""
    from evals.plots import write_reliability_plot

    directory.mkdir(parents=True, exist_ok=True)
    if plots and summary.get("reliability"):
        path = write_reliability_plot(summary["reliability"], directory / "reliability.png",
                                      summary["meta"].get("corpus", ""), thresholds)
        summary["meta"]["reliability_plot"] = str(path) if path else None
    (directory / "summary.json").write_text(json.dumps(summary, indent=2, ensure_ascii=False),
                                            encoding="utf-8")


async def _acounts(store: KnowledgeStore) -> dict[str, int]:
    try:
        chunks, active_chunks, active_docs = await store.acounts()
    except Exception:  # counts are facts for the report, not a reason to stop
        return {}
    return {"table_chunks": chunks, "active_chunks": active_chunks,
            "active_documents": active_docs}


async def _arun_seed(
    args: argparse.Namespace, store: KnowledgeStore, graph: Any, ctx: Any,
    sample: list[EvalQuestion], meta: dict[str, Any], run_dir: Path,
) -> dict[str, Any]:
    from evals.harness import arun_sample
    from evals.plots import write_plots, write_reliability_plot
    from evals.report import build_report, write_report

    started = time.perf_counter()
    run = await arun_sample(sample, store=store, graph=graph, ctx=ctx, systems=args.systems,
                            concurrency=args.concurrency, progress=sys.stderr.isatty())
    meta = {
        **meta,
        "n_questions": len(sample),
        "run_seconds": round(run.seconds, 1),
        "finished_at": datetime.now().isoformat(timespec="seconds"),
        "report_dir": str(run_dir),
    }
    report = build_report(run.rows, run.gold_ranks, meta, run.best_scores)
    write_report(report, run.rows, run_dir)
    if not args.no_plots:
        report["meta"]["plots"] = [str(p) for p in write_plots(run.rows, run_dir)]
        rel = write_reliability_plot(report.get("reliability") or [], run_dir / "reliability.png",
                                     meta["corpus"], (ctx.low_threshold, ctx.found_threshold))
        report["meta"]["reliability_plot"] = str(rel) if rel else None
    report["meta"]["total_seconds"] = round(time.perf_counter() - started, 1)
    write_report(report, run.rows, run_dir)
    return report


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m evals",
        description="Grounding evaluation on the SQuAD-derived set and the project's own KBs.",
    )
    add_arguments(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of `python -m evals` (and `make eval`), from the repository root."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    logging.basicConfig(level=logging.ERROR, format="evals: %(levelname)s %(name)s: %(message)s")
    return run_eval(build_parser().parse_args(argv))
