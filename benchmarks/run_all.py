"""Runs every benchmark in sequence (one at a time: the machine has two cores); `make bench`."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
BENCHMARKS = ("bench_graph.py", "bench_endpoint.py", "bench_cli.py")


def main() -> int:
    failed = []
    for name in BENCHMARKS:
        print(f"== {name}", flush=True)
        started = time.perf_counter()
        code = subprocess.run([sys.executable, str(HERE / name), *sys.argv[1:]], check=False).returncode
        print(f"   ({time.perf_counter() - started:.1f} s, exit {code})", flush=True)
        if code:
            failed.append(name)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
