"""What a component receives: a narrow context, never the :class:`~momoka.Index` itself.

- A **retriever** gets a :class:`Corpus`: read access to the store, query embedding, the
  construction of results, the documents, and the other retrievers (to compose them).
- An **enricher** or **relator** gets a :class:`Batch` while it runs on a batch of documents:
  the store to write its views, relations and metadata into, the batch's documents, and
  embedding with the index's embedder (with the index's cache, counts and warnings).

Both are thin: each call is the index's own. What a component may use is what its context
names; a component written against them runs the same on a Ray worker's scratch index, whose
store is then shipped as a :class:`~momoka.index.delta.Delta`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..index.store import RAW_VIEW



class _Context:
    __slots__ = ("_index",)

    def __init__(self, index: Any):
        self._index = index

    @property
    def store(self):
        """The :class:`~momoka.index.store.Store`."""
        return self._index.store

    @property
    def embedder(self):
        """The index's embedder (None for a BM25-only index)."""
        return self._index.embedder

    @property
    def progress(self) -> bool | None:
        """Whether long work shows progress (None: the default, see :class:`momoka.progress.Progress`)."""
        return self._index.progress

    def document(self, doc_id: str):
        """The :class:`momoka.text.Document` of ``doc_id`` (see :meth:`momoka.Index.document`)."""
        return self._index.document(doc_id)

    def title(self, doc_id: str) -> str | None:
        """The document's title as stored (None when it has none)."""
        return self._index.title(doc_id)


class Corpus(_Context):
    """What a retriever sees of an index (read-only use): store reads, query embedding, results, documents."""

    __slots__ = ()

    def check_queries(self, queries: Sequence[str]) -> list[str]:
        """Validated queries (see :meth:`momoka.Index.check_queries`)."""
        return self._index.check_queries(queries)

    def embed_queries(self, queries: Sequence[str], *, view: str = RAW_VIEW) -> np.ndarray:
        """Query vectors for view ``view`` (its embedder, its query prefix)."""
        return self._index.embed_queries(queries, view=view)

    def member(self, chunk_id: int):
        """The :class:`~momoka.methods.base.Member` of a stored chunk."""
        return self._index.member(chunk_id)

    def result(self, query: str, ranked: Sequence[tuple[Any, float]], retriever: str, provenance: dict | None = None,
               *, stats: dict | None = None):
        """A :class:`~momoka.methods.base.Result` from ranked ``(chunk id or ids, score)`` pairs."""
        return self._index.result(query, ranked, retriever, provenance, stats=stats)

    def retriever(self, name: str, **options: Any):
        """Another registered retriever over the same index (e.g. a first stage)."""
        return self._index.retriever(name, **options)


class Batch(_Context):
    """What an enricher or relator sees while it runs: the store to write into, the documents, embedding."""

    __slots__ = ()

    def embed(self, texts: Sequence[str], *, view: str = RAW_VIEW, label: str = "embedding") -> np.ndarray:
        """Embed ``texts`` with the embedder of ``view`` (see :meth:`momoka.Index.embed`); the number of texts
        embedded truncated is :attr:`truncated` afterwards."""
        return self._index.embed(texts, view=view, label=label)

    @property
    def truncated(self) -> int:
        """Texts the last :meth:`embed` embedded truncated (over the embedder's input limit)."""
        return int(getattr(self._index, "last_truncated", 0) or 0)
