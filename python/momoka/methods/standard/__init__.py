"""Standard components every pipeline can use: dense, BM25 and hybrid retrievers, and the readers.

Importing this package registers them (see :mod:`momoka.registry`):

* retrievers ``dense`` (alias ``base``: the papers' naive top-k), ``bm25`` and ``hybrid``;
* readers ``evidence`` (quoted sentences, no generation: ``ask``'s default with no endpoint),
  ``llm`` (an OpenAI-compatible endpoint, else the local model) and ``local`` (the local model).
"""

from .evidence import EvidenceReader
from .fusion import RRF_K, convex, rrf
from .reader import ContextTrimmedWarning, LLMReader, default_reader
from .retrievers import BM25Retriever, DenseRetriever, HybridRetriever, StoreRetriever

__all__ = ["RRF_K", "BM25Retriever", "ContextTrimmedWarning", "DenseRetriever", "EvidenceReader", "HybridRetriever",
           "LLMReader", "StoreRetriever", "convex", "rrf", "default_reader"]
