"""What a component receives: a narrow context, never the :class:`~momoka.Index` itself.

- A **retriever** gets a :class:`Corpus`: read access to the store, query embedding, the
  construction of results, the documents, and the other retrievers (to compose them).
- An **enricher** or **relator** gets a :class:`Batch` while it runs on a batch of documents:
  the store to write its views, relations and metadata into (the batch's scratch store, whose
  contents are the batch's :class:`~momoka.store.delta.Delta`), the batch's documents, and
  embedding with the index's embedding service (its cache, counts and truncation warnings).

A :class:`Corpus` is thin: each call is the index's own. A :class:`Batch` holds no index at all:
a component written against it runs the same in this process and on a Ray worker (see
:mod:`momoka.methods.indexer`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import InputError
from ..store.store import RAW_VIEW
from ..text import Document



class _Context:
    __slots__ = ("_index",)

    def __init__(self, index: Any):
        self._index = index

    @property
    def store(self):
        """The :class:`~momoka.store.store.Store`."""
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

    def embedder_for(self, view: str = RAW_VIEW):
        """The embedder of vector view ``view`` (e.g. to ask whether its vectors depend on their text alone,
        ``batch_independent``, before embedding queries together)."""
        return self._index.embedder_for(view)

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

    def assembler(self):
        """The index's context assembler at the default widening settings (see :meth:`momoka.Index.assembler`):
        ``result.fit(budget, assemble=corpus.assembler())`` fills a budget as ``momoka query`` does."""
        return self._index.assembler()


class Batch:
    """What an enricher or relator sees while it runs: the store to write into, the documents, embedding.

    While :meth:`momoka.Index.add` runs, :attr:`store` is the batch's own scratch store (its
    documents and chunks only, shaped like the index's store); what the components write there is
    the batch's :class:`~momoka.store.delta.Delta`, which the index's store then applies. While
    :meth:`momoka.Index.extend` runs, it is a scratch store holding copies of the stored documents of the
    batch, their chunks and their vectors (:meth:`~momoka.methods.indexer.Indexer.run_stored`).
    """

    __slots__ = ("_store", "_embedding", "_documents", "_progress")

    def __init__(self, store: Any, embedding: Any, *, documents: dict | None = None, progress: bool | None = None):
        self._store = store
        self._embedding = embedding
        self._documents = dict(documents or {})
        self._progress = progress

    @property
    def store(self):
        """The :class:`~momoka.store.store.Store` the component writes its views, relations and metadata into."""
        return self._store

    @property
    def embedder(self):
        """The embedder of the raw view (None for a BM25-only index)."""
        if not self._store.has_vector_view(RAW_VIEW):
            return None
        return self._embedding.resolve(self._store.vector_view(RAW_VIEW).info["embedder"], RAW_VIEW)

    @property
    def progress(self) -> bool | None:
        """Whether long work shows progress (None: the default, see :class:`momoka.progress.Progress`)."""
        return self._progress

    def document(self, doc_id: str):
        """The :class:`momoka.text.Document` of ``doc_id``: the parsed document of the batch, else rebuilt from
        the stored chunks (:func:`stored_document`)."""
        d = self._documents.get(doc_id)
        return d if d is not None else stored_document(self._store, doc_id)

    def title(self, doc_id: str) -> str | None:
        """The document's title as stored (None when it has none)."""
        d = self._store.documents.get(doc_id)
        return (d.title or None) if d is not None else None

    def embed(self, texts: Sequence[str], *, view: str = RAW_VIEW, label: str = "embedding") -> np.ndarray:
        """Embed ``texts`` with the embedder of ``view`` (see :meth:`momoka.Index.embed`); the number of texts
        embedded truncated is :attr:`truncated` afterwards."""
        return self._embedding.embed(texts, self._store.vector_view(view).info["embedder"], view=view, label=label)

    @property
    def truncated(self) -> int:
        """Texts the last :meth:`embed` embedded truncated (over the embedder's input limit)."""
        return int(self._embedding.last_truncated)


def stored_document(store: Any, doc_id: str):
    """The :class:`momoka.text.Document` of ``doc_id`` rebuilt from ``store``'s chunks.

    Every chunk's text at its offsets, whitespace between chunks as spaces (the chunkers cover
    every non-whitespace character, so only whitespace differs), parsed as plain text with the
    stored title and page spans. Raises :class:`~momoka.errors.InputError` for an unknown id.
    """
    entry = store.documents.get(doc_id)
    if entry is None:
        raise InputError(f"unknown document id {doc_id!r}")
    buf = [" "] * int(entry.length)
    for cid in entry.chunk_ids:
        c = store.chunks.get(cid)
        buf[c.start : c.end] = c.text
    return Document("".join(buf), title=entry.title, doc_id=doc_id, source=entry.source,
                    pages=entry.metadata.get("pages"))
