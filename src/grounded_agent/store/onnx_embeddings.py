"""all-MiniLM-L6-v2 on ONNX Runtime: the default local embeddings, without torch or transformers.

The model is exported once from the weights this package ships (store/minilm; see `onnx_export`,
numpy and onnx, no torch) and cached under `StoreSettings.models_dir`; every later process
only loads the cached file with onnxruntime and tokenizes with HF tokenizers. The graph contains
sentence-transformers' whole pipeline (BERT, mean pooling over the attention mask, L2
normalisation), so the fp32 export gives the vectors the torch backend gives (cosine > 0.99999,
its weights rounded to float16 included),
and both share the model id and table. The int8 export differs slightly, so it has its own id.

A cached export is checked before use: a manifest naming the weights it was made from, the file
size, that onnxruntime loads it, and that it still embeds a probe sentence as it did when it was
made. Anything missing or wrong is rebuilt, with a log line saying why.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from langchain_core.embeddings import Embeddings

if TYPE_CHECKING:
    import numpy as np
    import onnxruntime as ort
    from tokenizers import Encoding, Tokenizer

log = logging.getLogger(__name__)

Variant = Literal["fp32", "int8"]

EXPORT_FORMAT = 3
"""Bumped when the export's graph or manifest changes: older caches are then rebuilt (2: the
weights in a separate file, mapped by onnxruntime, not parsed; 3: written without torch from the
float16 weights this package ships)."""
EXPORT_DIR = f"all-MiniLM-L6-v2-onnx-v{EXPORT_FORMAT}"
MANIFEST = "manifest.json"
FILES: dict[Variant, str] = {"fp32": "model.onnx", "int8": "model-int8.onnx"}


def data_file_for(graph_name: str) -> str:
    return f"{graph_name}.data"


def data_file(variant: Variant) -> str:
    """The weights of a variant's graph (ONNX external data, next to it)."""
    return data_file_for(FILES[variant])
MAX_SEQ_LENGTH = 256
"""sentence-transformers' max_seq_length for this model (sentence_bert_config.json)."""
PROBE_TEXT = "Grounded answers cite the passage they came from."
PROBE_MIN_COSINE = 0.9999
"""A loaded export must embed the probe as it did when it was made (the same file on the same
runtime gives the same vector to ~1e-7; a changed file or a broken runtime does not)."""
INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")
OUTPUT_NAME = "sentence_embedding"


class ExportError(RuntimeError):
    """The ONNX export could not be made or does not reproduce the torch model's vectors."""


WEIGHTS = "model-fp16.safetensors"
"""The shipped weights: all-MiniLM-L6-v2's, rounded to float16 (half the size; an export made
from them embeds the check sentences at cosine 0.9999993 or better to the torch model's fp32)."""


def model_dir() -> Path:
    """The all-MiniLM-L6-v2 shipped in this package (store/minilm: float16 safetensors,
    tokenizer.json, config.json), with no torch or sentence-transformers behind it."""
    return Path(__file__).with_name("minilm")


def source_fingerprint(source: Path | None = None) -> dict[str, Any]:
    """What the export was made from: the shipped weights file, by name and size."""
    source = source or model_dir()
    return {"weights": WEIGHTS, "weights_size": (source / WEIGHTS).stat().st_size}


def load_tokenizer(source: Path | None = None) -> Tokenizer:
    """The shipped tokenizer.json set up as sentence-transformers uses it: truncation at 256
    tokens (the file itself says 128 and pads everything to 128: padding is done per batch here,
    to the batch's longest text)."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str((source or model_dir()) / "tokenizer.json"))
    tok.enable_truncation(max_length=MAX_SEQ_LENGTH)
    tok.no_padding()
    return tok


def make_session(path: Path, threads: int) -> ort.InferenceSession:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = max(1, threads)
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    # no busy-waiting between operators: the cores are shared with PostgreSQL and the agent
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    opts.log_severity_level = 3
    return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])


def run_batch(session: ort.InferenceSession, encodings: Sequence[Encoding]) -> np.ndarray:
    """One batch of tokenized texts, padded to its longest: unit vectors, shape (n, 384)."""
    import numpy as np

    width = max(len(e.ids) for e in encodings)
    ids = np.zeros((len(encodings), width), dtype=np.int64)
    mask = np.zeros((len(encodings), width), dtype=np.int64)
    for row, e in enumerate(encodings):
        ids[row, : len(e.ids)] = e.ids
        mask[row, : len(e.ids)] = 1
    feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
    out: np.ndarray = session.run([OUTPUT_NAME], feeds)[0]
    return out


def encode(tok: Tokenizer, session: ort.InferenceSession, texts: list[str]) -> np.ndarray:
    """`texts` as one batch: unit vectors, shape (len(texts), 384)."""
    return run_batch(session, tok.encode_batch(texts))


@dataclass(frozen=True)
class CheckResult:
    ok: bool
    reason: str = ""
    session: ort.InferenceSession | None = None


def check_export(
    directory: Path, variant: Variant, threads: int, tok: Tokenizer | None = None
) -> CheckResult:
    """Whether `directory` holds a usable export of `variant` (and the loaded session if so)."""
    import numpy as np

    manifest_path = directory / MANIFEST
    if not manifest_path.exists():
        return CheckResult(False, "no export yet")
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        files = manifest["files"]
        if variant not in files:
            return CheckResult(False, f"no {variant} export yet")
        entry = files[variant]
        probe = np.asarray(entry["probe"], dtype=np.float32)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return CheckResult(False, f"unreadable manifest ({type(exc).__name__})")
    if manifest.get("format") != EXPORT_FORMAT:
        return CheckResult(False, "made by another version of grounded-agent")
    try:
        if manifest.get("source") != source_fingerprint():
            return CheckResult(False, "made from other weights than the installed model package")
    except OSError as exc:
        raise ExportError(f"the bundled model's weights are missing: {exc}") from exc
    path = directory / FILES[variant]
    if not path.exists():
        return CheckResult(False, f"{path.name} is missing")
    if path.stat().st_size != entry.get("size"):
        return CheckResult(False, f"{path.name} has the wrong size (truncated or changed?)")
    data = directory / data_file(variant)
    if not data.exists():
        return CheckResult(False, f"{data.name} is missing")
    if data.stat().st_size != entry.get("data_size"):
        return CheckResult(False, f"{data.name} has the wrong size (truncated or changed?)")
    try:
        session = make_session(path, threads)
        got = encode(tok or load_tokenizer(), session, [PROBE_TEXT])[0]
    except Exception as exc:  # onnxruntime raises its own exception types
        first = (str(exc).strip().splitlines() or [""])[0][:200]
        return CheckResult(False, f"onnxruntime cannot load {path.name}: {first}")
    cosine = float(np.dot(got, probe) / (np.linalg.norm(got) * np.linalg.norm(probe) or 1.0))
    if not cosine >= PROBE_MIN_COSINE:
        return CheckResult(False, f"{path.name} embeds a probe differently (cosine {cosine:.5f})")
    return CheckResult(True, session=session)


@contextlib.contextmanager
def _export_lock(directory: Path) -> Iterator[None]:
    """One process exports at a time (others wait, then find the export made)."""
    directory.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:  # no advisory locks (Windows): the atomic rename still protects readers
        yield
        return
    with (directory / ".lock").open("a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


Builder = Callable[[Path, Variant], None]
"""Makes the export of a variant in a directory (onnx_export.build: torch, so passed in by whoever
may pay for it, and this module never imports the exporter)."""


def ensure_export(
    cache: Path, variant: Variant = "fp32", threads: int = 2, tok: Tokenizer | None = None,
    build: Builder | None = None,
) -> tuple[Path, ort.InferenceSession]:
    """The cached export of `variant` under `cache` and its session; made or remade with `build`
    when it is missing or broken (without one, that is an ExportError naming the command)."""
    directory = cache / EXPORT_DIR
    tok = tok or load_tokenizer()
    first = check_export(directory, variant, threads, tok)
    if first.ok and first.session is not None:
        return directory / FILES[variant], first.session
    with _export_lock(cache):
        again = check_export(directory, variant, threads, tok)  # another process may have made it
        if again.ok and again.session is not None:
            return directory / FILES[variant], again.session
        if again.reason.startswith("no "):
            log.warning(
                "exporting all-MiniLM-L6-v2 to ONNX (%s) in %s: once, a few seconds",
                variant,
                directory,
            )
        else:
            log.warning(
                "rebuilding the ONNX export (%s) of all-MiniLM-L6-v2 in %s: %s",
                variant,
                directory,
                again.reason,
            )
        if build is None:
            raise ExportError(
                f"no usable ONNX export in {directory} ({again.reason}); make it with "
                "`python -m grounded_agent.store.onnx_export`"
            )
        build(directory, variant)
        final = check_export(directory, variant, threads, tok)
        if not final.ok or final.session is None:
            raise ExportError(f"the fresh ONNX export in {directory} is unusable: {final.reason}")
        return directory / FILES[variant], final.session


def batches(lengths: Sequence[int], max_texts: int, max_tokens: int) -> list[list[int]]:
    """Positions 0..n-1 of texts of `lengths` tokens (longest first) cut into consecutive batches
    of at most `max_texts` texts and `max_tokens` padded tokens (the batch's size times its
    first, longest, text); a text of `max_tokens` tokens or more goes alone."""
    out: list[list[int]] = []
    for pos in range(len(lengths)):
        last = out[-1] if out else []
        if last and len(last) < max_texts and (len(last) + 1) * lengths[last[0]] <= max_tokens:
            last.append(pos)
        else:
            out.append([pos])
    return out


class OnnxEmbeddings(Embeddings):
    """sentence-transformers' encode() for all-MiniLM-L6-v2 on ONNX Runtime.

    Newlines become spaces (as langchain-huggingface does), texts are tokenized in one call,
    sorted by length and cut into small batches: at most `batch_tokens` padded tokens each
    (texts x the longest one; a text that long or longer goes alone) and at most `batch_size`
    texts. Small batches waste almost nothing on padding and keep each matrix product's
    operands in cache: on SQuAD's chunks (~150 tokens) they embed ~1.6x as many chunks per
    CPU-second as batches of 32 (fp32 and int8 alike; benchmarks/bench_store.py), while short
    texts such as queries still share a batch. With more than one thread the batches run side by side, one thread
    each (on two cores this is faster than splitting each matrix product over both). Vectors
    are unit length.
    """

    def __init__(
        self,
        cache: Path,
        *,
        variant: Variant = "fp32",
        threads: int = 2,
        batch_size: int = 32,
        batch_tokens: int = 256,
        model_id: str = "all-MiniLM-L6-v2",
        build: Builder | None = None,
    ) -> None:
        started = time.perf_counter()
        self.model_id = model_id
        self.variant = variant
        self.threads = max(1, threads)
        self.batch_size = max(1, batch_size)
        self.batch_tokens = max(1, batch_tokens)
        self._tok = load_tokenizer()
        self.path, self._session = ensure_export(cache, variant, 1, self._tok, build)
        self.dimensions = int(self._session.get_outputs()[0].shape[1])
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()
        log.info(
            "loaded %s (ONNX %s, %d threads) in %.2fs",
            model_id,
            variant,
            self.threads,
            time.perf_counter() - started,
        )

    def _workers(self) -> ThreadPoolExecutor:
        with self._pool_lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="onnx-embed")
            return self._pool

    def embed_array(self, texts: list[str]) -> np.ndarray:
        import numpy as np

        encodings = self._tok.encode_batch([t.replace("\n", " ") for t in texts])
        out = np.zeros((len(encodings), self.dimensions), dtype=np.float32)
        if not encodings:
            return out
        order = sorted(range(len(encodings)), key=lambda i: -len(encodings[i].ids))
        parts = batches(
            [len(encodings[i].ids) for i in order],
            # enough batches to keep every thread busy
            min(self.batch_size, -(-len(order) // self.threads)),
            self.batch_tokens,
        )
        parts = [[order[i] for i in part] for part in parts]

        def run(idx: list[int]) -> None:
            out[idx] = run_batch(self._session, [encodings[i] for i in idx])

        if len(parts) == 1 or self.threads == 1:
            for idx in parts:
                run(idx)
        else:
            for done in self._workers().map(run, parts):
                del done
        return out

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        vectors: list[list[float]] = self.embed_array(list(texts)).tolist()
        return vectors

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


def default_threads() -> int:
    return max(1, min(4, os.cpu_count() or 1))
