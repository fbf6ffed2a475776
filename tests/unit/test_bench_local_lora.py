"""benchmarks/bench_local_lora.py: the adapter it saves is laid out as llama.cpp's LoRA loader
checks it (llama-adapter.cpp), with the scale the training used."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.support.benchmarks import load_benchmark

torch = pytest.importorskip("torch")
gguf = pytest.importorskip("gguf")
BENCH = load_benchmark("bench_local_lora")


def test_saved_adapter_has_llama_cpp_layout_and_scale(tmp_path: Path) -> None:
    n_in, n_out, rank = 12, 5, BENCH.RANK
    a = torch.randn(n_in, rank)
    b = torch.randn(rank, n_out)
    path = tmp_path / "adapter.gguf"
    BENCH.save_adapter(path, [("blk.0.attn_v.weight", a, b)])
    reader = gguf.GGUFReader(str(path))

    def field(key: str) -> Any:
        f = reader.fields[key]
        value = f.parts[f.data[0]]
        return bytes(value).decode() if f.types[0] == gguf.GGUFValueType.STRING else value[0]

    assert field("general.type") == "adapter"
    assert field("general.architecture") == "qwen2"
    assert field("adapter.type") == "lora"
    # llama.cpp applies alpha / rank, the training's SCALE
    assert float(field("adapter.lora.alpha")) / rank == pytest.approx(BENCH.SCALE)
    tensors = {t.name: t for t in reader.tensors}
    lora_a, lora_b = tensors["blk.0.attn_v.weight.lora_a"], tensors["blk.0.attn_v.weight.lora_b"]
    # ggml order: a is [n_in, rank], b is [rank, n_out], as the loader checks against the weight
    assert list(lora_a.shape) == [n_in, rank]
    assert list(lora_b.shape) == [rank, n_out]
    # x @ a @ b, as trained, equals x @ lora_a^T @ lora_b^T as numpy reads them back
    x = np.random.default_rng(0).normal(size=(3, n_in)).astype(np.float32)
    back = x @ np.asarray(lora_a.data).T @ np.asarray(lora_b.data).T
    assert back == pytest.approx((x @ a.numpy() @ b.numpy()), rel=1e-4, abs=1e-4)
