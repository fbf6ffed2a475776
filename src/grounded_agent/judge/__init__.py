"""The offline judge: how likely a sentence answers a question.

A sentence-level cross-encoder trained in this project (scripts/train_judge.py) from the shipped
all-MiniLM-L6-v2 weights, shipped as int8 ONNX with its tokenizer and manifest, run on ONNX
Runtime: no torch at question time. Offline it vetoes answers whose quoted sentences it finds do
not answer (scoring.judge_veto).
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

MODEL_DIR = Path(__file__).resolve().parent / "model"
BATCH = 32
MEMO_SIZE = 4096
"""Scored pairs remembered per process (a question reads 20-60 sentences)."""


class JudgeError(RuntimeError):
    """The shipped judge is missing or unreadable (a broken install, not a user error)."""


@dataclass(frozen=True)
class Manifest:
    """What the shipped model was trained on and the threshold chosen on its tuning split."""

    veto: float
    """The least probability the sentences an offline answer quotes must get (scoring.judge_veto);
    chosen by benchmarks/calibrate_judge.py on the tuning split."""
    max_len: int
    train_articles: frozenset[str]
    tune_articles: frozenset[str]
    raw: dict[str, Any]


class Judge:
    """Scores (title, sentence) candidates for one question; thread-safe, batched."""

    def __init__(self, session: Any, tokenizer: Any, manifest: Manifest) -> None:
        self._session = session
        self._tokenizer = tokenizer
        self.manifest = manifest
        self._lock = threading.Lock()
        self._memo: dict[tuple[str, str, str], float] = {}

    @classmethod
    def from_dir(cls, directory: Path, threads: int = 1) -> Judge:
        try:
            import onnxruntime as ort
            from tokenizers import Tokenizer

            raw = json.loads((directory / "manifest.json").read_text(encoding="utf-8")) \
                if (directory / "manifest.json").is_file() else {}
            max_len = int(raw.get("max_len", 96))
            tokenizer = Tokenizer.from_file(str(directory / "tokenizer.json"))
            tokenizer.enable_truncation(max_length=max_len, strategy="only_second")
            tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
            options = ort.SessionOptions()
            options.intra_op_num_threads = threads
            options.inter_op_num_threads = 1
            session = ort.InferenceSession(str(directory / "judge.onnx"), options,
                                           providers=["CPUExecutionProvider"])
        except Exception as exc:  # tokenizers raises bare Exception for a missing file
            raise JudgeError(f"the offline judge could not be loaded from {directory}: {exc}") \
                from exc
        articles = raw.get("articles", {})
        manifest = Manifest(
            veto=float(raw.get("veto", 0.0)),
            max_len=max_len,
            train_articles=frozenset(articles.get("train", [])),
            tune_articles=frozenset(articles.get("tune", [])),
            raw=raw,
        )
        return cls(session, tokenizer, manifest)

    def score(self, question: str, candidates: Sequence[tuple[str, str]]) -> list[float]:
        """The probability that each (title, sentence) answers the question. Remembered: the
        tool's ranking, the confidence step and the answer read the same sentences."""
        keys = [(question, title, sentence) for title, sentence in candidates]
        with self._lock:
            known = {k: self._memo[k] for k in keys if k in self._memo}
        todo = [k for k in dict.fromkeys(keys) if k not in known]
        known.update(zip(todo, self._infer(question, [(t, s) for _, t, s in todo]), strict=True))
        with self._lock:
            self._memo.update((k, known[k]) for k in todo)
            while len(self._memo) > MEMO_SIZE:
                self._memo.pop(next(iter(self._memo)))
        return [known[k] for k in keys]

    def _infer(self, question: str, candidates: Sequence[tuple[str, str]]) -> list[float]:
        import numpy as np

        out: list[float] = []
        for start in range(0, len(candidates), BATCH):
            chunk = candidates[start : start + BATCH]
            enc = self._tokenizer.encode_batch(
                [(question, f"{title}: {sentence}") for title, sentence in chunk]
            )
            feeds = {
                "input_ids": np.array([e.ids for e in enc], dtype=np.int64),
                "attention_mask": np.array([e.attention_mask for e in enc], dtype=np.int64),
                "token_type_ids": np.array([e.type_ids for e in enc], dtype=np.int64),
            }
            with self._lock:
                (logits,) = self._session.run(["logit"], feeds)
            out.extend(1.0 / (1.0 + math.exp(-float(x))) for x in np.atleast_1d(logits))
        return out


@cache
def load_judge() -> Judge:
    """The shipped judge, loaded once per process (the default factory in deps)."""
    return Judge.from_dir(MODEL_DIR)
