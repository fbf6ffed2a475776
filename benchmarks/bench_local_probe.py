"""Whether a linear read-out of the 1.5B model's last hidden state judges better than the yes/no
log-probabilities the local judge reads today (issue 47: a lead for the reader, not shipped).

The local judge scores P(yes) against P(no) for the first token after its prompt. Those two
logits are one direction (the "yes" rows minus the "no" rows of the output matrix) of the final
hidden state at the prompt's last token. A logistic read-out of the whole state, fitted on
labelled pairs, can only match or beat that direction in-sample; this measures whether it does on
pairs it was not fitted on, before anyone builds it into the judge.

Pairs as issue 47 measured the judge: a SQuAD 2.0 question and its own paragraph, answerable
against SQuAD 2.0's adversarial unanswerable questions, read with the shipped local judge's prompt
(prompts/local_judge.py, the paragraph in place of the sentence). The read-out is fitted on the
shipped judge's train articles (scripts/train_judge.py's split) and its L2 strength chosen on its
tune articles; reported on its test articles: AUC of the read-out, of the yes/no direction of the
same states, and the bootstrap interval of the difference.

    .venv/bin/python benchmarks/bench_local_probe.py [--per-class 250] [--test-per-class 150]
        [--cache FILE]

Starts its own llama-server in embedding mode (`--embeddings --pooling last --embd-normalize -1`:
the last token's final, unnormalised state) on the 1.5B model `make local-model` assembled, and
reads the output matrix's rows from the same GGUF file (the `gguf` package, in the `train` extra).
About 2.5 s a pair on two cores; --cache keeps every state read, so a second run reads none.
Needs ../shared/eval/squad (skips with a message where absent).
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import local_model  # noqa: E402
import train_judge  # noqa: E402

from grounded_agent.grounding.judge.local import judge_prompt  # noqa: E402
from grounded_agent.prompts.local_judge import LOCAL_JUDGE_PROMPT  # noqa: E402

SQUAD = ROOT.parent / "shared" / "eval" / "squad"
MODEL = "qwen2.5-coder-1.5b-instruct"
KINDS = ("answerable", "unanswerable_in_kb_topic")
Pair = dict[str, Any]


def pairs(per_class: dict[str, int], seed: int) -> dict[str, list[Pair]]:
    """Question-and-own-paragraph pairs per split of the judge's articles, label 1 = answerable."""
    kb = train_judge.read_jsonl(SQUAD / "kb_corpus.jsonl")
    heldout = train_judge.read_jsonl(SQUAD / "heldout_corpus.jsonl")
    split = train_judge.split_articles(kb, heldout)
    paragraphs = {row["doc_id"]: row for row in kb}
    questions = train_judge.read_jsonl(SQUAD / "questions.jsonl")
    out: dict[str, list[Pair]] = {}
    for name, n in per_class.items():
        articles = set(split[name])
        chosen: list[Pair] = []
        for kind in KINDS:
            pool = [q for q in questions if q["kind"] == kind and q["gold_doc_id"] in paragraphs
                    and paragraphs[q["gold_doc_id"]]["article"] in articles]
            random.Random(seed).shuffle(pool)
            for q in pool[:n]:
                para = paragraphs[q["gold_doc_id"]]
                chosen.append({"id": q["id"], "y": int(kind == "answerable"),
                               "question": q["question"], "title": para["title"],
                               "text": para["text"]})
        out[name] = chosen
    return out


def prompt(p: Pair) -> str:
    return judge_prompt(LOCAL_JUDGE_PROMPT, p["question"], p["title"], p["text"])


def start_server(port: int, log: Path) -> subprocess.Popen[bytes]:
    cmd = [str(local_model.server_binary()), "-m", str(local_model.model_path(MODEL)),
           "--host", "127.0.0.1", "--port", str(port), "-c", "2048", "-np", "1", "-t", "2",
           "--embeddings", "--pooling", "last", "--embd-normalize", "-1", "-lm", "none",
           "--no-webui"]
    return launch(cmd, port, log)


def launch(cmd: list[str], port: int, log: Path) -> subprocess.Popen[bytes]:
    """Start a llama-server and wait for its /health; exit with the log's place if it fails."""
    proc = subprocess.Popen(cmd, stdout=log.open("ab"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit(f"llama-server exited ({proc.returncode}); see {log}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                return proc
        except httpx.HTTPError:
            pass
        time.sleep(1)
    proc.terminate()
    sys.exit("llama-server was not ready within 300 s")


def state(client: httpx.Client, url: str, text: str) -> list[float]:
    reply = client.post(f"{url}/embedding", json={"content": text}, timeout=120)
    reply.raise_for_status()
    body = reply.json()
    vec = body[0]["embedding"] if isinstance(body, list) else body["embedding"]
    while isinstance(vec[0], list):  # some builds nest the pooled vector
        vec = vec[0]
    return [float(v) for v in vec]


def yes_no_rows(client: httpx.Client, url: str) -> tuple[np.ndarray, np.ndarray]:
    """The output matrix's rows for the tokens the judge counts as yes and as no."""
    import gguf  # the train extra: only this benchmark reads a GGUF file itself

    ids: dict[str, list[int]] = {"yes": [], "no": []}
    for word in ("yes", "Yes", "YES", "no", "No", "NO"):
        toks = client.post(f"{url}/tokenize", json={"content": word}, timeout=30).json()["tokens"]
        if len(toks) == 1:
            ids[word.lower()].append(int(toks[0]))
    reader = gguf.GGUFReader(str(local_model.model_path(MODEL)))
    tensors = {t.name: t for t in reader.tensors}
    matrix = tensors.get("output.weight") or tensors["token_embd.weight"]  # tied in Qwen2.5-1.5B

    def rows(which: list[int]) -> np.ndarray:
        raw = np.asarray(matrix.data)[which]
        return np.asarray(gguf.quants.dequantize(raw, matrix.tensor_type), dtype=np.float64)

    return rows(ids["yes"]), rows(ids["no"])


def direction_score(h: np.ndarray, yes: np.ndarray, no: np.ndarray) -> np.ndarray:
    """log P(yes) - log P(no) among those tokens: what the local judge's score is a logistic of."""
    def lse(m: np.ndarray) -> np.ndarray:
        top = m.max(axis=1, keepdims=True)
        return np.asarray(top[:, 0] + np.log(np.exp(m - top).sum(axis=1)))

    return np.asarray(lse(h @ yes.T) - lse(h @ no.T))


def fit(x: np.ndarray, y: np.ndarray, l2: float, steps: int = 3000) -> np.ndarray:
    """L2-penalised logistic regression by gradient descent on standardised states."""
    w = np.zeros(x.shape[1] + 1)
    z = np.hstack([x, np.ones((len(x), 1))])
    for _ in range(steps):
        p = 1.0 / (1.0 + np.exp(-np.clip(z @ w, -30, 30)))
        grad = z.T @ (p - y) / len(y) + l2 * np.r_[w[:-1], 0.0]
        w -= 0.5 * grad
    return w


def auc(score: np.ndarray, y: np.ndarray) -> float:
    return float(train_judge.pair_order_auc(score[y == 1], score[y == 0]))


def auc_difference(a: np.ndarray, b: np.ndarray, y: np.ndarray, draws: int = 1000
                   ) -> tuple[float, float]:
    """95% paired bootstrap interval of AUC(a) - AUC(b) over the same pairs."""
    rng = np.random.default_rng(0)
    diffs = []
    for _ in range(draws):
        k = rng.integers(0, len(y), len(y))
        if 0 < y[k].sum() < len(k):
            diffs.append(auc(a[k], y[k]) - auc(b[k], y[k]))
    lo, hi = np.percentile(diffs, [2.5, 97.5])
    return float(lo), float(hi)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-class", type=int, default=250, help="train pairs per class")
    parser.add_argument("--tune-per-class", type=int, default=60)
    parser.add_argument("--test-per-class", type=int, default=150)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--cache", type=Path, default=None, help="states read, kept across runs")
    parser.add_argument("--log", type=Path, default=Path("/tmp/bench_local_probe.log"))
    args = parser.parse_args()
    if not SQUAD.is_dir():
        print(f"skipped: {SQUAD} is absent (the team's evaluation data)")
        return 0
    if not local_model.model_ok(MODEL):
        sys.exit("the 1.5B model is not assembled: run `make local-model`")
    data = pairs({"train": args.per_class, "tune": args.tune_per_class,
                  "test": args.test_per_class}, args.seed)
    cache: dict[str, list[float]] = {}
    if args.cache and args.cache.is_file():
        cache = json.loads(args.cache.read_text(encoding="utf-8"))
    port = local_model.free_port()
    url = f"http://127.0.0.1:{port}"
    proc = start_server(port, args.log)
    seconds: list[float] = []
    try:
        with httpx.Client() as client:
            yes, no = yes_no_rows(client, url)
            for name, rows in data.items():
                for i, p in enumerate(rows):
                    if p["id"] not in cache:
                        started = time.perf_counter()
                        cache[p["id"]] = state(client, url, prompt(p))
                        seconds.append(time.perf_counter() - started)
                        if args.cache and len(seconds) % 25 == 0:
                            args.cache.write_text(json.dumps(cache), encoding="utf-8")
                    if i % 50 == 0:
                        print(f"{name}: {i}/{len(rows)} read", file=sys.stderr, flush=True)
    finally:
        proc.terminate()
    if args.cache:
        args.cache.write_text(json.dumps(cache), encoding="utf-8")

    def xy(name: str) -> tuple[np.ndarray, np.ndarray]:
        return (np.array([cache[p["id"]] for p in data[name]], dtype=np.float64),
                np.array([p["y"] for p in data[name]], dtype=np.float64))

    (xtr, ytr), (xtu, ytu), (xte, yte) = xy("train"), xy("tune"), xy("test")
    mu, sd = xtr.mean(0), xtr.std(0) + 1e-6

    def probe(x: np.ndarray, w: np.ndarray) -> np.ndarray:
        return np.asarray(np.hstack([(x - mu) / sd, np.ones((len(x), 1))]) @ w)

    l2s = (1.0, 0.3, 0.1, 0.03, 0.01)  # the grid, fixed before any pair was read
    tuned = {l2: auc(probe(xtu, fit((xtr - mu) / sd, ytr, l2)), ytu) for l2 in l2s}
    best = max(l2s, key=lambda l2: (tuned[l2], l2))
    w = fit((xtr - mu) / sd, ytr, best)
    s_probe, s_dir = probe(xte, w), direction_score(xte, yes, no)
    lo, hi = auc_difference(s_probe, s_dir, yte)
    print(f"pairs: train {len(ytr)}, tune {len(ytu)}, test {len(yte)} (half answerable)")
    print("L2 on the tune articles (read-out AUC): "
          + ", ".join(f"{k:g} {v:.3f}" for k, v in tuned.items()) + f"; chosen {best:g}")
    print(f"tune articles: yes/no direction {auc(direction_score(xtu, yes, no), ytu):.3f}")
    print(f"test articles: read-out {auc(s_probe, yte):.3f}, yes/no direction "
          f"{auc(s_dir, yte):.3f}; difference 95% interval {lo:+.3f} to {hi:+.3f}")
    if seconds:
        print(f"seconds per pair: p50 {float(np.median(seconds)):.2f} ({len(seconds)} read)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
