"""A stand-in embedder for tests that need vectors but not a model: a hashed bag of words.

``HashEmbedder(dim, model_id)`` maps each lower-cased word (``[a-z0-9]+``) to one of ``dim`` buckets by
its MD5 and L2-normalises the counts: deterministic, no model files, and texts that share words are
near. ``texts`` counts the texts embedded (to check what is embedded again and what is reused).

``reference_session(onnx_path)``: a plain onnxruntime session of a model file, for raw reference runs,
with the graph optimizers its ``config.json`` turns off left off (in an int8 graph the float rounding
of a fused kernel moves activation quantisation steps, up to 0.013 in a vector component).
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import numpy as np


class HashEmbedder:
    """Hashed bag of words (L2-normalised); deterministic, no model files."""

    def __init__(self, dim: int = 32, model_id: str = "test/hash"):
        self.dim, self.model_id = dim, model_id
        self.checksum = hashlib.sha256(f"{model_id}:{dim}".encode()).hexdigest()
        self.texts = 0

    def embed(self, texts):
        self.texts += len(texts)
        out = np.zeros((len(texts), self.dim), np.float32)
        for i, t in enumerate(texts):
            for w in re.findall(r"[a-z0-9]+", t.lower()):
                out[i, int(hashlib.md5(w.encode()).hexdigest(), 16) % self.dim] += 1.0
        n = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.maximum(n, 1e-12)


def reference_session(onnx_path):
    """``onnxruntime.InferenceSession`` of ``onnx_path`` on the CPU, without the optimizers its config names."""
    import onnxruntime as ort

    cfg = Path(onnx_path).with_name("config.json")
    off = json.loads(cfg.read_text(encoding="utf-8")).get("disabled_optimizers", []) if cfg.is_file() else []
    return ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"], disabled_optimizers=off)
