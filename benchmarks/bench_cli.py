"""`grounded-agent ask` latency in offline mode: cold start (a new process) and warm (in-process).

    python benchmarks/bench_cli.py [--cold 3] [--warm 20] [--json]

The sample knowledge base (grounded_agent/sample/kb) is ingested first (skipped when unchanged), so both
measure a real answer from the embedded store, with the database already running. Cold = a new
`grounded-agent ask --json` process: interpreter start, imports, embedding model load, store
connection, one run; timed to the printed answer (the first byte on stdout, unbuffered) and to
the process's exit. Warm = one more question through the same process's graph, model and
connection pool. `benchmarks/bench_store.py` reuses `cold()` to compare embedding backends.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

ROOT = Path(__file__).resolve().parents[1]
QUESTION = "How much does the Pro plan cost per user per month?"


def _offline_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL")}
    env["HF_HUB_OFFLINE"] = "1"
    env["PYTHONUNBUFFERED"] = "1"  # the answer reaches the pipe when printed, not at exit
    env.update(extra)
    return env


def _one_cold(exe: str, env: dict[str, str]) -> tuple[float, float, str]:
    """(seconds to the printed answer, seconds to exit, status) of one `ask` process."""
    t0 = time.perf_counter()
    proc = subprocess.Popen([exe, "ask", QUESTION, "--json"], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=env)
    assert proc.stdout is not None
    first = proc.stdout.read(1)
    answered = time.perf_counter() - t0
    rest = proc.stdout.read()
    proc.wait(timeout=300)
    exited = time.perf_counter() - t0
    try:
        status = json.loads(first + rest)["status"]
    except (json.JSONDecodeError, KeyError):
        status = f"exit {proc.returncode}"
    return (answered if first else exited), exited, status


def cold(runs: int, env: dict[str, str] | None = None) -> dict[str, Any]:
    """`runs` cold `grounded-agent ask` processes (extra environment: `env`)."""
    exe = shutil.which("grounded-agent", path=str(Path(sys.executable).parent)) or "grounded-agent"
    full_env = _offline_env(**(env or {}))
    answered, exited, statuses = [], [], []
    for _ in range(runs):
        a, e, status = _one_cold(exe, full_env)
        answered.append(a)
        exited.append(e)
        statuses.append(status)
    return {"runs": runs, "seconds_median": round(statistics.median(answered), 2),
            "seconds_min": round(min(answered), 2), "seconds_max": round(max(answered), 2),
            "exit_seconds_median": round(statistics.median(exited), 2),
            "statuses": statuses}


def warm(runs: int) -> dict[str, Any]:
    for key in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        os.environ.pop(key, None)
    from grounded_agent.api import aask
    from grounded_agent.graph.builder import build_graph

    graph = build_graph(chat_model=None)

    async def go() -> tuple[float, list[float], str]:
        t0 = time.perf_counter()
        first = await aask(QUESTION, graph=graph)
        first_s = time.perf_counter() - t0
        times = []
        for _ in range(runs):
            t0 = time.perf_counter()
            await aask(QUESTION, graph=graph)
            times.append((time.perf_counter() - t0) * 1000)
        return first_s, times, first.status

    first_s, times, status = asyncio.run(go())
    return {"runs": runs, "first_in_process_s": round(first_s, 2),
            "ms_median": round(statistics.median(times), 1),
            "ms_p95": round(sorted(times)[int(0.95 * (len(times) - 1))], 1), "status": status}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cold", type=int, default=3)
    p.add_argument("--warm", type=int, default=20)
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)

    from grounded_agent.sample import SAMPLE_KB
    from grounded_agent.store import ingest_paths, open_store

    store = open_store()
    report = ingest_paths([SAMPLE_KB], store)
    store.close()
    out = {"ingest": {"documents": report.documents, "skipped": report.skipped},
           "cold": cold(args.cold), "warm": warm(args.warm)}
    c, w = out["cold"], out["warm"]
    print(f"grounded-agent ask, offline: cold start {c['seconds_median']:.2f} s to the answer, median "
          f"of {c['runs']} (min {c['seconds_min']:.2f}, max {c['seconds_max']:.2f}; process exit "
          f"{c['exit_seconds_median']:.2f} s; {set(c['statuses'])}); warm "
          f"{w['ms_median']:.0f} ms median, p95 {w['ms_p95']:.0f} ms over {w['runs']} runs "
          f"(first in-process run {w['first_in_process_s']:.2f} s; {w['status']})", file=sys.stderr)
    if args.json:
        print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
