"""What the offline judge costs: its load time, its size, and the latency the veto adds to an
offline question (the judge reading the sentences the extractive answer would quote).

Questions and passages come from the sample knowledge base that ships with the package, so it
runs on any clone; each question is scored once against the quoted sentences of the passage that
answers it and once against a passage of another document (the two sentences the veto reads at
most).

    python benchmarks/bench_judge.py [--rounds 5] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from grounded_agent.judge import MODEL_DIR, Judge
from grounded_agent.text import split_sentences

SAMPLE = Path(__file__).resolve().parents[1] / "src" / "grounded_agent" / "sample"


def questions() -> list[str]:
    lines = (SAMPLE / "questions.txt").read_text(encoding="utf-8").splitlines()
    return [line.split("|", 1)[1].strip() for line in lines
            if "|" in line and not line.lstrip().startswith("#")]


def sentences() -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for path in sorted((SAMPLE / "kb").glob("*.md")):
        body = path.read_text(encoding="utf-8").split("---", 2)[-1]
        out += [(path.stem, s) for s in split_sentences(body)[:6]]
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    started = time.perf_counter()
    judge = Judge.from_dir(MODEL_DIR)
    load_ms = (time.perf_counter() - started) * 1000
    qs, pool = questions(), sentences()
    timings: list[float] = []
    for _ in range(args.rounds):
        for i, q in enumerate(qs):
            pair = [pool[(3 * i) % len(pool)], pool[(3 * i + 7) % len(pool)]]
            t0 = time.perf_counter()
            judge.score(q, pair)
            timings.append((time.perf_counter() - t0) * 1000)
    timings.sort()
    result = {
        "model_bytes": (MODEL_DIR / "judge.onnx").stat().st_size,
        "load_ms": round(load_ms, 1),
        "questions": len(timings),
        "veto_ms_p50": round(statistics.median(timings), 2),
        "veto_ms_p95": round(timings[int(0.95 * (len(timings) - 1))], 2),
        "veto_ms_max": round(timings[-1], 2),
    }
    if args.json:
        print(json.dumps(result))
    else:
        print(f"judge.onnx {result['model_bytes'] / 1e6:.1f} MB, loaded in {load_ms:.0f} ms")
        print(f"veto per question (2 sentences, {len(timings)} runs): p50 "
              f"{result['veto_ms_p50']} ms, p95 {result['veto_ms_p95']} ms, max "
              f"{result['veto_ms_max']} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
