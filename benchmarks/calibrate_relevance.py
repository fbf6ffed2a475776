"""Fits the relevance calibration (grounded_agent.store.relevance) across several knowledge bases.

Knowledge bases: SQuAD-derived (../shared/eval/squad: the 35-article KB, and the swapped one made
of the held-out articles), and the project's own one-domain KBs under benchmarks/kbs/. Chunks are
made by the project's own ingester and scored as the store scores them: candidates are the 20
nearest by cosine plus the 20 best by weighted term coverage (the full-text half of the hybrid
search), the features those of `relevance.features`.

Pairs: an answerable question with its gold chunk (label 1) and with its best-ranked other chunk
(label 0); an out-of-KB or near-miss question with its best-ranked chunk (label 0).

Honesty: constants are fitted on the TRAIN part only: SQuAD and swapped SQuAD split by article
(70/30, seeded), plus the own KBs named by --fit-kbs; everything else is held out, and the
report shows each KB's held-out numbers (best calibrated score over the candidates per kind, the
share at >= 0.75 and < 0.55, top-1 of the gold chunk).

    .venv/bin/python benchmarks/calibrate_relevance.py [--fit-kbs northwind_it] [--cache DIR]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from grounded_agent.grounding.text import content_stems, stems_coverage, term_weights
from grounded_agent.store import relevance
from grounded_agent.store.embeddings import local_embeddings
from grounded_agent.store.ingest import chunk_document, load_file
from grounded_agent.store.vectorstore import passage_text

ROOT = Path(__file__).resolve().parent
SQUAD = Path(os.environ.get("GROUNDED_AGENT_EVAL_DATA", "../shared/eval/squad"))
NEGATIVE_KINDS = ("out_of_kb", "unanswerable_in_kb_topic")


@dataclass
class KB:
    name: str
    chunks: list[str]  # passage text as embedded (title, section, text)
    owner: list[str]  # doc id of each chunk
    group: list[str]  # split unit of each chunk (article or document)
    questions: list[dict[str, object]] = field(default_factory=list)
    vectors: np.ndarray | None = None
    dfs: dict[str, int] = field(default_factory=dict)
    stems: list[set[str]] = field(default_factory=list)


def _squad_kb(name: str, corpus: Path, questions: list[dict[str, object]]) -> KB:
    rows = [json.loads(x) for x in corpus.open(encoding="utf-8")]
    return KB(
        name,
        [passage_text(r.get("title"), None, r["text"]) for r in rows],
        [str(r["doc_id"]) for r in rows],
        [str(r.get("article") or r["doc_id"]).split("#")[0] for r in rows],
        questions,
    )


def load_squad(per_kind: int, seed: int) -> list[KB]:
    qpath = SQUAD / "questions.jsonl"
    if not qpath.exists():
        print(f"SQuAD skipped: {SQUAD} is absent", file=sys.stderr)
        return []
    questions = [json.loads(x) for x in qpath.open(encoding="utf-8")]
    rng = random.Random(seed)
    kbs = []
    main = [q for q in questions if q["kind"] in ("answerable", "out_of_kb")]
    rng.shuffle(main)
    chosen = [q for q in main if q["kind"] == "answerable"][:per_kind]
    chosen += [q for q in main if q["kind"] == "out_of_kb"][:per_kind]
    kbs.append(_squad_kb("squad", SQUAD / "kb_corpus.jsonl", chosen))
    held = SQUAD / "heldout_corpus.jsonl"
    if held.exists():
        # Swapped: the held-out articles are the KB. Their questions are answerable where the
        # SQuAD answer text occurs in a held-out paragraph; the KB articles' questions are out.
        paras = [json.loads(x) for x in held.open(encoding="utf-8")]
        swapped: list[dict[str, object]] = []
        for q in [q for q in questions if q["kind"] == "out_of_kb"]:
            answers = [str(a) for a in q.get("answers") or []]  # type: ignore[attr-defined]
            gold = str(q.get("gold_doc_id") or "")
            if answers and gold and any(p["doc_id"] == gold for p in paras):
                swapped.append({**q, "kind": "answerable"})
        rng.shuffle(swapped)
        outs = [{**q, "kind": "out_of_kb", "gold_doc_id": None}
                for q in questions if q["kind"] == "answerable"]
        rng.shuffle(outs)
        kbs.append(_squad_kb("squad_swapped", held, swapped[:per_kind] + outs[:per_kind]))
    return kbs


def load_own(root: Path) -> list[KB]:
    kbs = []
    for folder in sorted(p for p in root.glob("*") if (p / "questions.jsonl").exists()):
        docs = []
        for path in sorted((folder / "docs").glob("*.md")):
            loaded, _errors = load_file(path)
            docs.extend(loaded)
        latest: dict[str, object] = {}
        for d in docs:  # the active version: the latest document_date of each id
            cur = latest.get(d.doc_id)
            if cur is None or (d.document_date or 0) > (cur.document_date or 0):  # type: ignore[attr-defined,operator]
                latest[d.doc_id] = d
        chunks, owner = [], []
        for d in latest.values():
            for c in chunk_document(d):  # type: ignore[arg-type]
                chunks.append(passage_text(d.title, c.section, c.content))  # type: ignore[attr-defined]
                owner.append(d.doc_id)  # type: ignore[attr-defined]
        qs = [json.loads(x) for x in (folder / "questions.jsonl").open(encoding="utf-8")]
        kbs.append(KB(folder.name, chunks, owner, list(owner), qs))
    return kbs


def embed(texts: list[str], cache: Path | None) -> np.ndarray:
    key = hashlib.sha256("\0".join(texts).encode()).hexdigest()[:16]
    path = cache / f"emb_{key}.npy" if cache else None
    if path is not None and path.exists():
        return np.load(path)
    started = time.perf_counter()
    vectors = np.asarray(local_embeddings().embed_documents(texts), dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True) + 1e-9
    print(f"embedded {len(texts)} texts in {time.perf_counter() - started:.1f}s", file=sys.stderr)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        np.save(path, vectors)
    return vectors


def gold_chunks(kb: KB, q: dict[str, object]) -> set[int]:
    """Chunks of the gold document holding an answer (all its chunks when none quotes one)."""
    gold = q.get("gold_doc_id")
    of_doc = [i for i, o in enumerate(kb.owner) if o == gold]
    answers = [str(a).lower() for a in q.get("answers") or []]  # type: ignore[attr-defined]
    with_answer = {i for i in of_doc if any(a in kb.chunks[i].lower() for a in answers)}
    return with_answer or set(of_doc)


def candidates(kb: KB, qvec: np.ndarray, weights: dict[str, float], n: int = 20) -> list[int]:
    assert kb.vectors is not None
    sims = kb.vectors @ qvec
    by_cos = list(np.argsort(-sims)[:n])
    covs = np.array([stems_coverage(weights, st) for st in kb.stems])
    by_lex = [int(i) for i in np.argsort(-covs)[:n] if covs[i] > 0]
    return list(dict.fromkeys([int(i) for i in by_cos] + by_lex))


def fit_logistic(
    x: np.ndarray, y: np.ndarray, sw: np.ndarray | None = None, l2: float = 1e-2
) -> np.ndarray:
    """Weighted Newton-Raphson (IRLS) with a small ridge; weights with the intercept last."""
    a = np.c_[x, np.ones(len(x))]
    sw = np.ones(len(y)) if sw is None else sw
    w = np.zeros(a.shape[1])
    for _ in range(60):
        p = 1 / (1 + np.exp(-a @ w))
        hess = a.T @ (a * (sw * p * (1 - p))[:, None]) + l2 * np.eye(a.shape[1])
        w -= np.linalg.solve(hess, a.T @ (sw * (p - y)) + l2 * w)
    return w


def predict(w: np.ndarray, x: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-(np.c_[x, np.ones(len(x))] @ w)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-kind", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--kbs-root", type=Path, default=ROOT / "kbs")
    parser.add_argument("--fit-kbs", nargs="*",
                        default=["northwind_it", "harbor_library", "clearwater_utility"],
                        help="own KBs used for fitting (the others are held out)")
    parser.add_argument("--leave-one-out", action="store_true",
                        help="also fit once per own KB with that KB held out")
    parser.add_argument("--negatives", choices=("out", "all"), default="all",
                        help="out: only questions the KB cannot answer give negatives; all: also "
                        "the best non-gold chunk of an answerable question")
    parser.add_argument("--cache", type=Path, default=Path(".cache/calibration"))
    args = parser.parse_args()

    kbs = load_squad(args.per_kind, args.seed) + load_own(args.kbs_root)
    rng = random.Random(args.seed)
    rows: list[tuple[str, bool, int, list[float], float, str, bool]] = []
    # (kb, train?, question index, features, label, kind, is-gold-candidate)
    per_question: dict[tuple[str, int], list[tuple[list[float], bool]]] = {}
    for kb in kbs:
        kb.vectors = embed(kb.chunks, args.cache)
        kb.stems = [content_stems(c) for c in kb.chunks]
        for st in kb.stems:
            for t in st:
                kb.dfs[t] = kb.dfs.get(t, 0) + 1
        groups = sorted(set(kb.group))
        rng.shuffle(groups)
        train_groups = set(groups[: int(0.7 * len(groups))])
        qtexts = [str(q["question"]) for q in kb.questions]
        qvecs = embed(qtexts, args.cache)
        for i, q in enumerate(kb.questions):
            weights = term_weights(str(q["question"]), len(kb.chunks), kb.dfs)
            cands = candidates(kb, qvecs[i], weights)
            golds = gold_chunks(kb, q) if q["kind"] == "answerable" else set()
            feats = [
                relevance.features(weights, kb.chunks[c], float(kb.vectors[c] @ qvecs[i]))
                for c in cands
            ]
            per_question[(kb.name, i)] = [(f, c in golds) for f, c in zip(feats, cands, strict=True)]
            if kb.name.startswith("squad"):
                grp = kb.group[next(iter(golds))] if golds else None
                # an out-of-KB question goes to a split by chance
                train = rng.random() < 0.7 if grp is None else grp in train_groups
            else:
                train = kb.name in args.fit_kbs
            if q["kind"] == "answerable":
                for f, is_gold in per_question[(kb.name, i)]:
                    if is_gold:
                        rows.append((kb.name, train, i, f, 1.0, "answerable", True))
                        break
                others = [f for f, g in per_question[(kb.name, i)] if not g]
                if others and args.negatives == "all":
                    best = max(others, key=lambda f: relevance.calibrated_from(f))
                    rows.append((kb.name, train, i, best, 0.0, "answerable-other", False))
            elif q["kind"] in NEGATIVE_KINDS:
                best = max((f for f, _ in per_question[(kb.name, i)]),
                           key=lambda f: relevance.calibrated_from(f), default=None)
                if best is not None:
                    rows.append((kb.name, train, i, best, 0.0, str(q["kind"]), False))

    own = [kb.name for kb in kbs if not kb.name.startswith("squad")]
    if args.leave_one_out:
        print("LEAVE-ONE-KB-OUT over the own KBs (fit: SQuAD train articles + the other own KBs)")
        for held in own:
            fit = {k for k in own if k != held}
            w, _ = fit_and_print(rows, kbs, lambda r, fit=fit: r[1] if r[0].startswith("squad")  # type: ignore[misc]
                                 else r[0] in fit, quiet=True)
            report(w, rows, kbs, per_question, only={held})
    fit_kbs = set(args.fit_kbs)
    w, _ = fit_and_print(rows, kbs, lambda r: r[1] if r[0].startswith("squad") else r[0] in fit_kbs)
    print("\nHELD-OUT of that fit: best calibrated score over the candidates, per KB and kind")
    held_out = {kb.name for kb in kbs if kb.name not in fit_kbs}
    report(w, rows, kbs, per_question, only=held_out)

    # The order: which candidate answers, among those of one question. A pairwise model (gold
    # minus each other candidate), every training KB weighing the same; no intercept.
    diffs, dw = [], []
    trained = {(r[0], r[2]) for r in rows if r[1] if r[0].startswith("squad")}
    for kb in kbs:
        pairs = []
        for i, q in enumerate(kb.questions):
            is_fit = (kb.name, i) in trained if kb.name.startswith("squad") else kb.name in fit_kbs
            if q["kind"] != "answerable" or not is_fit:
                continue
            cand = per_question[(kb.name, i)]
            gold = [f for f, g in cand if g]
            if gold:
                pairs += [np.array(gold[0]) - np.array(f) for f, g in cand if not g]
        for d in pairs:
            diffs.append(d)
            dw.append(1.0 / len(pairs))
    dx = np.array(diffs)
    xs = np.r_[dx, -dx]
    ys = np.r_[np.ones(len(dx)), np.zeros(len(dx))]
    ws = np.r_[dw, dw] * len(xs) / (2 * sum(dw))
    order_w = fit_logistic(xs, ys, ws)[:-1]
    print("\nRANKING model (pairwise, no intercept):",
          ", ".join(f"{n} {v:.3f}" for n, v in zip(relevance.FEATURE_NAMES, order_w, strict=True)))
    print(f"  in relevance.py now: {relevance.RANK_COEFFICIENTS}")
    print(f"{'kb':20s} top1 by relevance / by ranking model, top3 by ranking model (held out)")
    for kb in kbs:
        if kb.name not in held_out and not kb.name.startswith("squad"):
            continue
        t_rel, t_rank, t3 = [], [], []
        for i, q in enumerate(kb.questions):
            if q["kind"] != "answerable" or (kb.name, i) in trained:
                continue
            cand = per_question[(kb.name, i)]
            if not cand:
                continue
            x = np.array([f for f, _ in cand])
            rel = predict(w, x)
            rank = x @ order_w
            t_rel.append(cand[int(rel.argmax())][1])
            t_rank.append(cand[int(rank.argmax())][1])
            t3.append(any(cand[int(o)][1] for o in np.argsort(-rank)[:3]))
        print(f"{kb.name:20s} {np.mean(t_rel):.3f} / {np.mean(t_rank):.3f}, {np.mean(t3):.3f}")
    return 0


Row = tuple[str, bool, int, list[float], float, str, bool]


def fit_and_print(
    rows: list[Row], kbs: list[KB], is_train: Callable[[Row], bool], quiet: bool = False
) -> tuple[np.ndarray, set[tuple[str, int]]]:
    train_rows = [r for r in rows if is_train(r)]
    x = np.array([r[3] for r in train_rows])
    y = np.array([r[4] for r in train_rows])
    # every training KB weighs the same in the fit: SQuAD's thousands of pairs must not decide
    # alone what a score means on a small KB asked in everyday words
    per_kb = {k: sum(1 for r in train_rows if r[0] == k) for k in {r[0] for r in train_rows}}
    sw = np.array([len(train_rows) / (len(per_kb) * per_kb[r[0]]) for r in train_rows])
    w = fit_logistic(x, y, sw)
    if not quiet:
        print(f"fitted on {len(train_rows)} pairs, per KB {per_kb} (SQuAD sets: train articles)")
        for n, v in zip([*relevance.FEATURE_NAMES, "intercept"], w, strict=True):
            print(f"  {n:>18s} = {v:.3f}")
        print(f"  in relevance.py now: {relevance.COEFFICIENTS}")
    return w, {(r[0], r[2]) for r in train_rows}


def report(
    w: np.ndarray, rows: list[Row], kbs: list[KB],
    per_question: dict[tuple[str, int], list[tuple[list[float], bool]]], only: set[str],
) -> None:
    print(f"{'kb':20s} {'kind':26s} {'n':>4s}  p10  p50  p90  >=0.75  <0.55  top1  top3")
    trained_squad = {(r[0], r[2]) for r in rows if r[1] and r[0].startswith("squad")}
    for kb in kbs:
        if kb.name not in only:
            continue
        for kind in ("answerable", "unanswerable_in_kb_topic", "out_of_kb"):
            best, top1, top3 = [], [], []
            for i, q in enumerate(kb.questions):
                if q["kind"] != kind or (kb.name, i) in trained_squad:
                    continue
                cand = per_question[(kb.name, i)]
                scores = predict(w, np.array([f for f, _ in cand])) if cand else np.array([0.0])
                best.append(float(scores.max()))
                if kind == "answerable" and cand:
                    order = np.argsort(-scores)
                    top1.append(bool(cand[int(order[0])][1]))
                    top3.append(any(cand[int(o)][1] for o in order[:3]))
            if not best:
                continue
            b = np.array(best)
            pct = " ".join(f"{v:.2f}" for v in np.percentile(b, [10, 50, 90]))
            t1 = f"{np.mean(top1):.3f} {np.mean(top3):.3f}" if top1 else "  -     -  "
            print(f"{kb.name:20s} {kind:26s} {len(b):4d}  {pct}  {(b >= 0.75).mean():6.2f} "
                  f"{(b < 0.55).mean():6.2f}  {t1}")


if __name__ == "__main__":
    raise SystemExit(main())
