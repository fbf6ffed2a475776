"""Reads a LoRA adapter of the 1.5B judge (bench_local_lora.py --save) through llama-server, as the
local judge would: the same test-article sentence pairs, each scored with the adapter off and on
in one server (the request's `lora` scale), AUC of both and the bootstrap interval of the
difference. Not shipped; issue 47's last lever.

    .venv/bin/python benchmarks/bench_local_lora_read.py ADAPTER.gguf [--test-per-class 150]
        [--log FILE]

Starts its own llama-server (the local judge's sizing, `--lora ADAPTER`) on the model `make
local-model` assembled. About 1 s a reading on two cores. Needs ../shared/eval/squad.
"""

from __future__ import annotations

import argparse
import math
import subprocess
import sys
import time
from pathlib import Path

import httpx
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_local_lora  # noqa: E402
import bench_local_probe  # noqa: E402
import local_model  # noqa: E402

from grounded_agent.grounding.judge.local import (  # noqa: E402
    TOP_TOKENS,
    judge_prompt,
    yes_probability,
)
from grounded_agent.prompts.local_judge import LOCAL_JUDGE_PROMPT  # noqa: E402


def log_odds(p: float) -> float:
    p = min(max(p, 1e-9), 1 - 1e-9)
    return math.log(p / (1 - p))


def start(adapter: Path, port: int, log: Path) -> subprocess.Popen[bytes]:
    cmd = [str(local_model.server_binary()), "-m", str(local_model.model_path(bench_local_lora.MODEL)),
           "--host", "127.0.0.1", "--port", str(port), "-c", "2048", "-np", "1", "-t", "2",
           "-lm", "none", "-cram", "0", "--no-webui", "--lora", str(adapter)]
    return bench_local_probe.launch(cmd, port, log)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("adapter", type=Path)
    parser.add_argument("--test-per-class", type=int, default=150)
    parser.add_argument("--log", type=Path, default=Path("/tmp/bench_local_lora_read.log"))
    args = parser.parse_args()
    if not bench_local_lora.SQUAD.is_dir():
        print(f"skipped: {bench_local_lora.SQUAD} is absent (the team's evaluation data)")
        return 0
    test = bench_local_lora.balanced("test", args.test_per_class, 3)
    port = local_model.free_port()
    proc = start(args.adapter, port, args.log)
    scores: dict[float, list[float]] = {0.0: [], 1.0: []}
    started = time.perf_counter()
    try:
        with httpx.Client(timeout=120) as client:
            for pair in test:
                prompt = judge_prompt(LOCAL_JUDGE_PROMPT, pair.question, pair.title, pair.sentence)
                for scale, out in scores.items():
                    body = {"prompt": prompt, "n_predict": 1, "n_probs": TOP_TOKENS,
                            "temperature": 0.0, "lora": [{"id": 0, "scale": scale}]}
                    reply = client.post(f"http://127.0.0.1:{port}/completion", json=body)
                    reply.raise_for_status()
                    out.append(log_odds(yes_probability(reply.json())))
    finally:
        proc.terminate()
    y = np.array([p.label for p in test])
    base, tuned = np.array(scores[0.0]), np.array(scores[1.0])
    auc = bench_local_probe.auc
    print(f"{len(test)} test-article sentence pairs, "
          f"{(time.perf_counter() - started) / (2 * len(test)):.2f} s a reading")
    print(f"AUC adapter off {auc(base, y):.3f}, on {auc(tuned, y):.3f}")
    lo, hi = bench_local_probe.auc_difference(tuned, base, y, draws=2000)
    print(f"difference 95% interval {lo:+.3f} to {hi:+.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
