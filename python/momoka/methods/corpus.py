"""What a component receives: a narrow view of the index, never the :class:`~momoka.Index` itself.

- A **retriever** gets a :class:`Corpus`: read access to the store, query embedding, the
  construction of results, the documents, and the other retrievers (to compose them).
- An **enricher** or **relator** gets a :class:`Batch` while it runs on a batch of documents:
  the store to write its views, relations and metadata into (the batch's scratch store, whose
  contents are the batch's :class:`~momoka.store.delta.Delta`), the batch's documents, and
  embedding with the index's embedding service (its cache, counts and truncation warnings).

Neither holds the index: a :class:`Corpus` is built from a store, the embedding service and the
results factory (the :class:`~momoka.Index` facade's :attr:`~momoka.Index.corpus`), and a
:class:`Batch` from a scratch store and the embedding service: a component written against it runs the same in this process and on a Ray worker (see
:mod:`momoka.methods.indexer`).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import registry
from ..errors import InputError, MissingArtifactError
from ..store.store import RAW_VIEW
from ..text import Document
from .base import (DEFAULT_ASSEMBLE_CAP, DEFAULT_ASSEMBLE_EXTRA, DEFAULT_ASSEMBLE_MIN_HITS, DEFAULT_ASSEMBLE_TRIM,
                   DEFAULT_ASSEMBLE_TRIM_FILL, DEFAULT_RETRIEVER)
from .sources import MAX_QUERY_CHARS, check_query

#: Items returned when neither k nor a budget is given.
DEFAULT_K = 5
#: Built retrievers a :class:`Corpus` keeps (one per name and options), the least recently used dropped first.
MAX_RETRIEVERS = 32


class Corpus:
    """The read side of an index: what a retriever sees, and what :attr:`momoka.Index.corpus` gives.

    Built from a store (a :class:`~momoka.store.snapshot.Snapshot`, or the writer's store once the index
    writes), the :class:`~momoka.methods.indexer.Embedding` service and the
    :class:`~momoka.methods.results.Results` factory; it holds no :class:`~momoka.Index`. It reads the
    store (:attr:`store`, :attr:`doc_ids`, :meth:`document`, :meth:`title`, :meth:`page_of`), embeds
    queries (:meth:`embed_queries`), builds results (:meth:`member`, :meth:`result`, :meth:`assembler`,
    :meth:`depth_for`) and builds and keeps the registered retrievers (:meth:`retriever`), so one
    retriever can compose others over the same corpus.
    """

    def __init__(self, store: Any, embedding: Any, results: Any, *, progress: bool | None = None):
        self._store = store
        self._embedding = embedding
        self._results = results
        #: Whether long work shows progress (None: the default, see :class:`momoka.progress.Progress`).
        self.progress = progress
        #: Queries longer than this many characters are refused (raise it for long queries).
        self.max_query_chars = MAX_QUERY_CHARS
        #: Built retrievers kept, one per name and options (:meth:`retriever`); beyond it the least recently
        #: used is dropped (and built again when asked for), so options that vary per call cost no memory.
        self.max_retrievers: int = MAX_RETRIEVERS
        self._retrievers: OrderedDict[tuple, Any] = OrderedDict()  # LRU, see retriever()
        self._retrievers_lock = threading.Lock()

    def _use(self, store: Any) -> None:
        """Read ``store`` from now on (a newer snapshot, or the writer that adopted the snapshot)."""
        self._store = store
        self._embedding.store = store
        self._results.store = store
        self._results.reset()
        self.forget()

    def forget(self) -> None:
        """Drop the built retrievers (after the store changed: they are built again when asked for)."""
        with self._retrievers_lock:
            self._retrievers.clear()

    # ------------------------------------------------------------------ the store

    @property
    def store(self):
        """The store read (a :class:`~momoka.store.snapshot.Snapshot`, or the index's writer once it writes)."""
        return self._store

    @property
    def embedding(self):
        """The :class:`~momoka.methods.indexer.Embedding` service of the index's views."""
        return self._embedding

    @property
    def results(self):
        """The :class:`~momoka.methods.results.Results` factory over the store's chunks."""
        return self._results

    @property
    def doc_ids(self) -> list[str]:
        """The ids of the indexed documents, in insertion order."""
        return list(self._store.documents)

    @property
    def pipeline(self) -> dict:
        """``{"chunker": ..., "enrich": [...], "relate": [...]}`` as the store records it (a copy: the typed
        spec is the store's :attr:`~momoka.store.store.Store.pipeline`, which its writer commits)."""
        return self._store.pipeline.view(self._store.manifest.get("chunker"))

    def document(self, doc_id: str):
        """The :class:`momoka.text.Document` of ``doc_id``, rebuilt from the stored chunks
        (:func:`stored_document`)."""
        return stored_document(self._store, doc_id)

    def title(self, doc_id: str) -> str | None:
        """The document's title as stored (None when it has none)."""
        return self._results.title(doc_id)

    def page_of(self, doc_id: str, offset: int) -> int | None:
        """The page number (1-based) of ``offset`` in document ``doc_id``; ``None`` when it has no pages
        (only PDFs have them)."""
        if self._store.documents.get(doc_id) is None:
            raise InputError(f"unknown document id {doc_id!r}")
        return self._results.pages(doc_id, offset, offset + 1)[0]

    # ------------------------------------------------------------------ embedding

    @property
    def embedder(self):
        """The embedder of the raw view (None for a BM25-only index)."""
        if not self._store.has_vector_view(RAW_VIEW):
            return self._embedding.own
        return self.embedder_for(RAW_VIEW)

    def embedder_for(self, view: str = RAW_VIEW):
        """The embedder of vector view ``view`` (e.g. to ask whether its vectors depend on their text alone,
        ``batch_independent``, before embedding queries together); loaded and checked on first use."""
        return self._embedding.for_view(view)

    def embed_queries(self, queries: Sequence[str], *, view: str = RAW_VIEW) -> np.ndarray:
        """Query vectors for view ``view`` (its embedder, its query prefix)."""
        return self._embedding.embed_queries(queries, view)

    def embed(self, texts: Sequence[str], *, view: str = RAW_VIEW, label: str = "embedding") -> np.ndarray:
        """Embed ``texts`` with the embedder of ``view``, in slices, with progress (see
        :meth:`Embedding.embed <momoka.methods.indexer.Embedding.embed>`: duplicates are embedded once,
        texts over the embedder's input limit are embedded truncated with one warning)."""
        return self._embedding.embed(texts, self._store.vector_view(view).info["embedder"], view=view, label=label)

    # ------------------------------------------------------------------ queries and results

    def check_queries(self, queries: Sequence[str]) -> list[str]:
        """Validated queries: a list of non-empty str of at most :attr:`max_query_chars` characters."""
        if isinstance(queries, str):
            raise InputError("give a list of queries (use search() for one query)")
        return [check_query(q, self.max_query_chars) for q in queries]

    def member(self, chunk_id: int):
        """The :class:`~momoka.methods.base.Member` of a stored chunk."""
        return self._results.member(chunk_id)

    def result(self, query: str, ranked: Sequence[tuple[Any, float]], retriever: str, provenance: dict | None = None,
               *, stats: dict | None = None):
        """A :class:`~momoka.methods.base.Result` from ranked ``(chunk id or ids, score)`` pairs."""
        return self._results.result(query, ranked, retriever, provenance, stats=stats)

    def assembler(self, cap: int = DEFAULT_ASSEMBLE_CAP, *, min_hits: int = DEFAULT_ASSEMBLE_MIN_HITS,
                  extra: int = DEFAULT_ASSEMBLE_EXTRA, trim: int = DEFAULT_ASSEMBLE_TRIM,
                  trim_fill: float = DEFAULT_ASSEMBLE_TRIM_FILL):
        """The :class:`~momoka.methods.assemble.Assembler` over the chunks with these widening and trimming
        settings (built once per state of the chunk table): ``result.fit(budget, assemble=corpus.assembler())``
        fills a budget as ``momoka query`` does."""
        return self._results.assembler(cap, min_hits=min_hits, extra=extra, trim=trim, trim_fill=trim_fill)

    def depth_for(self, budget: int) -> int:
        """How many items to read to fill ``budget`` characters: enough at half the mean chunk length."""
        return self._results.depth_for(budget)

    def search_depth(self, k: int | None = None, budget: int | None = None) -> int:
        """How many items a search asks its retriever for: ``k`` when given, else :meth:`depth_for`
        ``budget`` when given, else :data:`DEFAULT_K`."""
        return k if k is not None else (self.depth_for(budget) if budget is not None else DEFAULT_K)

    # ------------------------------------------------------------------ retrievers

    def retriever(self, name: str = DEFAULT_RETRIEVER, **options: Any):
        """The registered retriever ``name`` over this corpus (built once per name and options).

        The last :attr:`max_retrievers` retrievers built are kept (least recently used dropped first;
        :attr:`cached_retrievers` counts them), so a caller passing new options every time (a server's
        clients) does not grow memory. Raises :class:`~momoka.errors.ConfigError` for an unknown name, and
        :class:`~momoka.errors.MissingArtifactError` (a ``StoreError``) when the
        store lacks an artifact the retriever declares it needs, naming the
        ``--enrich``/``--relate`` that makes it (e.g. ``trail`` on a store
        built without Momoka-Map paths: ``--relate paths``).
        """
        key = (name, tuple(sorted((k, repr(v)) for k, v in options.items())))
        with self._retrievers_lock:
            r = self._retrievers.get(key)
            if r is not None:
                self._retrievers.move_to_end(key)
                return r
        why = registry.missing(name, self._store, options)
        if why is not None:
            raise MissingArtifactError(why)
        r = registry.create("retriever", name, self, **options)
        with self._retrievers_lock:  # built twice at once: both callers get the one kept
            r = self._retrievers.setdefault(key, r)
            self._retrievers.move_to_end(key)
            while len(self._retrievers) > max(1, self.max_retrievers):
                self._retrievers.popitem(last=False)
        return r

    @property
    def cached_retrievers(self) -> int:
        """How many built retrievers :meth:`retriever` keeps now (at most :attr:`max_retrievers`)."""
        return len(self._retrievers)


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
        """Embed ``texts`` with the embedder of ``view`` (see :meth:`Embedding.embed <momoka.methods.indexer.Embedding.embed>`); the number of texts
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
