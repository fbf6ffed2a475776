"""Offline mode against a real small model (scripts/local_model.py) on the project knowledge bases.

    python benchmarks/bench_local_model.py [--engine llama-server|llama-cpp-python]
        [--base-url URL] [--kb-dir benchmarks/kbs/NAME ...] [--per-kind N] [--seed 0]
        [--no-offline | --offline-only] [--reports DIR] [--server-log FILE] [--json]
        [--no-words-rule]

For each knowledge base, `python -m evals --kb-dir ... --systems full_graph --json` runs as a
subprocess offline and then with OPENAI_BASE_URL pointing at the local model (started here with
`scripts/local_model.py serve`, or the server at --base-url). With --per-kind N, every run asks
the same N questions of each kind (seeded sample) instead of all of them: a real 0.5B model on
two cores takes about 10-30 s a question.

The table, per knowledge base and mode: answerable questions correct / abstained / wrong (wrong
citation or answer, or answered where it should abstain), near-miss (unanswerable_in_kb_topic) and
off-topic (out_of_kb) questions abstained, model calls per question (mean and worst), seconds per
question (the run's wall clock over its questions), and, from the log of a server this script
started, its HTTP 500s during the run and the most tokens one completion generated (the steps'
limits are 256 for a judgement, 96 for a rewrite, 512 for an answer).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from grounded_agent.context import Context

ROOT = Path(__file__).resolve().parents[1]
KINDS = ("answerable", "unanswerable_in_kb_topic", "out_of_kb")


sys.path.insert(0, str(ROOT / "scripts"))  # scripts/ lives in the checkout, beside benchmarks/
LOCAL: Any = importlib.import_module("local_model")


@contextmanager
def local_server(engine: str, log: Path) -> Iterator[tuple[str, str]]:
    """(base URL, model name) of a server started with scripts/local_model.py serve."""
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "scripts" / "local_model.py"), "serve", "--engine", engine,
         "--log", str(log)],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        assert proc.stdout is not None
        base_url = proc.stdout.readline().strip()
        name_line = proc.stdout.readline().strip()
        if not base_url.startswith("http"):
            raise SystemExit(f"the local model did not start (exit {proc.wait()})")
        yield base_url, name_line.split("=", 1)[1]
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()


def sampled_kb(kb: Path, per_kind: int | None, seed: int, into: Path) -> Path:
    """A knowledge-base folder with the same documents and the sampled questions."""
    rows = [json.loads(line) for line in (kb / "questions.jsonl").read_text().splitlines()
            if line.strip()]
    if per_kind is not None:
        rng = random.Random(seed)
        chosen = []
        for kind in KINDS:
            of_kind = [r for r in rows if r["kind"] == kind]
            chosen += rng.sample(of_kind, min(per_kind, len(of_kind)))
        rows = chosen
    out = into / kb.name
    out.mkdir(parents=True)
    (out / "docs").symlink_to((kb / "docs").resolve())
    (out / "questions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return out


EVALS_WITH_WARNINGS = (
    "import logging, sys\n"
    "logging.basicConfig(level=logging.WARNING, format='%(levelname)s %(name)s: %(message)s')\n"
    "from evals.cli import main\n"
    "sys.exit(main(sys.argv[1:]))\n"
)
"""`python -m evals` with the agent's warnings on stderr (a model call that failed or timed out,
a judgement that could not be read), which the table counts; evals alone logs errors only."""


def run_eval(
    kb: Path, env: dict[str, str], offline: bool, limits: list[str], report_dir: Path | None = None
) -> dict[str, Any]:
    cmd = [sys.executable, "-c", EVALS_WITH_WARNINGS, "--kb-dir", str(kb), "--systems",
           "full_graph", "--json", "--no-plots", "--concurrency", "1"]
    if report_dir is not None:  # the per-question rows, to read what each answer was
        cmd += ["--report", str(report_dir)]
    if offline:
        cmd.append("--offline")
    else:
        cmd += limits
    started = time.perf_counter()
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"evals failed on {kb.name}:\n{done.stderr[-3000:]}")
    report: dict[str, Any] = json.loads(done.stdout)
    report["wall_seconds"] = time.perf_counter() - started
    failed = [line for line in done.stderr.splitlines() if "model call failed" in line]
    report["model_failed"] = len(failed)
    report["model_timeouts"] = sum("Timeout" in line for line in failed)
    report["unreadable"] = sum("could not be read" in line for line in done.stderr.splitlines())
    if report_dir is not None:
        (report_dir / "eval.log").write_text(done.stderr)
    return report


def row(kb: str, mode: str, report: dict[str, Any], server_out: str | None) -> dict[str, Any]:
    """One line of the table; `server_out` is what the server logged during the run (None: no
    log read, so no 500s or token counts)."""
    by_kind = report["systems"]["full_graph"]["by_kind"]
    ans = by_kind.get("answerable", {})
    counts = ans.get("counts", {})
    n_ans = ans.get("n", 0)
    n = sum(k.get("n", 0) for k in by_kind.values())

    def abstained(kind: str) -> float | None:
        k = by_kind.get(kind)
        return None if not k else k["counts"]["abstained"] / k["n"]

    calls = [k["llm_calls_mean"] * k["n"] for k in by_kind.values() if k.get("n")]
    generated = LOCAL.generated_tokens(server_out or "")
    return {
        "kb": kb, "mode": mode, "answerable": n_ans,
        "correct": counts.get("correct", 0) / n_ans if n_ans else None,
        "abstained": counts.get("abstained", 0) / n_ans if n_ans else None,
        "wrong": (counts.get("wrong", 0) + counts.get("hallucinated", 0)) / n_ans if n_ans else None,
        "near_miss_abstained": abstained("unanswerable_in_kb_topic"),
        "off_topic_abstained": abstained("out_of_kb"),
        "calls_mean": sum(calls) / n if n else None,
        "calls_max": max((k.get("llm_calls_max") or 0 for k in by_kind.values()), default=0),
        "seconds_per_question": report["meta"].get("run_seconds", report["wall_seconds"]) / n
        if n else None,
        "model_failed": report.get("model_failed"),
        "model_timeouts": report.get("model_timeouts"),
        "unreadable": report.get("unreadable"),
        "http_500": None if server_out is None else len(LOCAL.http_500s(server_out)),
        "max_generated": max(generated, default=0) if server_out is not None else None,
        "completions": len(generated) if server_out is not None else None,
        "questions": n,
    }


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.0f}%"


def print_table(rows: list[dict[str, Any]]) -> None:
    head = ("kb", "mode", "ans n", "correct", "abst.", "wrong", "near-miss abst.",
            "off-topic abst.", "calls/q", "max", "s/q", "calls failed (timed out)",
            "unreadable", "HTTP 500", "max tokens out")
    print(" | ".join(head))
    print(" | ".join("---" for _ in head))
    for r in rows:
        print(" | ".join([
            r["kb"], r["mode"], str(r["answerable"]), _pct(r["correct"]), _pct(r["abstained"]),
            _pct(r["wrong"]), _pct(r["near_miss_abstained"]), _pct(r["off_topic_abstained"]),
            f"{r['calls_mean']:.2f}", str(r["calls_max"]), f"{r['seconds_per_question']:.1f}",
            f"{r['model_failed']} ({r['model_timeouts']})", str(r["unreadable"]),
            "-" if r["http_500"] is None else str(r["http_500"]),
            "-" if r.get("max_generated") is None else str(r["max_generated"]),
        ]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--engine", choices=("llama-server", "llama-cpp-python"),
                        default="llama-server")
    parser.add_argument("--base-url", default=None, help="a server already running (with "
                        "--model-name); default: start the local model")
    parser.add_argument("--model-name", default=None)
    parser.add_argument("--kb-dir", type=Path, action="append", default=None)
    parser.add_argument("--per-kind", type=int, default=None,
                        help="questions of each kind per knowledge base (default: all)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-offline", action="store_true", help="skip the offline runs")
    parser.add_argument("--offline-only", action="store_true", help="only the offline runs")
    parser.add_argument("--server-log", type=Path, default=None,
                        help="keep the started server's own output here (its 500s and timings)")
    parser.add_argument("--json", action="store_true", help="rows as JSON lines on stdout")
    parser.add_argument("--reports", type=Path, default=None,
                        help="keep each run's eval report (per-question rows) in DIR/<kb>-<mode>")
    parser.add_argument("--time-budget", type=float, default=None,
                        help="seconds per question (default: Context's, 45)")
    parser.add_argument("--model-timeout", type=float, default=None,
                        help="seconds per model call (default: Context's, 20); a loaded "
                        "machine needs more to measure the model rather than the load")
    parser.add_argument("--no-words-rule", action="store_true",
                        help="run the model without Context.judged_words_from_sources (on by "
                        "default here; GROUNDED_AGENT_JUDGE_SUPPORT=0 turns the support judgement "
                        "off, as scripts/local_model.py serve recommends for this model)")
    args = parser.parse_args(argv)
    limits = [*(["--time-budget", str(args.time_budget)] if args.time_budget else []),
              *(["--model-timeout", str(args.model_timeout)] if args.model_timeout else [])]
    kbs = args.kb_dir or sorted(p for p in (ROOT / "benchmarks" / "kbs").iterdir() if p.is_dir())
    base_env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    for key in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "GROUNDED_AGENT_MODEL"):
        base_env.pop(key, None)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-local-model-") as tmp:
        work = Path(tmp)
        sampled = [sampled_kb(kb, args.per_kind, args.seed, work / "kbs") for kb in kbs]
        if not args.no_offline:
            for kb in sampled:
                rows.append(row(kb.name, "offline", run_eval(
                    kb, base_env, True, [], _report(args.reports, kb.name, "offline")), None))
                print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
        log = args.server_log.resolve() if args.server_log else work / "server.log"
        if args.offline_only:
            server: Any = None
        elif args.base_url:
            server = _given(args.base_url, args.model_name or "local")
        else:
            server = local_server(args.engine, log)
        with server or _given("", "") as (base_url, model_name):
            env = {**base_env, "OPENAI_BASE_URL": base_url, "OPENAI_API_KEY": "local",
                   "GROUNDED_AGENT_MODEL": model_name}
            mode = args.engine if not args.base_url else "given server"
            if limits:
                mode += " (" + " ".join(limits).replace("--", "") + ")"
            # the words rule unless measured without; GROUNDED_AGENT_JUDGE_SUPPORT=0 in the
            # environment measures what serve recommends for this model (no support judgement)
            env[LOCAL.WORDS_RULE] = "0" if args.no_words_rule else "1"
            mode += "" if args.no_words_rule else " +words rule"
            switches = Context()  # the environment's switches, read as the agent reads them
            if not switches.judge_support:
                mode += " -support judgement"  # paraphrase removed, quotes only
            if switches.judge_model_answers:
                mode += " +judged model answers"
            for kb in sampled if server is not None else []:
                start = _log_size(log)
                report = run_eval(kb, env, False, limits,
                                  _report(args.reports, kb.name, args.engine))
                server_out = _log_since(log, start)
                rows.append(row(kb.name, mode, report, server_out))
                print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    if args.json:
        for r in rows:
            print(json.dumps(r))
    else:
        print_table(rows)
    return 0


def _report(reports: Path | None, kb: str, mode: str) -> Path | None:
    return None if reports is None else (reports / f"{kb}-{mode}").resolve()


@contextmanager
def _given(base_url: str, name: str) -> Iterator[tuple[str, str]]:
    yield base_url, name


def _log_size(log: Path) -> int:
    return log.stat().st_size if log.is_file() else 0


def _log_since(log: Path, start: int) -> str | None:
    """What the server wrote to its log from byte `start` on (None: no log, a given server)."""
    if not log.is_file():
        return None
    with log.open("rb") as fh:
        fh.seek(start)
        return fh.read().decode(errors="replace")


if __name__ == "__main__":
    sys.exit(main())
