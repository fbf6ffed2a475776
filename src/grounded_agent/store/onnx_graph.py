"""all-MiniLM-L6-v2 written as an ONNX graph from its safetensors weights, with numpy and onnx only.

The export without torch: the graph is BERT as `transformers.BertModel` computes it in eager mode
(word + position + token-type embeddings, LayerNorm; per layer: self-attention with an additive
mask of -3.4e38 on padding, output projection, residual and LayerNorm, then GELU (erf) feed-forward,
residual and LayerNorm), followed by sentence-transformers' mean pooling over the attention mask
and L2 normalisation. `onnx_export.build` checks what this writes against vectors the torch model
gave for the same sentences (`onnx_reference.json`, shipped), so a graph that drifts from the
torch model is never kept.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import onnx

OPSET = 17
"""LayerNormalization is an operator from opset 17."""


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """Every tensor of a safetensors file (the format: an 8-byte little-endian header length, a
    JSON header of dtype, shape and byte offsets, then the raw little-endian data)."""
    import numpy as np

    dtypes = {"F32": np.float32, "F16": np.float16, "I64": np.int64, "I32": np.int32}
    raw = path.read_bytes()
    (length,) = struct.unpack("<Q", raw[:8])
    header: dict[str, Any] = json.loads(raw[8 : 8 + length])
    body = memoryview(raw)[8 + length :]
    out: dict[str, np.ndarray] = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, end = info["data_offsets"]
        array = np.frombuffer(body[start:end], dtype=dtypes[info["dtype"]])
        out[name] = array.reshape(info["shape"]).copy()
    return out


def write_safetensors(path: Path, tensors: dict[str, np.ndarray]) -> None:
    """`tensors` as a safetensors file (the layout read_safetensors reads)."""
    import numpy as np

    names = {np.dtype(np.float32): "F32", np.dtype(np.float16): "F16",
             np.dtype(np.int64): "I64", np.dtype(np.int32): "I32"}
    header: dict[str, Any] = {}
    chunks: list[bytes] = []
    offset = 0
    for name in sorted(tensors):
        data = np.ascontiguousarray(tensors[name]).astype(tensors[name].dtype.newbyteorder("<"))
        raw = data.tobytes()
        header[name] = {"dtype": names[data.dtype], "shape": list(data.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    blob = json.dumps(header, separators=(",", ":")).encode()
    blob += b" " * (-len(blob) % 8)  # the data starts 8-byte aligned
    path.write_bytes(struct.pack("<Q", len(blob)) + blob + b"".join(chunks))


def build_model(source: Path) -> onnx.ModelProto:
    """The sentence-embedding graph of the BERT checkpoint in `source` (config.json and one
    .safetensors file, float32 or float16: computed in float32 either way): inputs input_ids, attention_mask, token_type_ids (int64, batch x tokens),
    output sentence_embedding (float32, batch x hidden, unit length)."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    config = json.loads((source / "config.json").read_text(encoding="utf-8"))
    hidden = int(config["hidden_size"])
    heads = int(config["num_attention_heads"])
    layers = int(config["num_hidden_layers"])
    eps = float(config["layer_norm_eps"])
    head_dim = hidden // heads
    weights = read_safetensors(next(source.glob("*.safetensors")))

    inits: list[onnx.TensorProto] = []
    nodes: list[onnx.NodeProto] = []

    def const(name: str, value: Any) -> str:
        inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def weight(name: str, transpose: bool = False) -> str:
        array = weights[name].astype(np.float32)
        return const(name, array.T.copy() if transpose else array)

    counter = iter(range(1_000_000))

    def op(kind: str, inputs: list[str], **attrs: Any) -> str:
        out = f"{kind.lower()}_{next(counter)}"
        nodes.append(helper.make_node(kind, inputs, [out], **attrs))
        return out

    def linear(x: str, prefix: str) -> str:
        return op("Add", [op("MatMul", [x, weight(f"{prefix}.weight", True)]),
                          weight(f"{prefix}.bias")])

    def layer_norm(x: str, prefix: str) -> str:
        return op("LayerNormalization", [x, weight(f"{prefix}.weight"), weight(f"{prefix}.bias")],
                  axis=-1, epsilon=eps)

    # embeddings: positions 0..tokens-1
    shape = op("Shape", ["input_ids"])
    tokens = op("Gather", [shape, const("one_index", np.array(1, dtype=np.int64))], axis=0)
    positions = op("Range", [const("zero_scalar", np.array(0, dtype=np.int64)), tokens,
                             const("one_scalar", np.array(1, dtype=np.int64))])
    x = op("Add", [
        op("Add", [
            op("Gather", [weight("embeddings.word_embeddings.weight"), "input_ids"]),
            op("Gather", [weight("embeddings.token_type_embeddings.weight"), "token_type_ids"]),
        ]),
        op("Gather", [weight("embeddings.position_embeddings.weight"), positions]),
    ])
    x = layer_norm(x, "embeddings.LayerNorm")

    # the additive attention mask, batch x 1 x 1 x tokens: 0 where attended, float32 min elsewhere
    mask_f = op("Cast", ["attention_mask"], to=TensorProto.FLOAT)
    mask4 = op("Unsqueeze", [mask_f, const("axes_1_2", np.array([1, 2], dtype=np.int64))])
    additive = op("Mul", [op("Sub", [const("one_f", np.array(1.0, dtype=np.float32)), mask4]),
                          const("min_f", np.array(np.finfo(np.float32).min, dtype=np.float32))])
    split_shape = const("split_heads", np.array([0, -1, heads, head_dim], dtype=np.int64))
    merge_shape = const("merge_heads", np.array([0, -1, hidden], dtype=np.int64))
    scale = const("scale", np.array(1.0 / np.sqrt(head_dim), dtype=np.float32))

    def heads_of(t: str) -> str:  # batch x heads x tokens x head_dim
        return op("Transpose", [op("Reshape", [t, split_shape])], perm=[0, 2, 1, 3])

    for i in range(layers):
        p = f"encoder.layer.{i}"
        q = heads_of(linear(x, f"{p}.attention.self.query"))
        k = heads_of(linear(x, f"{p}.attention.self.key"))
        v = heads_of(linear(x, f"{p}.attention.self.value"))
        scores = op("Mul", [op("MatMul", [q, op("Transpose", [k], perm=[0, 1, 3, 2])]), scale])
        probs = op("Softmax", [op("Add", [scores, additive])], axis=-1)
        context = op("Reshape", [op("Transpose", [op("MatMul", [probs, v])], perm=[0, 2, 1, 3]),
                                 merge_shape])
        x = layer_norm(op("Add", [linear(context, f"{p}.attention.output.dense"), x]),
                       f"{p}.attention.output.LayerNorm")
        inner = linear(x, f"{p}.intermediate.dense")
        gelu = op("Mul", [
            op("Mul", [inner, const(f"half_{i}", np.array(0.5, dtype=np.float32))]),
            op("Add", [const(f"one_{i}", np.array(1.0, dtype=np.float32)),
                       op("Erf", [op("Div", [inner, const(f"sqrt2_{i}", np.array(np.sqrt(2.0),
                                                                            dtype=np.float32))])])]),
        ])
        x = layer_norm(op("Add", [linear(gelu, f"{p}.output.dense"), x]), f"{p}.output.LayerNorm")

    # mean pooling over the attended tokens, then L2 normalisation
    mask3 = op("Unsqueeze", [mask_f, const("axes_2", np.array([2], dtype=np.int64))])
    summed = op("ReduceSum", [op("Mul", [x, mask3]), const("axes_1", np.array([1], dtype=np.int64))],
                keepdims=0)
    count = op("Max", [op("ReduceSum", [mask3, "axes_1"], keepdims=0),
                       const("tiny", np.array(1e-9, dtype=np.float32))])
    pooled = op("Div", [summed, count])
    norm = op("Max", [op("ReduceL2", [pooled], axes=[1], keepdims=1),  # axes: an attribute in 17
                      const("eps_norm", np.array(1e-12, dtype=np.float32))])
    nodes.append(helper.make_node("Div", [pooled, norm], ["sentence_embedding"]))

    int_input = [helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "tokens"])
                 for n in ("input_ids", "attention_mask", "token_type_ids")]
    output = helper.make_tensor_value_info("sentence_embedding", TensorProto.FLOAT,
                                           ["batch", hidden])
    graph = helper.make_graph(nodes, "all_MiniLM_L6_v2", int_input, [output], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="grounded_agent.store.onnx_graph")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def write(source: Path, target: Path) -> None:
    """The graph of `source` saved to `target` (weights inline; onnx_export externalises them)."""
    import onnx

    onnx.save_model(build_model(source), str(target))
