"""The offline judge: how likely a sentence answers a question.

A sentence-level cross-encoder trained in this project (scripts/train_judge.py) from the shipped
all-MiniLM-L6-v2 weights, shipped as int8 ONNX with its tokenizer and manifest, run on ONNX
Runtime: no torch at question time. Offline it vetoes answers whose quoted sentences it finds do
not answer, or where it rates another sentence clearly higher (judge.reading).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Protocol

MODEL_DIR = Path(__file__).resolve().parent / "model"


class JudgeError(RuntimeError):
    """The shipped judge is missing or unreadable (a broken install, not a user error)."""


@dataclass(frozen=True)
class Manifest:
    """What the shipped model was trained on and the veto chosen on its tuning split."""

    veto: float
    """The least probability the sentences an offline answer quotes must get (judge.reading.judge_veto);
    chosen by benchmarks/calibrate_judge.py on the tuning split."""
    margin: float
    """How much higher the judge may rate another sentence of the passages than the quoted ones
    (judge.reading.judge_veto); chosen with the veto."""
    max_len: int
    train_articles: frozenset[str]
    tune_articles: frozenset[str]
    raw: dict[str, Any]

    @classmethod
    def read(cls, directory: Path = MODEL_DIR) -> Manifest:
        """The manifest alone (the evaluation's split needs no model loaded)."""
        path = directory / "manifest.json"
        raw = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
        articles = raw.get("articles", {})
        return cls(
            veto=float(raw.get("veto", 0.0)),
            margin=float(raw.get("margin", 1.0)),
            max_len=int(raw.get("max_len", 96)),
            train_articles=frozenset(articles.get("train", [])),
            tune_articles=frozenset(articles.get("tune", [])),
            raw=raw,
        )


class SentenceJudge(Protocol):
    """What judge.reading needs of a judge: its cut-offs, its name for the trail, and a score per
    (title, sentence) candidate of one question (the shipped Judge; judge.local.LocalJudge)."""

    @property
    def manifest(self) -> Manifest: ...

    @property
    def name(self) -> str: ...

    def score(self, question: str, candidates: Sequence[tuple[str, str]], quoted: int = 0
              ) -> list[float]:
        """A score per candidate. The first `quoted` candidates are the sentences an answer
        quotes: a judge that reads only some candidates reads these first."""
        ...


class Judge:
    """Scores (title, sentence) candidates for one question (an ONNX Runtime session runs from
    several threads at once)."""

    name = "trained judge"

    def __init__(self, session: Any, tokenizer: Any, manifest: Manifest) -> None:
        self._session = session
        self._tokenizer = tokenizer
        self.manifest = manifest

    @classmethod
    def from_dir(cls, directory: Path, threads: int = 1) -> Judge:
        try:
            import onnxruntime as ort
            from tokenizers import Tokenizer

            manifest = Manifest.read(directory)
            tokenizer = Tokenizer.from_file(str(directory / "tokenizer.json"))
            tokenizer.enable_truncation(max_length=manifest.max_len, strategy="only_second")
            tokenizer.no_padding()  # one pair per run: nothing to pad to
            options = ort.SessionOptions()
            options.intra_op_num_threads = threads
            options.inter_op_num_threads = 1
            session = ort.InferenceSession(str(directory / "judge.onnx"), options,
                                           providers=["CPUExecutionProvider"])
        except Exception as exc:  # tokenizers raises bare Exception for a missing file
            raise JudgeError(f"the offline judge could not be loaded from {directory}: {exc}") \
                from exc
        return cls(session, tokenizer, manifest)

    def score(self, question: str, candidates: Sequence[tuple[str, str]], quoted: int = 0
              ) -> list[float]:
        """The probability that each (title, sentence) answers the question (every one is read,
        so `quoted` changes nothing). One pair per run:
        the int8 model quantises its activations per run, so a pair scored beside others would
        get a score that depends on them."""
        import numpy as np

        out: list[float] = []
        for title, sentence in candidates:
            enc = self._tokenizer.encode(question, f"{title}: {sentence}")
            feeds = {
                "input_ids": np.array([enc.ids], dtype=np.int64),
                "attention_mask": np.array([enc.attention_mask], dtype=np.int64),
                "token_type_ids": np.array([enc.type_ids], dtype=np.int64),
            }
            (logits,) = self._session.run(["logit"], feeds)
            out.append(1.0 / (1.0 + math.exp(-float(np.atleast_1d(logits)[0]))))
        return out


@cache
def load_judge() -> Judge:
    """The shipped judge, loaded once per process (the default factory in deps)."""
    return Judge.from_dir(MODEL_DIR)
