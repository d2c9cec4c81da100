"""The sentence embedder of momoka: :class:`OnnxEmbedder` (``momoka.models.onnx_embedder``, where its behaviour
is described) plus the installed models by id, built on first use by the installer.

>>> emb = Embedder.default()                 # minilm-l6-v2-int8, installed on first use
>>> vecs = emb.embed(["a sentence", "another one"])   # float32 (2, 384), rows of norm 1

The embedder proper lives below the installer (which checks the models it builds with it); this class, which
asks the installer for a model, lives above it.
"""

from __future__ import annotations

import os

from ..errors import ModelError
from .onnx_embedder import (
    BATCH_TOKENS,
    BATCHING,
    TOKENIZE_SLICE,
    OnnxEmbedder,
    TruncationWarning,
    load_tokenizer,
)
from .catalog import DEFAULT_EMBEDDER, MODELS, installed_models

__all__ = ["Embedder", "TruncationWarning", "load_tokenizer", "BATCHING", "BATCH_TOKENS", "TOKENIZE_SLICE"]


class Embedder(OnnxEmbedder):
    """An ONNX sentence embedder (see :class:`OnnxEmbedder` for the arguments), with the registry's models by id."""

    @classmethod
    def default(cls, **kwargs) -> "Embedder":
        """The default embedder (``minilm-l6-v2-int8``), installing it once when missing."""
        return cls.from_registry(DEFAULT_EMBEDDER, **kwargs)

    @classmethod
    def from_registry(cls, model_id: str, *, path: str | os.PathLike | None = None, **kwargs) -> "Embedder":
        """An installed registry model by id (see :mod:`momoka.models.catalog`), checksum-verified."""
        if model_id in MODELS and MODELS[model_id].kind != "embedder":
            raise ModelError(f"{model_id!r} is a {MODELS[model_id].kind}, not an embedder")
        from .installer import model_dir  # start-up: the installer (zip, subprocess) only when a model is asked for

        d = model_dir(model_id, path)
        entry = installed_models(d.parent)[model_id]
        sha = entry["files"].get("model.onnx", {}).get("sha256")
        return cls(d, model_id=model_id, expected_sha256=sha, **kwargs)
