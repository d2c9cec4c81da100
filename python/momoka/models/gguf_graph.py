"""A Llama-architecture ONNX graph with a KV cache, written with ``onnx.helper``.

Inputs: ``input_ids`` [B, S] int64, ``attention_mask`` [B, P + S] int64 (1 for a
real token, 0 for padding, covering the cached and the new tokens),
``position_ids`` [B, S] int64, and ``past_key_values.{i}.key`` / ``.value``
[B, n_kv_heads, P, head_dim] float32 (P may be 0).
Outputs: ``logits`` [B, S, vocab] float32 and ``present.{i}.key`` / ``.value``
[B, n_kv_heads, P + S, head_dim] (the past followed by the new keys/values).

The layout follows the Hugging Face convention: Q/K rows in "rotate half" order
(the converter undoes llama.cpp's interleaving permutation), rotary embeddings
computed from ``position_ids`` and ``rope_theta``, grouped-query attention by
broadcasting each KV head over its group of query heads (no copy), SwiGLU MLP.
Weights are plain ``MatMul`` initialisers (float32) or ``com.microsoft``
``MatMulNBits`` blocks (4 or 8 bits).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from .gguf_quant import NBits

OPSET = 17
IR_VERSION = 9  # readable by onnxruntime >= 1.16


@dataclass
class LlamaDims:
    """Shapes and constants of a Llama model."""

    n_layers: int
    hidden: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    ffn: int
    vocab: int
    eps: float
    rope_theta: float
    rope_linear_factor: float = 1.0


# A weight is a float32 array (N, K) -- out features by in features, GGUF row
# order -- or an NBits block layout of the same matrix.
Weight = "np.ndarray | NBits"


class _Builder:
    def __init__(self) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self._n = 0
        self._consts: dict[tuple, str] = {}

    def name(self, base: str) -> str:
        self._n += 1
        return f"{base}_{self._n}"

    def op(self, op_type: str, inputs: list[str], base: str | None = None, domain: str | None = None, **attrs) -> str:
        out = self.name(base or op_type.lower())
        self.nodes.append(helper.make_node(op_type, inputs, [out], name=out, domain=domain, **attrs))
        return out

    def init(self, name: str, arr: np.ndarray) -> str:
        self.inits.append(numpy_helper.from_array(np.ascontiguousarray(arr), name))
        return name

    def const(self, value, dtype=np.int64) -> str:
        arr = np.asarray(value, dtype=dtype)
        key = (arr.dtype.str, arr.shape, arr.tobytes())
        if key not in self._consts:
            self._consts[key] = self.init(self.name("const"), arr)
        return self._consts[key]


def build_llama_graph(
    dims: LlamaDims,
    weight: Callable[[str], np.ndarray | NBits | None],
    *,
    progress: Callable[[int, int, str], None] | None = None,
    name: str = "llama",
    nbits_accuracy: int = 0,
) -> onnx.ModelProto:
    """Assemble the ONNX model.

    ``weight(gguf_tensor_name)`` returns the tensor (already in HF row order for
    Q/K): 1-D float32 for norms and biases, (N, K) float32 or :class:`NBits` for
    matrices, (vocab, hidden) float32 for ``token_embd.weight``, ``None`` when absent.
    """
    b = _Builder()
    L, H, NH, KVH, D = dims.n_layers, dims.hidden, dims.n_heads, dims.n_kv_heads, dims.head_dim
    G = NH // KVH

    def matmul(x: str, tensor: str, w) -> str:
        if isinstance(w, NBits) and w.extra is not None:
            return b.op("Add", [matmul(x, tensor, NBits(w.bits, w.packed, w.scales, w.zero_points, w.exact,
                                                         w.correction)),
                                matmul(x, tensor + ".lo", w.extra)])
        if isinstance(w, NBits):
            n = w.packed.shape[0]
            k = w.packed.shape[1] * 32
            ins = [x, b.init(tensor + ".qweight", w.packed), b.init(tensor + ".scales", w.scales),
                   b.init(tensor + ".zero_points", w.zero_points)]
            # 8-bit blocks only have a fast CPU kernel with int8 activations (accuracy level 4);
            # 4-bit blocks run with float32 activations (level 0), keeping the product exact
            level = nbits_accuracy if w.bits == 4 else 4
            y = b.op("MatMulNBits", ins, "mm", domain="com.microsoft", K=k, N=n, bits=w.bits, block_size=32,
                     accuracy_level=level)
            if w.correction is not None:
                # per-block constants: y += blocksum(x) @ correction^T
                nblk = k // 32
                sums = b.op("ReduceSum", [b.op("Reshape", [x, b.const([0, 0, nblk, 32])]), b.const([-1])],
                            keepdims=0)
                corr_t = np.ascontiguousarray(w.correction.reshape(n, nblk).T.astype(np.float32))
                y = b.op("Add", [y, b.op("MatMul", [sums, b.init(tensor + ".block_correction", corr_t)])])
            return y
        wt = np.ascontiguousarray(np.asarray(w, dtype=np.float32).T)  # [K, N]
        return b.op("MatMul", [x, b.init(tensor, wt)], "mm")

    def linear(x: str, prefix: str) -> str:
        y = matmul(x, prefix + ".weight", weight(prefix + ".weight"))
        bias = weight(prefix + ".bias")
        if bias is not None:
            y = b.op("Add", [y, b.init(prefix + ".bias", np.asarray(bias, np.float32))])
        return y

    def rmsnorm(x: str, tensor: str) -> str:
        sq = b.op("Mul", [x, x])
        ms = b.op("ReduceMean", [sq], axes=[-1], keepdims=1)
        inv = b.op("Reciprocal", [b.op("Sqrt", [b.op("Add", [ms, b.const(dims.eps, np.float32)])])])
        y = b.op("Mul", [x, inv])
        return b.op("Mul", [y, b.init(tensor, np.asarray(weight(tensor), np.float32))])

    # ---- inputs
    inputs = [
        helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"]),
        helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "total"]),
        helper.make_tensor_value_info("position_ids", TensorProto.INT64, ["batch", "seq"]),
    ]
    outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", "seq", dims.vocab])]
    for i in range(L):
        for kv in ("key", "value"):
            inputs.append(helper.make_tensor_value_info(
                f"past_key_values.{i}.{kv}", TensorProto.FLOAT, ["batch", KVH, "past", D]))
            outputs.append(helper.make_tensor_value_info(
                f"present.{i}.{kv}", TensorProto.FLOAT, ["batch", KVH, "total", D]))

    # ---- attention bias [B, 1, 1, S, T]: causal within the window and padding
    ids_shape = b.op("Shape", ["input_ids"])
    seq = b.op("Gather", [ids_shape, b.const(1)], axis=0)
    mask_shape = b.op("Shape", ["attention_mask"])
    total = b.op("Gather", [mask_shape, b.const(1)], axis=0)
    past = b.op("Sub", [total, seq])
    q_pos = b.op("Range", [past, total, b.const(1)])  # [S] absolute index of each query
    k_pos = b.op("Range", [b.const(0), total, b.const(1)])  # [T]
    causal = b.op("LessOrEqual", [b.op("Unsqueeze", [k_pos, b.const([0])]),
                                  b.op("Unsqueeze", [q_pos, b.const([1])])])  # [S, T]
    keep = b.op("Cast", ["attention_mask"], to=TensorProto.BOOL)  # [B, T]
    keep = b.op("Unsqueeze", [keep, b.const([1, 2, 3])])  # [B, 1, 1, 1, T]
    allowed = b.op("And", [keep, causal])  # [B, 1, 1, S, T]
    bias = b.op("Where", [allowed, b.const(0.0, np.float32), b.const(-1e9, np.float32)], "attn_bias")

    # ---- rotary tables [B, 1, S, D] from position_ids
    inv_freq = 1.0 / (dims.rope_theta ** (np.arange(0, D, 2, dtype=np.float64) / D))
    inv_freq = (inv_freq / dims.rope_linear_factor).astype(np.float32)
    pos = b.op("Cast", ["position_ids"], to=TensorProto.FLOAT)
    freqs = b.op("Mul", [b.op("Unsqueeze", [pos, b.const([2])]), b.init("rope.inv_freq", inv_freq)])
    emb = b.op("Concat", [freqs, freqs], axis=-1)  # [B, S, D]
    emb = b.op("Unsqueeze", [emb, b.const([1])])
    cos = b.op("Cos", [emb], "rope_cos")
    sin = b.op("Sin", [emb], "rope_sin")
    half = b.const([D // 2])

    def rope(x: str) -> str:  # x [B, heads, S, D]
        x1 = b.op("Slice", [x, b.const([0]), half, b.const([-1])])
        x2 = b.op("Slice", [x, half, b.const([D]), b.const([-1])])
        rot = b.op("Concat", [b.op("Neg", [x2]), x1], axis=-1)
        return b.op("Add", [b.op("Mul", [x, cos]), b.op("Mul", [rot, sin])])

    # ---- embedding
    emb_w = np.asarray(weight("token_embd.weight"), np.float32)
    x = b.op("Gather", [b.init("token_embd.weight", emb_w), "input_ids"], "embed", axis=0)
    scale = b.const(1.0 / np.sqrt(D), np.float32)
    for i in range(L):
        if progress:
            progress(i, L + 1, f"layer {i + 1}/{L}")
        p = f"blk.{i}"
        h = rmsnorm(x, f"{p}.attn_norm.weight")
        q = b.op("Reshape", [linear(h, f"{p}.attn_q"), b.const([0, 0, NH, D])])
        k = b.op("Reshape", [linear(h, f"{p}.attn_k"), b.const([0, 0, KVH, D])])
        v = b.op("Reshape", [linear(h, f"{p}.attn_v"), b.const([0, 0, KVH, D])])
        q = rope(b.op("Transpose", [q], perm=[0, 2, 1, 3]))
        k = rope(b.op("Transpose", [k], perm=[0, 2, 1, 3]))
        v = b.op("Transpose", [v], perm=[0, 2, 1, 3])
        kc = f"present.{i}.key"
        vc = f"present.{i}.value"
        b.nodes.append(helper.make_node("Concat", [f"past_key_values.{i}.key", k], [kc], name=kc, axis=2))
        b.nodes.append(helper.make_node("Concat", [f"past_key_values.{i}.value", v], [vc], name=vc, axis=2))
        qg = b.op("Reshape", [b.op("Mul", [q, scale]), b.const([0, KVH, G, -1, D])])  # [B,KVH,G,S,D]
        kt = b.op("Transpose", [b.op("Unsqueeze", [kc, b.const([2])])], perm=[0, 1, 2, 4, 3])  # [B,KVH,1,D,T]
        scores = b.op("Add", [b.op("MatMul", [qg, kt]), bias])  # [B,KVH,G,S,T]
        probs = b.op("Softmax", [scores], axis=-1)
        ctx = b.op("MatMul", [probs, b.op("Unsqueeze", [vc, b.const([2])])])  # [B,KVH,G,S,D]
        ctx = b.op("Reshape", [ctx, b.const([0, NH, -1, D])])
        ctx = b.op("Reshape", [b.op("Transpose", [ctx], perm=[0, 2, 1, 3]), b.const([0, 0, H])])
        x = b.op("Add", [x, linear(ctx, f"{p}.attn_output")], "resid")
        h = rmsnorm(x, f"{p}.ffn_norm.weight")
        gate = linear(h, f"{p}.ffn_gate")
        up = linear(h, f"{p}.ffn_up")
        act = b.op("Mul", [b.op("Mul", [gate, b.op("Sigmoid", [gate])]), up])
        x = b.op("Add", [x, linear(act, f"{p}.ffn_down")], "resid")
    if progress:
        progress(L, L + 1, "output head")
    x = rmsnorm(x, "output_norm.weight")
    head = weight("output.weight")
    head_name = "output.weight"
    if head is None:  # tied embeddings
        head = weight("output.tied")
        head_name = "output.tied"
    logits = matmul(x, head_name, head)
    b.nodes.append(helper.make_node("Identity", [logits], ["logits"], name="logits"))

    graph = helper.make_graph(b.nodes, name, inputs, outputs, b.inits)
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", OPSET), helper.make_opsetid("com.microsoft", 1)],
        producer_name="momoka",
        ir_version=IR_VERSION,
    )
    return model
