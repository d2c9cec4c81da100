"""Standard components every pipeline can use: dense, BM25 and hybrid retrievers, and the LLM reader.

Importing this package registers them (see :mod:`momoka.methods.registry`):

* retrievers ``dense`` (alias ``base``: the papers' naive top-k), ``bm25`` and ``hybrid``;
* reader ``llm`` (the local model, or any OpenAI-compatible endpoint).
"""

from .fusion import RRF_K, convex, rrf
from .reader import LLMReader
from .retrievers import BM25Retriever, DenseRetriever, HybridRetriever, StoreRetriever

__all__ = ["RRF_K", "BM25Retriever", "DenseRetriever", "HybridRetriever", "LLMReader", "StoreRetriever", "convex", "rrf"]
