"""The fault matrix: runs tests/faults (heavy tests included) and prints one row per fault with
what the user saw, what was logged and pass/fail, then the figures (fuzz counts, load completion
and shed counts, peak RSS, database connections).

    python benchmarks/faults.py                 # the whole matrix (make faults)
    python benchmarks/faults.py --quick         # what `make test` runs: no heavy tests, 100 fuzz inputs
    python benchmarks/faults.py --report FILE   # print the table of an earlier run's JSON lines

Exit status 0 when every test passed, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

ROWS = {
    1: "knowledge base times out (once; every source, every attempt)",
    2: "web search 429/401/403; Wikipedia 429/5xx/timeouts on the shared retry rule",
    3: "Wikipedia read where one of several pages fails",
    4: "language model down, 5xx, slow, unreadable, off-list tools, bad arguments, bad markers",
    5: "embedded PostgreSQL stopped under the endpoint, then started",
    6: "kill -9 of the server during a threaded run, then the same thread_id",
    7: "kill -9 during ingest, then again; two ingests of one folder at once",
    8: "client disconnects mid-stream",
    9: "instructions hidden in a knowledge-base document",
    10: "fuzzing: Python API, CLI, endpoint",
    11: "load: concurrent requests on the endpoint, 200 ms model",
    12: "secrets under faults with DEBUG logging",
    13: "what a plain `serve` logs: shed, hung-up and failed requests",
    14: "embedded PostgreSQL life cycle: db status, db stop, killed under serve",
    15: "external PostgreSQL (password, TCP): two serve workers, one thread, pg_ctl restart",
    16: "poisoned documents: markup, orders, fake markers, outside links in titles and text",
    17: "request bodies in the wrong encoding (leading NULs, UTF-16/32, BOMs) on every POST route",
    18: "hostile files and metadata: look-alikes, invisible characters, any-scheme links, terminal "
        "controls, alias bombs, long words, special files, links out of the folder",
    19: "the database's connection limit reached: waited out, then reported as such",
}


def run(report: Path, *, quick: bool, extra: list[str]) -> int:
    env = {
        **os.environ,
        "GA_FAULTS_REPORT": str(report),
        "GA_FUZZ_EXAMPLES": os.environ.get("GA_FUZZ_EXAMPLES", "100" if quick else "1000"),
        "GA_LOAD_REQUESTS": os.environ.get("GA_LOAD_REQUESTS", "60" if quick else "200"),
        "HF_HUB_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
    }
    cmd = [sys.executable, "-m", "pytest", "tests/faults", "-q", "-p", "no:cacheprovider",
           "--no-header", "-rf"]
    if not quick:
        cmd.append("--run-heavy")
    done = subprocess.run([*cmd, *extra], cwd=ROOT, env=env, check=False)
    return done.returncode


def _cell(text: str, width: int) -> list[str]:
    return textwrap.wrap(" ".join(str(text).split()), width) or ["-"]


def render(lines: list[dict[str, Any]]) -> tuple[str, int, int]:
    by_row: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for line in lines:
        by_row[int(line["row"])].append(line)
    out = []
    widths = (4, 34, 58, 44, 4)
    head = ("row", "fault", "what the user saw", "what was logged", "pass")
    out.append(" | ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)))
    out.append("-+-".join("-" * w for w in widths))
    passed = failed = 0
    for number, title in ROWS.items():
        tests = by_row.get(number, [])
        ok = bool(tests) and all(t["passed"] for t in tests)
        out.append(f"{'#' + str(number):<4} | {title}  [{'PASS' if ok else ('FAIL' if tests else 'NOT RUN')}]")
        for t in tests:
            passed += t["passed"]
            failed += not t["passed"]
            cols = [_cell("", widths[0]), _cell(t["fault"], widths[1]),
                    _cell(t["saw"] or "-", widths[2]), _cell(t["logged"] or "-", widths[3]),
                    _cell("ok" if t["passed"] else "FAIL", widths[4])]
            if t.get("control"):
                cols[2] += _cell(f"negative control: {t['control']}", widths[2])
            for i in range(max(len(c) for c in cols)):
                out.append(" | ".join(
                    (c[i] if i < len(c) else "").ljust(w) for c, w in zip(cols, widths, strict=True)
                ))
        out.append("")
    figures = [(t["fault"], t["figures"]) for t in lines if t.get("figures")]
    if figures:
        out.append("Figures:")
        for fault, fig in figures:
            out.append(f"  {fault}: " + ", ".join(f"{k} {v}" for k, v in fig.items()))
    return "\n".join(out), passed, failed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="skip heavy tests, fewer inputs")
    parser.add_argument("--report", type=Path, help="only print the table of this JSON lines file")
    parser.add_argument("pytest_args", nargs="*", help="passed to pytest (e.g. -k fuzz)")
    args = parser.parse_args(argv)
    started = time.monotonic()
    if args.report is not None:
        code = 0
        path = args.report
    else:
        path = Path(tempfile.mkstemp(prefix="faults-", suffix=".jsonl")[1])
        path.write_text("")
        code = run(path, quick=args.quick, extra=args.pytest_args)
    lines = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    table, passed, failed = render(lines)
    print()
    print(table)
    print(f"\n{len(lines)} fault checks in {time.monotonic() - started:.0f}s; report {path}")
    print(f"faults: {passed} passed, {failed} failed")
    return 1 if failed or code not in (0, 5) else 0


if __name__ == "__main__":
    sys.exit(main())
