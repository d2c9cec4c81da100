"""The sentence embedder of momoka: :class:`OnnxEmbedder` (``momoka.models.onnx_embedder``, where its behaviour
is described) plus the installed models by id, built on first use by the installer.

>>> emb = Embedder.default()                 # minilm-l6-v2-int8, installed on first use
>>> vecs = emb.embed(["a sentence", "another one"])   # float32 (2, 384), rows of norm 1

The embedder proper lives below the installer (which checks the models it builds with it); this class, which
asks the installer for a model, lives above it.
"""

from __future__ import annotations

import json
import os
from typing import Any

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

__all__ = ["DeferredEmbedder", "Embedder", "TruncationWarning", "load_tokenizer", "BATCHING", "BATCH_TOKENS", "TOKENIZE_SLICE"]


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


class DeferredEmbedder:
    """An installed registry embedder that loads its model on first use: what an index records of it
    (``model_id``, ``checksum``: the sha256 the installer recorded for its ``model.onnx``, which
    :meth:`Embedder.from_registry` verifies the file against when it loads it; ``dim`` from its config)
    and what a chunker counts tokens with (``tokenizer``, truncating at ``max_length`` as the embedder's
    own does) are there without loading the ONNX model; anything else (``embed``...) loads it.

    For a process that records an embedder but embeds nothing itself: the driver of a distributed (Ray)
    build, whose workers load their own (the model and onnxruntime take about 90 MB of its memory).
    """

    def __init__(self, model_id: str | None = None):
        from .installer import model_dir  # start-up: the installer only when a model is asked for

        model_id = model_id or DEFAULT_EMBEDDER
        if model_id in MODELS and MODELS[model_id].kind != "embedder":
            raise ModelError(f"{model_id!r} is a {MODELS[model_id].kind}, not an embedder")
        d = model_dir(model_id, None)
        entry = installed_models(d.parent)[model_id]
        sha = entry["files"].get("model.onnx", {}).get("sha256")
        try:
            cfg = json.loads((d / "config.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            cfg = {}
        self.model_id = model_id
        self._dir = d
        self._cfg = cfg if isinstance(cfg, dict) else {}
        self._real: Embedder | None = None if sha and isinstance(self._cfg.get("dim"), int) else Embedder(
            d, model_id=model_id, expected_sha256=sha)  # nothing to read it from: loaded now
        self.checksum = sha if self._real is None else self._real.checksum
        self._tokenizer = None

    @property
    def dim(self) -> int:
        """Embedding dimension (from the model's config)."""
        return self._real.dim if self._real is not None else int(self._cfg["dim"])

    @property
    def max_length(self) -> int:
        """Tokens per input (the model's config, 256 without one, as :class:`Embedder`)."""
        return self._real.max_length if self._real is not None else int(self._cfg.get("max_length", 256))

    @property
    def tokenizer(self):
        """The model's tokenizer, truncating at :attr:`max_length` (the embedder's, once it is loaded)."""
        if self._real is not None:
            return self._real.tokenizer
        if self._tokenizer is None:
            tok = load_tokenizer(self._dir / "tokenizer.json")
            tok.enable_truncation(self.max_length, strategy="longest_first", direction="right")
            self._tokenizer = tok
        return self._tokenizer

    def loaded(self) -> Embedder:
        """The embedder, loaded (and verified against :attr:`checksum`) on the first call."""
        if self._real is None:
            self._real = Embedder(self._dir, model_id=self.model_id, expected_sha256=self.checksum)
        return self._real

    def embed(self, *args: Any, **kwargs: Any):
        """:meth:`Embedder.embed`, the model loaded first."""
        return self.loaded().embed(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.loaded(), name)

    def __repr__(self) -> str:
        return f"DeferredEmbedder(model_id={self.model_id!r}, loaded={self._real is not None})"
