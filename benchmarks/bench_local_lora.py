"""Issue 47's last lever: does a small LoRA adapter, trained here on the judge's train articles,
raise the 1.5B judge's AUC on sentence pairs of its test articles? Not shipped.

The judge reads, with the shipped prompt (prompts/local_judge.py), whether a sentence states the
answer; its score is the log-odds of yes against no for the first token. This dequantises the
1.5B model from its GGUF into torch (fp32), adds rank-8 adapters to every layer's query and value
projections, trains them on balanced SQuAD 2.0 sentence pairs of the judge's train articles (the
answer's sentence against the closest sentence of an adversarial unanswerable question's own
paragraph; scripts/train_judge.py's pairs), `--batch` pairs a step, and reports the AUC on pairs
of the test articles built the same way, before and after, with a bootstrap interval of the
difference.

    .venv/bin/python benchmarks/bench_local_lora.py [--per-class 100] [--test-per-class 60]
        [--batch 1] [--lr 2e-4] [--save adapter.gguf] [--no-eval]

Needs the `train` extra (with `accelerate`: transformers reads GGUF files only with it), the model
`make local-model` assembled and ../shared/eval/squad. About 6 s a training pair and 3.5 s a
scored pair on two cores, 9 GB resident. `--save` writes the adapter as a llama.cpp LoRA GGUF (every
100 pairs and at the end), which `llama-server --lora FILE` applies to the same model; `--no-eval`
leaves the before/after reading to bench_local_lora_read.py, through that server.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_local_probe  # noqa: E402
import local_model  # noqa: E402
import train_judge  # noqa: E402

from grounded_agent.grounding.judge.local import judge_prompt  # noqa: E402
from grounded_agent.grounding.sentences import split_sentences  # noqa: E402
from grounded_agent.prompts.local_judge import LOCAL_JUDGE_PROMPT  # noqa: E402

SQUAD = ROOT.parent / "shared" / "eval" / "squad"
MODEL = "qwen2.5-coder-1.5b-instruct"
RANK = 8
SCALE = 2.0
"""The adapter adds SCALE * x A B; llama.cpp scales by alpha / rank, so alpha = SCALE * RANK."""


def balanced(split: str, n: int, seed: int) -> list[Any]:
    """n answer sentences and n closest sentences of unanswerable questions, of one article split."""
    kb = train_judge.read_jsonl(SQUAD / "kb_corpus.jsonl")
    heldout = train_judge.read_jsonl(SQUAD / "heldout_corpus.jsonl")
    articles = train_judge.split_articles(kb, heldout)
    paragraphs = {row["doc_id"]: row for row in kb}
    questions = train_judge.read_jsonl(SQUAD / "questions.jsonl")
    sentences = {d: split_sentences(r["text"]) or [r["text"]] for d, r in paragraphs.items()}
    pairs = train_judge.build_pairs(questions, paragraphs, sentences, set(articles[split]),
                                    random.Random(seed), paragraph_negatives=0,
                                    unanswerable_negatives=1)
    pos = [p for p in pairs if p.label == 1.0]
    neg = [p for p in pairs if p.label == 0.0]
    rng = random.Random(seed)
    rng.shuffle(pos)
    rng.shuffle(neg)
    return pos[:n] + neg[:n]


def save_adapter(path: Path, adapters: list[tuple[str, Any, Any]]) -> None:
    """Write (GGUF base tensor name, A, B) as a llama.cpp LoRA adapter: lora_a is (rank, in) and
    lora_b is (out, rank) in numpy order, as llama-adapter.cpp checks them against the model."""
    import gguf

    writer = gguf.GGUFWriter(str(path), "qwen2")
    writer.add_type(gguf.GGUFType.ADAPTER)
    writer.add_string(gguf.Keys.Adapter.TYPE, "lora")
    writer.add_float32(gguf.Keys.Adapter.LORA_ALPHA, SCALE * RANK)
    for name, a, b in adapters:
        writer.add_tensor(f"{name}.lora_a", a.detach().T.contiguous().numpy().astype(np.float32))
        writer.add_tensor(f"{name}.lora_b", b.detach().T.contiguous().numpy().astype(np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-class", type=int, default=100, help="training pairs per class")
    parser.add_argument("--test-per-class", type=int, default=60)
    parser.add_argument("--batch", type=int, default=1, help="pairs per optimiser step")
    parser.add_argument("--lr", type=float, default=2e-4)
    parser.add_argument("--save", type=Path, default=None, help="the adapter as a LoRA GGUF")
    parser.add_argument("--no-eval", action="store_true", help="train (and save) only")
    args = parser.parse_args()
    if not SQUAD.is_dir():
        print(f"skipped: {SQUAD} is absent (the team's evaluation data)")
        return 0
    import torch  # the train extra
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.set_num_threads(2)
    torch.manual_seed(0)
    train = balanced("train", args.per_class, 1)
    random.Random(2).shuffle(train)
    test = balanced("test", args.test_per_class, 3)
    folder, name = local_model.cache_dir(), local_model.model_path(MODEL).name
    tok = AutoTokenizer.from_pretrained(str(folder), gguf_file=name)
    model = AutoModelForCausalLM.from_pretrained(str(folder), gguf_file=name,
                                                 torch_dtype=torch.float32)
    for p in model.parameters():
        p.requires_grad_(False)
    ids = {w: tok.encode(w, add_special_tokens=False) for w in ("yes", "Yes", "no", "No")}
    yes = [v[0] for w, v in ids.items() if w.lower() == "yes" and len(v) == 1]
    no = [v[0] for w, v in ids.items() if w.lower() == "no" and len(v) == 1]
    named: list[tuple[str, Any, Any]] = []
    for i, layer in enumerate(model.model.layers):
        for short, proj in (("q", layer.self_attn.q_proj), ("v", layer.self_attn.v_proj)):
            a = torch.nn.Parameter(torch.randn(proj.in_features, RANK) / proj.in_features ** 0.5)
            b = torch.nn.Parameter(torch.zeros(RANK, proj.out_features))
            named.append((f"blk.{i}.attn_{short}.weight", a, b))
            proj.forward = (lambda x, f=proj.forward, a=a, b=b: f(x) + SCALE * ((x @ a) @ b))
    adapters = [t for _, a, b in named for t in (a, b)]

    def score(pair: Any) -> Any:
        text = judge_prompt(LOCAL_JUDGE_PROMPT, pair.question, pair.title, pair.sentence)
        logits = model(input_ids=torch.tensor([tok.encode(text, add_special_tokens=False)]),
                       logits_to_keep=1).logits[0, -1]
        return logits[yes].logsumexp(0) - logits[no].logsumexp(0)

    def evaluate(tag: str) -> list[float]:
        started = time.perf_counter()
        with torch.no_grad():
            scores = [float(score(p)) for p in test]
        y = np.array([p.label for p in test])
        print(f"{tag}: test AUC {bench_local_probe.auc(np.array(scores), y):.3f} ({len(test)} pairs, "
              f"{time.perf_counter() - started:.0f} s)", flush=True)
        return scores

    print(f"{len(train)} training pairs, {len(test)} test pairs", flush=True)
    base = [] if args.no_eval else evaluate("base")
    optimizer = torch.optim.AdamW(adapters, lr=args.lr, weight_decay=0.0)
    started, losses = time.perf_counter(), []
    for i, pair in enumerate(train):
        loss = torch.nn.functional.binary_cross_entropy_with_logits(score(pair),
                                                                    torch.tensor(pair.label))
        (loss / args.batch).backward()
        if (i + 1) % args.batch == 0 or i + 1 == len(train):
            optimizer.step()
            optimizer.zero_grad()
        losses.append(loss.item())
        if (i + 1) % 25 == 0:
            print(f"pair {i + 1}: mean loss (last 25) {np.mean(losses[-25:]):.3f}, "
                  f"{(time.perf_counter() - started) / (i + 1):.1f} s/pair", flush=True)
        if args.save and ((i + 1) % 100 == 0 or i + 1 == len(train)):
            save_adapter(args.save, named)
    if args.no_eval:
        return 0
    tuned = evaluate("adapted")
    lo, hi = bench_local_probe.auc_difference(np.array(tuned), np.array(base),
                                              np.array([p.label for p in test]))
    print(f"difference 95% interval {lo:+.3f} to {hi:+.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
