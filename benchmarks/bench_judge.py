"""What the offline judge costs: its load time, its size, and the latency it adds to an offline
question: `judge.reading.read`, the whole of the judge's work per answer (the sentences the
extractive answer would quote and every candidate sentence of the top three passages, one run
each).

Questions and passages come from the sample knowledge base that ships with the package, so it
runs on any clone: its Markdown documents cut at their headings, and for each question the three
sections sharing the most words with it (a stand-in for the search, which needs the database; it
gives the reader the same kind and number of sentences).

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

from grounded_agent.grounding.judge import MODEL_DIR, Judge
from grounded_agent.grounding.judge.reading import candidate_sentences, read
from grounded_agent.schemas import Finding

SAMPLE = Path(__file__).resolve().parents[1] / "src" / "grounded_agent" / "sample"


def questions() -> list[str]:
    lines = (SAMPLE / "questions.txt").read_text(encoding="utf-8").splitlines()
    return [line.split("|", 1)[1].strip() for line in lines
            if "|" in line and not line.lstrip().startswith("#")]


def sections() -> list[Finding]:
    out: list[Finding] = []
    for path in sorted((SAMPLE / "kb").glob("*.md")):
        body = path.read_text(encoding="utf-8").split("---", 2)[-1]
        for i, part in enumerate(p for p in body.split("\n## ") if p.strip()):
            out.append(Finding(source="knowledge_base", source_id=path.stem, title=path.stem,
                               text=part.strip(), chunk_index=i, score=0.9))
    return out


def evidence(question: str, pool: list[Finding]) -> list[Finding]:
    words = set(question.lower().split())
    return sorted(pool, key=lambda f: -len(words & set(f.text.lower().split())))[:3]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    started = time.perf_counter()
    judge = Judge.from_dir(MODEL_DIR)
    load_ms = (time.perf_counter() - started) * 1000
    qs, pool = questions(), sections()
    timings: list[float] = []
    counts: list[int] = []
    for _ in range(args.rounds):
        for q in qs:
            found = evidence(q, pool)
            counts.append(len(candidate_sentences(found)))
            t0 = time.perf_counter()
            read(q, found, judge)
            timings.append((time.perf_counter() - t0) * 1000)
    timings.sort()
    result = {
        "model_bytes": (MODEL_DIR / "judge.onnx").stat().st_size,
        "load_ms": round(load_ms, 1),
        "questions": len(timings),
        "sentences_p50": statistics.median(counts),
        "sentences_max": max(counts),
        "added_ms_p50": round(statistics.median(timings), 2),
        "added_ms_p95": round(timings[int(0.95 * (len(timings) - 1))], 2),
        "added_ms_max": round(timings[-1], 2),
    }
    if args.json:
        print(json.dumps(result))
    else:
        print(f"judge.onnx {result['model_bytes'] / 1e6:.1f} MB, loaded in {load_ms:.0f} ms")
        print(f"added per question ({len(timings)} runs; candidate sentences p50 "
              f"{result['sentences_p50']}, max {result['sentences_max']}): p50 "
              f"{result['added_ms_p50']} ms, p95 {result['added_ms_p95']} ms, max "
              f"{result['added_ms_max']} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
