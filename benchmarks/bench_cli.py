"""`grounded-agent ask` latency in offline mode: cold start (a new process) and warm (in-process).

    python benchmarks/bench_cli.py [--cold 3] [--warm 20] [--json]

The sample knowledge base (grounded_agent/sample/kb) is ingested first (skipped when unchanged), so both
measure a real answer from the embedded store. Cold = wall time of `grounded-agent ask --json`
as a subprocess: interpreter start, imports, embedding model load, store connection, one run.
Warm = one more question through the same process's graph, model and connection pool.
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


def _offline_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL")}
    env["HF_HUB_OFFLINE"] = "1"
    return env


def cold(runs: int) -> dict[str, Any]:
    exe = shutil.which("grounded-agent", path=str(Path(sys.executable).parent)) or "grounded-agent"
    times, statuses = [], []
    for _ in range(runs):
        t0 = time.perf_counter()
        proc = subprocess.run([exe, "ask", QUESTION, "--json"], capture_output=True, text=True,
                              env=_offline_env(), timeout=300, check=False)
        times.append(time.perf_counter() - t0)
        try:
            statuses.append(json.loads(proc.stdout)["status"])
        except (json.JSONDecodeError, KeyError):
            statuses.append(f"exit {proc.returncode}")
    return {"runs": runs, "seconds_median": round(statistics.median(times), 2),
            "seconds_min": round(min(times), 2), "seconds_max": round(max(times), 2),
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
    print(f"grounded-agent ask, offline: cold start {c['seconds_median']:.2f} s median of {c['runs']} "
          f"(min {c['seconds_min']:.2f}, max {c['seconds_max']:.2f}; {set(c['statuses'])}); warm "
          f"{w['ms_median']:.0f} ms median, p95 {w['ms_p95']:.0f} ms over {w['runs']} runs "
          f"(first in-process run {w['first_in_process_s']:.2f} s; {w['status']})", file=sys.stderr)
    if args.json:
        print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
