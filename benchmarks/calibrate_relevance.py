"""Fits the relevance calibration (grounded_agent.store.relevance) on ../shared/eval/squad.

Positives: answerable questions with their gold paragraph. Negatives: out_of_kb questions with
the paragraph the embedding search ranks first. Features: cosine similarity and IDF-weighted
coverage of the question's terms (IDF over the 1,204 knowledge-base paragraphs, as the store
keeps it). A logistic regression is fitted on a seeded 70/30 split; the script prints the
coefficients to copy into relevance.py, the held-out accuracy, and the distribution of the best
calibrated score over the top 20 candidates for each kind of question.

    .venv/bin/python benchmarks/calibrate_relevance.py [--per-kind 1500] [--cache DIR]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

from grounded_agent.store.embeddings import local_embeddings
from grounded_agent.store.relevance import (
    COEF_COSINE,
    COEF_COVERAGE,
    INTERCEPT,
    coverage,
    idf_weight,
    terms,
)

SQUAD = Path(__file__).resolve().parents[1].parent / "shared" / "eval" / "squad"
KINDS = ("answerable", "unanswerable_in_kb_topic", "out_of_kb")


def load(per_kind: int, seed: int) -> tuple[list[dict[str, object]], list[dict[str, object]]]:
    corpus = [json.loads(x) for x in (SQUAD / "kb_corpus.jsonl").open()]
    questions = [json.loads(x) for x in (SQUAD / "questions.jsonl").open()]
    rng = random.Random(seed)
    chosen: list[dict[str, object]] = []
    for kind in KINDS:
        of_kind = [q for q in questions if q["kind"] == kind]
        rng.shuffle(of_kind)
        chosen += of_kind[:per_kind]
    return corpus, chosen


def embed(texts: list[str], cache: Path | None, name: str) -> np.ndarray:
    path = cache / f"{name}_{len(texts)}.npy" if cache else None
    if path is not None and path.exists():
        return np.load(path)
    started = time.perf_counter()
    vectors = np.asarray(local_embeddings().embed_documents(texts), dtype=np.float32)
    print(f"embedded {len(texts)} {name} in {time.perf_counter() - started:.1f}s", file=sys.stderr)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        np.save(path, vectors)
    return vectors


def fit_logistic(x: np.ndarray, y: np.ndarray, l2: float = 1e-3) -> np.ndarray:
    """Newton-Raphson (IRLS) with a small ridge; returns weights with the intercept last."""
    a = np.c_[x, np.ones(len(x))]
    w = np.zeros(a.shape[1])
    for _ in range(50):
        p = 1 / (1 + np.exp(-a @ w))
        hess = a.T @ (a * (p * (1 - p))[:, None]) + l2 * np.eye(a.shape[1])
        w -= np.linalg.solve(hess, a.T @ (p - y) + l2 * w)
    return w


def predict(w: np.ndarray, x: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-(np.c_[x, np.ones(len(x))] @ w)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-kind", type=int, default=1500)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cache", type=Path, default=None, help="keep embeddings here")
    args = parser.parse_args()
    if not (SQUAD / "kb_corpus.jsonl").exists():
        print(f"skipped: {SQUAD} is absent (evaluation data lives outside the project)")
        return 0

    corpus, chosen = load(args.per_kind, args.seed)
    texts = [str(c["text"]) for c in corpus]
    index = {str(c["doc_id"]): i for i, c in enumerate(corpus)}
    para = embed(texts, args.cache, "paragraphs")
    quest = embed([str(q["question"]) for q in chosen], args.cache, f"questions_s{args.seed}")
    sims = quest @ para.T

    df: Counter[str] = Counter()
    for t in texts:
        df.update(set(terms(t)))
    n_docs = len(texts)

    def features(question: str, i_q: int, i_p: int) -> list[float]:
        qt = set(terms(question))
        weights = {t: idf_weight(df.get(t, 0), n_docs) for t in qt}
        return [float(sims[i_q, i_p]), coverage(qt, texts[i_p], weights)]

    rows, labels, owners = [], [], []
    for i, q in enumerate(chosen):
        if q["kind"] == "answerable":
            rows.append(features(str(q["question"]), i, index[str(q["gold_doc_id"])]))
            labels.append(1.0)
        elif q["kind"] == "out_of_kb":
            rows.append(features(str(q["question"]), i, int(sims[i].argmax())))
            labels.append(0.0)
        else:
            continue
        owners.append(i)
    x, y = np.array(rows), np.array(labels)
    perm = np.random.default_rng(args.seed).permutation(len(y))
    cut = int(0.7 * len(y))
    train, test = perm[:cut], perm[cut:]
    w = fit_logistic(x[train], y[train])
    acc = float(((predict(w, x[test]) >= 0.5) == y[test]).mean())
    base = float(
        (
            (predict(fit_logistic(x[train][:, :1], y[train]), x[test][:, :1]) >= 0.5) == y[test]
        ).mean()
    )
    print(f"training pairs {len(train)}, held-out pairs {len(test)}")
    print(f"COEF_COSINE = {w[0]:.3f}\nCOEF_COVERAGE = {w[1]:.3f}\nINTERCEPT = {w[2]:.3f}")
    print(f"held-out accuracy {acc:.3f} (cosine alone: {base:.3f})")
    print(f"constants in relevance.py: {COEF_COSINE}, {COEF_COVERAGE}, {INTERCEPT}")

    held_out = {owners[j] for j in test}
    print(
        "\nbest calibrated score over the top 20 candidates (held-out questions; all of "
        "unanswerable_in_kb_topic, which was not fitted)"
    )
    print(f"{'kind':26s} {'n':>5s}  p10  p25  p50  p75  p90  >=0.75  <0.55  raw-cos p50")
    for kind in KINDS:
        best, raw = [], []
        for i, q in enumerate(chosen):
            if q["kind"] != kind or (kind != "unanswerable_in_kb_topic" and i not in held_out):
                continue
            top = np.argsort(-sims[i])[:20]
            feats = np.array([features(str(q["question"]), i, int(p)) for p in top])
            best.append(float(predict(w, feats).max()))
            raw.append(float(sims[i, top[0]]))
        b = np.array(best)
        pct = " ".join(f"{v:.2f}" for v in np.percentile(b, [10, 25, 50, 75, 90]))
        print(
            f"{kind:26s} {len(b):5d}  {pct}  {(b >= 0.75).mean():6.2f} {(b < 0.55).mean():6.2f}"
            f"  {np.median(raw):.2f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
