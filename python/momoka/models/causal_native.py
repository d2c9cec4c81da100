"""Generation on momoka's native decoder: the GGUF's block-quantised weights run as they are, in C++.

:class:`NativeDecoder` is a *decoder* of :class:`~momoka.models.causal_lm.CausalLM`'s one token loop
(the interface of :mod:`momoka.models.causal_llama`: :meth:`~NativeDecoder.start` runs a prompt and
returns the logits after its last token, :meth:`~NativeDecoder.step` one more token). It reads the GGUF
file the model was converted from and keeps each weight's codes, with one float32 scale and offset per
block of 32 (``cpp/include/momoka/llama_decode.hpp``):

- every weight is its exact value ``d * q + m``; activations are float32, so the logits are the quantised
  model's up to float32 summation order, as the onnxruntime graph's are, except in products with Q4_K and
  Q6_K weights (the opt-in Qwen2.5 models), whose activations are quantised to 8 bits per 256 values as
  llama.cpp does (integer dot products; ``activations="float32"`` or ``MOMOKA_LLM_ACTIVATIONS=float32``
  keeps them float32);
- the key/value cache grows in place (the onnxruntime loop concatenates the whole cache into new tensors
  at every token), the matrix products run row-parallel on ``threads`` threads with AVX-512 or AVX2
  kernels chosen at run time (:func:`simd`), and a prompt runs as one batch whose tokens share each
  dequantised weight block;
- only the last token's logits are computed.

Log-probabilities (perplexity, UPR, ETS, MoC) of a model converted to ONNX stay on onnxruntime; a model
installed as its GGUF alone (the opt-in Qwen2.5 models) scores here too (:meth:`NativeDecoder.rows`: the
logits after each of a run's last tokens; :meth:`NativeDecoder.keep`: drop what followed a prefix, so
several continuations run after one prefix).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from .. import _core, settings
from ..errors import ConfigError, InputTooLargeError, ModelError
from . import gguf_quant as gq
from .gguf import NATIVE_ARCHITECTURES, GGUFModel, _unpermute_rows, read_dims

__all__ = ["NativeDecoder", "load_weights", "simd"]

#: The weights of a Llama block, by GGUF tensor name (``blk.{i}.{name}.weight``).
LAYER_MATRICES = ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down")


def simd() -> str:
    """The best kernels the native decoder has on this CPU: ``"avx512"``, ``"avx2"`` or ``"scalar"``."""
    return _core.llama_simd()


def load_weights(gguf: str | os.PathLike, *, kquant: bool = False) -> tuple[dict, list[dict], dict, dict | None,
                                                                               np.ndarray]:
    """``(shape, layers, embed, head, out_norm)`` of a Llama or Qwen2 GGUF as :class:`momoka._core.LlamaDecoder`
    takes them (:func:`momoka.models.gguf_quant.native_matrix` per matrix, with its bias when the file has one;
    queries' and keys' rows in rotate-half order: a ``llama`` file's interleaved rows are put back, as the
    onnxruntime converter does, a ``qwen2`` file stores them so). ``kquant``: Q4_K and Q6_K tensors stay
    K-quant superblocks, multiplied with 8-bit activations (else re-laid for float32 activations). Raises ModelError (or its
    UnsupportedModelError) for an architecture, shape or tensor type the decoder does not run."""
    m = GGUFModel(gguf)
    dims = read_dims(m, NATIVE_ARCHITECTURES)
    interleaved = m.arch == "llama"  # llama.cpp's converter permutes a Llama's Q/K rows, not a Qwen2's

    def matrix(name: str, heads: int | None = None) -> dict:
        raw, qtype, k = m.raw(name)
        if heads is not None and interleaved:
            raw = _unpermute_rows(raw, heads)
        out = gq.native_matrix(raw, qtype, k, kquant=kquant)
        bias = name[: -len(".weight")] + ".bias"
        if m.has(bias):
            braw, btype, bk = m.raw(bias)
            out["bias"] = np.ascontiguousarray(gq.dequantize(braw, btype, bk).reshape(-1), np.float32)
        return out

    def vector(name: str) -> np.ndarray:
        raw, qtype, k = m.raw(name)
        return np.ascontiguousarray(gq.dequantize(raw, qtype, k).reshape(-1), np.float32)

    layers = []
    for i in range(dims.n_layers):
        p = f"blk.{i}"
        layer = {"attn_norm": vector(f"{p}.attn_norm.weight"), "ffn_norm": vector(f"{p}.ffn_norm.weight")}
        for name in LAYER_MATRICES:
            heads = dims.n_heads if name == "attn_q" else dims.n_kv_heads if name == "attn_k" else None
            layer[name] = matrix(f"{p}.{name}.weight", heads)
        layers.append(layer)
    shape = {"n_layers": dims.n_layers, "hidden": dims.hidden, "n_heads": dims.n_heads,
             "n_kv_heads": dims.n_kv_heads, "head_dim": dims.head_dim, "ffn": dims.ffn, "vocab": dims.vocab,
             "eps": dims.eps, "rope_theta": dims.rope_theta, "rope_scale": dims.rope_linear_factor}
    head = matrix("output.weight") if m.has("output.weight") else None
    return shape, layers, matrix("token_embd.weight"), head, vector("output_norm.weight")


class NativeDecoder:
    """Next-token logits from the native decoder for one sequence at a time (see the module doc).

    ``gguf`` is the model file, ``n_ctx`` the most tokens a sequence holds, ``threads`` the threads of
    its matrix products and attention; ``simd`` forces a kernel set (``"auto"``: the best, :func:`simd`).
    ``activations``: ``"int8"`` multiplies Q4_K and Q6_K weights with activations quantised to 8 bits per
    256 values (llama.cpp's Q8_K; integer dot products, several times faster), ``"float32"`` keeps every
    activation float32 (the quantised model's exact logits up to summation order); other tensor types always
    run on float32 activations. Default: ``$MOMOKA_LLM_ACTIVATIONS``, else ``"int8"``.
    """

    def __init__(self, gguf: str | os.PathLike, *, n_ctx: int, threads: int, simd: str = "auto",
                 activations: str | None = None):
        if activations is None:
            activations = settings.get_choice("MOMOKA_LLM_ACTIVATIONS")
        if activations not in ("int8", "float32"):
            raise ConfigError(f"activations must be 'int8' or 'float32', not {activations!r}")
        self.activations = activations
        shape, layers, embed, head, out_norm = load_weights(gguf, kquant=activations == "int8")
        try:
            self._dec = _core.LlamaDecoder(shape, layers, embed, head, out_norm, int(n_ctx), int(threads), simd)
        except ValueError as exc:
            raise ModelError(f"the native decoder cannot run {Path(gguf).name}: {exc}") from exc
        self.n_vocab = int(shape["vocab"])
        self.n_ctx = self._dec.n_ctx
        self.ids: list[int] = []  # the tokens the cache holds, in order

    @property
    def simd(self) -> str:
        """The kernel set in use."""
        return self._dec.simd

    @property
    def threads(self) -> int:
        """The threads in use."""
        return self._dec.threads

    def _check(self, ids) -> np.ndarray:
        ids = np.asarray(ids, dtype=np.int64)
        if self._dec.n_past + len(ids) > self.n_ctx:
            raise InputTooLargeError(f"the sequence would hold {self._dec.n_past + len(ids)} tokens, more than the "
                                     f"model's context of {self.n_ctx}")
        if len(ids) and (ids.min() < 0 or ids.max() >= self.n_vocab):
            raise ModelError(f"token id outside the vocabulary of {self.n_vocab}")
        return ids.astype(np.int32)

    def _run(self, ids) -> np.ndarray:
        arr = self._check(ids)
        out = self._dec.forward(arr)
        self.ids.extend(int(t) for t in arr)
        return out

    def rows(self, ids, n_out: int) -> np.ndarray:
        """Append ``ids`` (at least one) and return the logits after each of the last ``n_out`` of them,
        ``(n_out, vocab)`` float32."""
        arr = self._check(ids)
        out = self._dec.forward_rows(arr, int(n_out))
        self.ids.extend(int(t) for t in arr)
        return out

    def keep(self, n: int) -> None:
        """Keep only the first ``n`` tokens of the sequence (their cache stays as it was)."""
        self._dec.truncate(int(n))
        del self.ids[int(n):]

    def start(self, ids: list[int]) -> np.ndarray:
        """Forget the previous sequence, run ``ids`` and return the logits after its last token."""
        self._dec.reset()
        self.ids = []
        return self._run(ids)

    def step(self, token: int) -> np.ndarray:
        """Append ``token`` to the sequence and return the logits after it."""
        return self._run([int(token)])
