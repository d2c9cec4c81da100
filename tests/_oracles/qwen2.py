"""A tiny planted ``qwen2`` GGUF (the ``gguf`` package's writer, random weights) and a float64 numpy forward
pass of it: the references of the native decoder's qwen2 path (``tests/models/gguf/test_gguf_qwen2_native.py``)
and of the split-package installer's tests.

The Q4_K and Q6_K blocks are packed by hand (every code, scale and min byte random; the superblock scales
small halves) since the package only dequantises them; Q5_0 and Q8_0 come from ``gguf.quants.quantize``.
:class:`NumpyQwen2` dequantises with ``gguf.quants.dequantize`` (the package's numpy code, not momoka's) and
runs Qwen2 as llama.cpp does: biases on the queries, keys and values, rotate-half (NeoX) rope on rows stored
as is, grouped-query attention, SwiGLU, RMSNorm, a separate output head (or the embedding's, when tied).
"""

from __future__ import annotations

import numpy as np

import gguf
from gguf.quants import dequantize as ref_dequantize

# the planted model: 2 layers, hidden 256 (one K-quant superblock per row), 4 query heads over 2 key/value heads
H, F, NH, NKV, L = 256, 512, 4, 2, 2
D = H // NH
THETA, EPS = 1_000_000.0, 1e-6
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def byte_tokens() -> list[str]:
    """GPT-2's byte-to-unicode alphabet: the 256 one-byte tokens of a byte-level BPE."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return [chr(c) for _, c in sorted(zip(bs, cs))]


TOKENS = byte_tokens() + ["Ġt", "he", "Ġthe"] + SPECIALS
MERGES = ["Ġ t", "h e", "Ġt he"]
V = len(TOKENS)


def q4k_rows(rows: int, k: int, rng) -> np.ndarray:
    """Random Q4_K rows: every code, scale and min byte random, ``d`` and ``dmin`` small positive halves."""
    nb = k // 256
    raw = rng.integers(0, 256, size=(rows, nb, 144), dtype=np.uint8)
    raw[..., 0:2] = rng.uniform(2e-4, 2e-3, (rows, nb)).astype("<f2").view(np.uint8).reshape(rows, nb, 2)
    raw[..., 2:4] = rng.uniform(2e-4, 4e-3, (rows, nb)).astype("<f2").view(np.uint8).reshape(rows, nb, 2)
    return raw.reshape(rows, -1)


def q6k_rows(rows: int, k: int, rng) -> np.ndarray:
    """Random Q6_K rows: codes and int8 scales random (either sign), ``d`` a small half of either sign."""
    nb = k // 256
    raw = rng.integers(0, 256, size=(rows, nb, 210), dtype=np.uint8)
    raw[..., 208:210] = rng.uniform(-3e-4, 3e-4, (rows, nb)).astype("<f2").view(np.uint8).reshape(rows, nb, 2)
    return raw.reshape(rows, -1)


def write_planted(path, *, tied: bool = False, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    Q = gguf.GGMLQuantizationType
    w = gguf.GGUFWriter(str(path), "qwen2")
    w.add_block_count(L)
    w.add_context_length(4096)
    w.add_embedding_length(H)
    w.add_feed_forward_length(F)
    w.add_head_count(NH)
    w.add_head_count_kv(NKV)
    w.add_rope_freq_base(THETA)
    w.add_layer_norm_rms_eps(EPS)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    w.add_token_list(TOKENS)
    w.add_token_types([1] * (V - len(SPECIALS)) + [3] * len(SPECIALS))
    w.add_token_merges(MERGES)
    w.add_bos_token_id(TOKENS.index("<|endoftext|>"))
    w.add_eos_token_id(TOKENS.index("<|im_end|>"))
    w.add_add_bos_token(False)
    w.add_chat_template("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + "
                        "'<|im_end|>' + '\n'}}{% endfor %}")

    def f32(shape, scale):
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    def quant(a, t):
        return gguf.quants.quantize(a, t)

    w.add_tensor("token_embd.weight", q4k_rows(V, H, rng), raw_dtype=Q.Q4_K)
    if not tied:
        w.add_tensor("output.weight", q6k_rows(V, H, rng), raw_dtype=Q.Q6_K)
    w.add_tensor("output_norm.weight", 1 + f32(H, 0.1))
    for i in range(L):
        p = f"blk.{i}."
        w.add_tensor(p + "attn_norm.weight", 1 + f32(H, 0.1))
        w.add_tensor(p + "ffn_norm.weight", 1 + f32(H, 0.1))
        w.add_tensor(p + "attn_q.weight", q4k_rows(H, H, rng), raw_dtype=Q.Q4_K)
        w.add_tensor(p + "attn_q.bias", f32(H, 0.5))
        w.add_tensor(p + "attn_k.weight", q6k_rows(NKV * D, H, rng), raw_dtype=Q.Q6_K)
        w.add_tensor(p + "attn_k.bias", f32(NKV * D, 0.5))
        w.add_tensor(p + "attn_v.weight", quant(f32((NKV * D, H), 0.05), Q.Q5_0), raw_dtype=Q.Q5_0)
        w.add_tensor(p + "attn_v.bias", f32(NKV * D, 0.5))
        w.add_tensor(p + "attn_output.weight", quant(f32((H, H), 0.05), Q.Q8_0), raw_dtype=Q.Q8_0)
        w.add_tensor(p + "ffn_gate.weight", q4k_rows(F, H, rng), raw_dtype=Q.Q4_K)
        w.add_tensor(p + "ffn_up.weight", q6k_rows(F, H, rng), raw_dtype=Q.Q6_K)
        w.add_tensor(p + "ffn_down.weight", q4k_rows(H, F, rng), raw_dtype=Q.Q4_K)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def q8k(x) -> np.ndarray:
    """Rows of ``x`` through llama.cpp's Q8_K activation quantisation and back (float32 arithmetic as ggml's
    ``quantize_row_q8_K``: per 256 values, the first value of largest magnitude ``mx`` gives
    ``iscale = -127 / mx``, codes ``min(127, rint(iscale * x))``, scale ``1 / iscale``), as float64."""
    x = np.asarray(x, np.float32)
    shape = x.shape
    b = x.reshape(-1, shape[-1] // 256, 256)
    mx = np.take_along_axis(b, np.abs(b).argmax(-1)[..., None], -1)
    with np.errstate(divide="ignore"):
        iscale = np.where(mx == 0, np.float32(0), np.float32(-127) / mx).astype(np.float32)
    q = np.minimum(np.float32(127), np.rint(b * iscale))
    with np.errstate(divide="ignore"):
        d = np.where(iscale == 0, np.float32(0), np.float32(1) / iscale).astype(np.float32)
    return (q.astype(np.float64) * d.astype(np.float64)).reshape(shape)


class NumpyQwen2:
    """Float64 forward pass of a qwen2 GGUF from ``gguf.quants.dequantize`` (biases, NeoX rope, GQA, SwiGLU).

    ``int8``: the inputs of the products with Q4_K and Q6_K weights go through :func:`q8k` first (what the
    native decoder's 8-bit activations compute, in float64)."""

    def __init__(self, path, *, int8: bool = False):
        r = gguf.GGUFReader(str(path))
        self.w = {}
        self.int8 = {t.name for t in r.tensors if int(t.tensor_type) in (12, 14)} if int8 else set()
        for t in r.tensors:
            a = ref_dequantize(t.data, t.tensor_type).astype(np.float64)
            self.w[t.name] = a.reshape([int(s) for s in reversed(t.shape)]) if len(t.shape) > 1 else a.reshape(-1)
        self.head_name = "output.weight" if "output.weight" in self.w else "token_embd.weight"
        self.head = self.w[self.head_name]

    def _mm(self, h, name):
        """h @ W.T, h quantised as the decoder does when W is a K-quant tensor and ``int8`` is on."""
        return (q8k(h) if name in self.int8 else h) @ self.w[name].T

    @staticmethod
    def _norm(x, w):
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + EPS) * w

    @staticmethod
    def _rope(x, pos):  # x [heads, S, D]: rotate-half pairs (x[i], x[i + D/2]), as ggml's NeoX rope
        i = np.arange(D // 2)
        ang = pos[:, None] * THETA ** (-2.0 * i / D)
        c, s = np.cos(ang), np.sin(ang)
        x1, x2 = x[..., : D // 2], x[..., D // 2:]
        return np.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], axis=-1)

    def logits(self, ids) -> np.ndarray:
        """Logits [S, vocab] after each token of one sequence (positions 0..S-1)."""
        ids = np.asarray(ids)
        S = len(ids)
        pos = np.arange(S, dtype=np.float64)
        x = self.w["token_embd.weight"][ids]
        mask = np.triu(np.full((S, S), -np.inf), 1)
        for i in range(L):
            p = f"blk.{i}."
            h = self._norm(x, self.w[p + "attn_norm.weight"])
            q = self._mm(h, p + "attn_q.weight") + self.w[p + "attn_q.bias"]
            k = self._mm(h, p + "attn_k.weight") + self.w[p + "attn_k.bias"]
            v = self._mm(h, p + "attn_v.weight") + self.w[p + "attn_v.bias"]
            q = self._rope(q.reshape(S, NH, D).transpose(1, 0, 2), pos)
            k = np.repeat(self._rope(k.reshape(S, NKV, D).transpose(1, 0, 2), pos), NH // NKV, axis=0)
            v = np.repeat(v.reshape(S, NKV, D).transpose(1, 0, 2), NH // NKV, axis=0)
            a = q @ k.transpose(0, 2, 1) / np.sqrt(D) + mask
            a = np.exp(a - a.max(-1, keepdims=True))
            a /= a.sum(-1, keepdims=True)
            x = x + self._mm((a @ v).transpose(1, 0, 2).reshape(S, H), p + "attn_output.weight")
            h = self._norm(x, self.w[p + "ffn_norm.weight"])
            g = self._mm(h, p + "ffn_gate.weight")
            u = self._mm(h, p + "ffn_up.weight")
            x = x + self._mm(g / (1 + np.exp(-g)) * u, p + "ffn_down.weight")
        return self._mm(self._norm(x, self.w["output_norm.weight"]), self.head_name)
