"""momoka.methods: the papers' methods as registered components over the shared layers.

* :mod:`momoka.methods.base` -- the protocols (Chunker, Enricher, Relator, Retriever,
  Refiner, Reader) and the one result type (:class:`Result` of :class:`Item` of :class:`Member`);
* :mod:`momoka.registry` -- ``register``, ``create``, ``available`` by kind and name;
* :mod:`momoka.methods.standard` -- dense, BM25 and hybrid retrievers, the LLM reader;
* :mod:`momoka.methods.momoka` -- Momoka-RAG (titles, MCTS paths, the Trail retriever).
"""

from .base import Answer, Citation, Item, Member, Result

__all__ = ["Answer", "Citation", "Item", "Member", "Result"]
