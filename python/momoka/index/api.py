"""The high-level :class:`Index`: documents in, ranked chunks out, persisted in a :class:`Store`.

::

    import momoka
    index = momoka.Index.build(["report.md", "notes/"], store="my.store")
    for hit in index.search("what did the report conclude?", k=5):
        print(hit.score, hit.doc_id, hit.start, hit.end, hit.text[:80])
    index = momoka.Index.open("my.store")
    index.add(["new.txt"]); index.delete(["report"]); index.save()
"""

from __future__ import annotations

import os
import re
import sys
import time
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import (
    ConfigError,
    EmptyInputError,
    InputError,
    InputTooLargeError,
    StoreError,
)
from ..text.model import Chunk
from .store import RAW, Store, check_embedder, embedder_of, read_manifest

#: Methods accepted by :meth:`Index.search`.
METHODS = ("dense", "bm25", "hybrid")
#: Default chunker and its parameters.
DEFAULT_CHUNKER = "recursive"
DEFAULT_CHUNK_SIZE = 200
#: Queries longer than this many characters are refused (InputTooLargeError).
MAX_QUERY_CHARS = 10_000
#: File extensions read when a directory is given.
DOC_EXTENSIONS = (".txt", ".md", ".markdown", ".html", ".htm")
#: Reciprocal rank fusion constant.
RRF_K = 60
#: What the ``raw`` views index.
RAW_SOURCE = {"text": "chunk"}


@dataclass(frozen=True)
class Hit:
    """One retrieved chunk: the :class:`~momoka.text.Chunk`, its score and rank.

    ``score`` is the cosine similarity (dense), the BM25 score (bm25) or the
    reciprocal-rank-fusion score (hybrid). ``chunk_id`` is the store's id.
    """

    chunk: Chunk
    score: float
    rank: int
    chunk_id: int
    method: str
    title: str | None = None

    @property
    def doc_id(self) -> str | None:
        return self.chunk.doc_id

    @property
    def start(self) -> int:
        return self.chunk.start

    @property
    def end(self) -> int:
        return self.chunk.end

    @property
    def text(self) -> str:
        return self.chunk.text

    @property
    def section(self) -> tuple[str, ...]:
        return self.chunk.section

    @property
    def span(self) -> tuple[str | None, int, int]:
        """``(doc_id, start, end)``, the form retrieval metrics take."""
        return (self.chunk.doc_id, self.chunk.start, self.chunk.end)

    def to_dict(self) -> dict:
        """A JSON-serialisable view (chunk fields plus score, rank, method, title)."""
        d = self.chunk.to_dict()
        d.update({"rank": self.rank, "score": self.score, "chunk_id": self.chunk_id, "method": self.method,
                  "title": self.title})
        return d


def fuse(rankings: Sequence[Sequence[tuple[int, float]]], k: int, rrf_k: int = RRF_K) -> list[tuple[int, float]]:
    """Reciprocal rank fusion: ``score(c) = sum over rankings of 1 / (rrf_k + rank)`` (rank from 1)."""
    score: dict[int, float] = {}
    first: dict[int, tuple[int, int]] = {}
    for r, ranking in enumerate(rankings):
        for rank, (cid, _) in enumerate(ranking, start=1):
            score[cid] = score.get(cid, 0.0) + 1.0 / (rrf_k + rank)
            first.setdefault(cid, (rank, r))
    order = sorted(score, key=lambda c: (-score[c], first[c]))
    return [(c, score[c]) for c in order[:k]]


def make_hits(store: Store, ranked: Sequence[tuple[int, float]], method: str) -> list[Hit]:
    """:class:`Hit` objects for ranked ``(chunk_id, score)`` pairs."""
    out = []
    for rank, (cid, s) in enumerate(ranked, start=1):
        c = store.chunk(cid)
        d = store.documents.get(c.doc_id)
        out.append(Hit(c, float(s), rank, cid, method, d.title if d else None))
    return out


def _allowed(store: Store, doc_ids) -> list[int] | None:
    return None if doc_ids is None else store.chunk_ids_of(doc_ids)


def search_bm25(store: Store, query: str, k: int, doc_ids=None) -> list[tuple[int, float]]:
    """Top-k ``(chunk_id, score)`` from the ``raw`` BM25 view."""
    return store.bm25_view(RAW).search(query, k, _allowed(store, doc_ids))


def search_dense(store: Store, qvec: np.ndarray, k: int, doc_ids=None) -> list[tuple[int, float]]:
    """Top-k ``(chunk_id, cosine)`` from the ``raw`` vector view."""
    if not store.has_vector_view(RAW):
        raise StoreError("this store was built without an embedder: use method='bm25'")
    return store.vector_view(RAW).search(qvec, k, _allowed(store, doc_ids))


class _Progress:
    """A one-line progress report on stderr (only when stderr is a terminal, or forced)."""

    def __init__(self, label: str, total: int, enabled: bool | None = None):
        self.label, self.total, self.done = label, total, 0
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self.t0 = time.monotonic()

    def update(self, n: int) -> None:
        self.done += n
        if self.enabled:
            el = time.monotonic() - self.t0
            print(f"\rmomoka: {self.label} {self.done}/{self.total} ({el:.1f}s)", end="", file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.enabled:
            print(file=sys.stderr, flush=True)


def embedder_info(embedder: Any) -> dict:
    """``{"model_id", "checksum", "dim"}`` of an embedder object."""
    for attr in ("embed", "dim", "model_id", "checksum"):
        if not hasattr(embedder, attr):
            raise ConfigError(f"an embedder needs .embed, .dim, .model_id and .checksum; {embedder!r} lacks .{attr}")
    return {"model_id": str(embedder.model_id), "checksum": str(embedder.checksum), "dim": int(embedder.dim)}


def _default_embedder(model_id: str | None = None):
    from ..models import Embedder

    if model_id is None:
        return Embedder.default()
    return Embedder.from_registry(model_id)


def _resolve_chunker(chunker: Any, params: dict) -> tuple[Any, dict]:
    from ..chunking import get_chunker

    if isinstance(chunker, str):
        params = {k: v for k, v in params.items() if v is not None}
        return get_chunker(chunker, **params), {"name": chunker, "params": params}
    if callable(chunker):
        if params:
            raise ConfigError("chunker parameters go with a chunker name, not a chunker object")
        name = getattr(chunker, "name", type(chunker).__name__)
        raw = chunker._params() if hasattr(chunker, "_params") else {}
        safe = {k: (list(v) if isinstance(v, tuple) else v) for k, v in raw.items()
                if isinstance(v, (str, int, float, bool, type(None), tuple, list))}
        return chunker, {"name": name, "params": safe, "object": True}
    raise ConfigError(f"chunker must be a name or a callable, not {type(chunker).__name__}")


def _expand_paths(items: Iterable[Any]) -> list[Any]:
    out: list[Any] = []
    for it in items:
        if isinstance(it, (str, os.PathLike)):
            p = Path(it)
            if p.is_dir():
                files = sorted(f for f in p.rglob("*") if f.is_file() and f.suffix.lower() in DOC_EXTENSIONS)
                if not files:
                    raise InputError(f"{p} holds no documents ({', '.join(DOC_EXTENSIONS)})")
                out.extend(files)
            elif p.is_file():
                out.append(p)
            else:
                raise InputError(f"no such file or directory: {p}")
        else:
            out.append(it)
    return out


def _to_document(item: Any):
    """A :class:`momoka.text.Document` from a path, a Document, a dict or an eval DocRecord."""
    from ..text import Document

    if isinstance(item, Document):
        doc = item
    elif isinstance(item, (str, os.PathLike)):
        doc = Document.from_file(item)
    elif isinstance(item, dict):
        if "text" not in item:
            raise InputError("a document dict needs 'text' (and 'doc_id')")
        doc = Document.from_text(item["text"], title=item.get("title"), doc_id=item.get("doc_id"),
                                 source=item.get("source"))
    elif hasattr(item, "to_document"):
        doc = item.to_document()
    else:
        raise InputError(f"cannot index a {type(item).__name__}: give paths, Documents or dicts with text")
    if not doc.doc_id:
        raise InputError("every document needs a doc_id (files get their name; give one for texts)")
    return doc


class Index:
    """A searchable index of documents, backed by a :class:`Store`.

    Build one with :meth:`build`, or load one with :meth:`open`. Retrieval
    methods: ``"dense"`` (cosine over HNSW with the store's embedder),
    ``"bm25"`` (native Okapi BM25) and ``"hybrid"`` (reciprocal rank fusion
    of both).
    """

    def __init__(self, store: Store, *, chunker: Any = None, embedder: Any = None, enrich: Any = None):
        self.store = store
        self._chunker = chunker
        self._embedder = embedder
        self._enrich = enrich

    # ------------------------------------------------------------------ construction

    @classmethod
    def build(
        cls,
        sources: Iterable[Any],
        store: str | os.PathLike | None = None,
        *,
        chunker: Any = DEFAULT_CHUNKER,
        size: int | None = None,
        embedder: Any = "default",
        bm25: dict | None = None,
        vector_dtype: str = "float32",
        overwrite: bool = False,
        progress: bool | None = None,
        enrich: Any = None,
        **chunker_params: Any,
    ) -> Index:
        """Chunk, embed and index ``sources``; save to ``store`` when given.

        Args:
            sources: file or directory paths (.txt/.md/.html), :class:`momoka.text.Document`
                objects, dicts ``{"doc_id", "text", "title"}`` or eval ``DocRecord``s.
            store: directory to save the store to (None: in memory; call :meth:`save` later).
            chunker: a chunker name (``momoka.chunking.available_chunkers()``) or object.
            size: chunk size for the named chunker (default 200 tokens for ``recursive``).
            embedder: ``"default"`` (the registry's default, installed on demand), a
                registry model id, an object with ``.embed/.dim/.model_id/.checksum``,
                or None for a BM25-only index.
            bm25: BM25 parameters (see :data:`momoka.index.bm25_view.DEFAULT_BM25`).
            vector_dtype: ``"float32"`` or ``"float16"`` for the stored vectors.
            overwrite: replace an existing store at ``store``.
            progress: show progress on stderr (default: when it is a terminal).
            enrich: an enrichment hook run between chunking and embedding (see :meth:`add`).
            chunker_params: more parameters for the named chunker.
        """
        if isinstance(chunker, str) and size is None and chunker == DEFAULT_CHUNKER and "size" not in chunker_params:
            size = DEFAULT_CHUNK_SIZE
        params = dict(chunker_params)
        if size is not None:
            params["size"] = size
        chunker_obj, chunker_info = _resolve_chunker(chunker, params)
        emb = cls._make_embedder(embedder)
        st = Store.create(store, chunker=chunker_info, overwrite=overwrite)
        try:
            if emb is not None:
                st.add_vector_view(RAW, embedder=embedder_info(emb), dtype=vector_dtype, source=dict(RAW_SOURCE))
            st.add_bm25_view(RAW, params=bm25, source=dict(RAW_SOURCE))
            index = cls(st, chunker=chunker_obj, embedder=emb, enrich=enrich)
            index.add(sources, progress=progress)
            if store is not None:
                index.save()
        except BaseException:
            st.close()
            raise
        return index

    @staticmethod
    def _make_embedder(embedder: Any):
        if embedder is None:
            return None
        if isinstance(embedder, str):
            return _default_embedder(None if embedder == "default" else embedder)
        embedder_info(embedder)  # validates the interface
        return embedder

    @classmethod
    def open(cls, path: str | os.PathLike, *, embedder: Any = None, chunker: Any = None,
             writable: bool = False, enrich: Any = None) -> Index:
        """Load the store at ``path``.

        The embedder is loaded on first use (dense search or add) from the
        model registry by the store's model id; an ``embedder`` given here must
        be the one the store was built with (same model id and checksum), else
        :class:`~momoka.errors.StoreMismatchError`. The chunker is rebuilt from
        the manifest unless given (a store built with a chunker object needs it
        again to add documents). ``writable=True`` takes the writer lock now;
        otherwise the first :meth:`add`/:meth:`delete` takes it.
        """
        manifest = read_manifest(path)
        if embedder is not None:
            check_embedder(embedder_of(manifest), embedder_info(embedder), path)
        st = Store.open(path, writable=writable)
        return cls(st, chunker=chunker, embedder=embedder, enrich=enrich)

    # ------------------------------------------------------------------ parts

    @property
    def path(self) -> Path | None:
        """The store directory (None for an in-memory index)."""
        return self.store.path

    @property
    def embedder(self):
        """The store's embedder (loaded and checked on first use); None for a BM25-only store."""
        info = self.store.embedder_info
        if info is None:
            return None
        if self._embedder is None:
            try:
                emb = _default_embedder(info["model_id"])
            except Exception as exc:
                from ..errors import MomokaError

                if isinstance(exc, MomokaError):
                    raise
                raise StoreError(f"cannot load the store's embedder {info['model_id']}: {exc}") from exc
            check_embedder(info, embedder_info(emb), self.store.path or "")
            self._embedder = emb
        return self._embedder

    @property
    def chunker(self):
        """The chunker documents are cut with (rebuilt from the manifest when needed)."""
        if self._chunker is None:
            info = self.store.manifest.get("chunker") or {"name": DEFAULT_CHUNKER, "params": {"size": DEFAULT_CHUNK_SIZE}}
            if info.get("object"):
                raise ConfigError(
                    f"this store was built with a custom chunker ({info['name']}); pass it again: Index.open(..., chunker=...)"
                )
            self._chunker, _ = _resolve_chunker(info["name"], dict(info.get("params") or {}))
        return self._chunker

    @property
    def doc_ids(self) -> list[str]:
        """The ids of the indexed documents, in insertion order."""
        return list(self.store.documents)

    def __len__(self) -> int:
        return len(self.store.documents)

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self.store.documents

    def __repr__(self) -> str:
        emb = (self.store.embedder_info or {}).get("model_id")
        return f"Index({self.path}, documents={len(self)}, chunks={self.store.n_chunks}, embedder={emb})"

    # ------------------------------------------------------------------ changes

    def add(self, sources: Iterable[Any], *, progress: bool | None = None, enrich: Any = None) -> list[str]:
        """Chunk, embed and add documents (see :meth:`build` for the accepted forms).

        ``enrich`` (default: the one given to :meth:`build`/:meth:`open`) is a
        callable ``enrich(documents, chunks) -> list[dict]`` run after chunking:
        one dict per document with optional ``"chunks"`` (replacement chunks,
        e.g. with metadata added), ``"metadata"`` (stored in the document
        entry) and ``"embed_texts"`` (the text embedded for each chunk, e.g.
        with a title prefixed; ``Chunk.text`` is stored unchanged). Its
        ``describe()``, if any, is stored in ``manifest["extra"]["enrich"]``.
        A store built with an enricher refuses to add documents without one.

        Returns the added doc ids. Changes are in memory until :meth:`save`.
        Raises :class:`InputError` for a document already in the index (nothing
        is added then), :class:`EmptyInputError` for nothing to add.
        """
        self.store.ensure_writable()
        items = _expand_paths([sources] if isinstance(sources, (str, os.PathLike)) else list(sources))
        if not items:
            raise EmptyInputError("no documents to add")
        docs = [_to_document(it) for it in items]
        seen: set[str] = set()
        for d in docs:
            if d.doc_id in self.store.documents or d.doc_id in seen:
                raise InputError(f"document {d.doc_id!r} is already in the index; delete it first to replace it")
            seen.add(d.doc_id)
        enrich = enrich if enrich is not None else self._enrich
        if enrich is None and (self.store.manifest.get("extra") or {}).get("enrich"):
            name = self.store.manifest["extra"]["enrich"].get("method", "an enricher")
            raise ConfigError(f"this store was built with {name}; pass it again to add documents "
                              "(Index.open(..., enrich=...) or add(..., enrich=...))")
        if enrich is not None and not callable(enrich):
            raise ConfigError(f"enrich must be callable (documents, chunks) -> list of dicts, not {enrich!r}")
        chunker = self.chunker
        pr = _Progress("chunking", len(docs), progress)
        chunks: list[list[Chunk]] = []
        for d in docs:
            cs = list(chunker(d))
            if not cs:
                raise InputError(f"document {d.doc_id!r} produced no chunks")
            chunks.append(cs)
            pr.update(1)
        pr.close()
        doc_meta: list[dict] = [{} for _ in docs]
        embed_texts = [[c.text for c in cs] for cs in chunks]
        if enrich is not None:
            res = list(enrich(docs, chunks))
            if len(res) != len(docs):
                raise ConfigError(f"enrich returned {len(res)} entries for {len(docs)} documents")
            for i, r in enumerate(res):
                if r.get("chunks") is not None:
                    chunks[i] = list(r["chunks"])
                    if not chunks[i]:
                        raise InputError(f"document {docs[i].doc_id!r}: enrich returned no chunks")
                doc_meta[i] = dict(r.get("metadata") or {})
                et = r.get("embed_texts")
                if et is not None:
                    if len(et) != len(chunks[i]) or not all(isinstance(t, str) for t in et):
                        raise ConfigError(f"document {docs[i].doc_id!r}: enrich must give one embed text per chunk")
                    embed_texts[i] = list(et)
                else:
                    embed_texts[i] = [c.text for c in chunks[i]]
        vectors = None
        if self.store.embedder_info is not None:
            emb = self.embedder
            flat = [t for ts in embed_texts for t in ts]
            pr = _Progress("embedding chunks", len(flat), progress)
            parts = []
            step = 256
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                for i in range(0, len(flat), step):
                    parts.append(np.asarray(emb.embed(flat[i : i + step]), dtype=np.float32))
                    pr.update(len(flat[i : i + step]))
            pr.close()
            n_trunc = 0
            for w in caught:
                if type(w.message).__name__ == "TruncationWarning":
                    m = re.match(r"(\d+) of", str(w.message))
                    n_trunc += int(m.group(1)) if m else 1
                else:
                    warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
            if n_trunc:
                warnings.warn(
                    f"{n_trunc} of {len(flat)} chunks are longer than the embedder's input limit and were embedded "
                    "truncated (BM25 indexes them whole); a smaller chunk size avoids this",
                    UserWarning,
                    stacklevel=2,
                )
            vectors = np.concatenate(parts, axis=0) if parts else np.zeros((0, emb.dim), np.float32)
        meta = [{"doc_id": d.doc_id, "title": d.title, "source": d.source, "length": len(d.text), "metadata": m}
                for d, m in zip(docs, doc_meta)]
        st = self.store
        if vectors is not None and vectors.shape != (sum(map(len, chunks)), st.embedder_info["dim"]):
            raise InputError(f"the embedder gave vectors of shape {vectors.shape}")
        ids = [c for cs in st.add_documents(meta, chunks) for c in cs]
        st.bm25_view(RAW).add(ids, [c.text for cs in chunks for c in cs])
        if vectors is not None:
            st.vector_view(RAW).add(ids, vectors)
        describe = getattr(enrich, "describe", None)
        if callable(describe):
            self.store.manifest.setdefault("extra", {})["enrich"] = describe()
        return [d.doc_id for d in docs]

    def delete(self, doc_ids: Iterable[str] | str) -> int:
        """Delete documents by id; returns the number of chunks removed.

        Raises :class:`InputError` for an unknown id (nothing is deleted then).
        """
        if isinstance(doc_ids, str):
            doc_ids = [doc_ids]
        return self.store.delete(doc_ids)

    def save(self, path: str | os.PathLike | None = None) -> Path:
        """Persist atomically to the store directory (or to ``path`` for an in-memory index)."""
        return self.store.save(path)

    def close(self) -> None:
        """Release the writer lock (unsaved changes are dropped from disk's point of view)."""
        self.store.close()

    def __enter__(self) -> Index:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------------ search

    def _check_query(self, query: Any, max_chars: int) -> str:
        if not isinstance(query, str):
            raise InputError(f"query must be str, got {type(query).__name__}")
        if not query.strip():
            raise EmptyInputError("query is empty")
        if len(query) > max_chars:
            raise InputTooLargeError(
                f"query is {len(query):,} characters; the limit is {max_chars:,} (pass max_query_chars to raise it)"
            )
        return query

    def search(
        self,
        query: str,
        k: int = 5,
        method: str = "hybrid",
        doc_ids: Iterable[str] | str | None = None,
        *,
        max_query_chars: int = MAX_QUERY_CHARS,
        depth: int | None = None,
    ) -> list[Hit]:
        """The ``k`` best chunks for ``query``, best first.

        Args:
            method: ``"dense"``, ``"bm25"`` or ``"hybrid"`` (reciprocal rank fusion
                of the dense and BM25 rankings, each ``depth`` deep, default
                ``max(50, 4k)``). A BM25-only store searches with ``"bm25"``
                whatever the method, except ``"dense"`` which raises StoreError.
            doc_ids: restrict the search to these documents.

        Raises:
            EmptyInputError: empty query. InputTooLargeError: query over
            ``max_query_chars``. InputError: unknown doc id in ``doc_ids``.
        """
        query = self._check_query(query, max_query_chars)
        if method not in METHODS:
            raise ConfigError(f"method must be one of {', '.join(METHODS)}, not {method!r}")
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ConfigError(f"k must be a positive integer, got {k!r}")
        if isinstance(doc_ids, str):
            doc_ids = [doc_ids]
        if doc_ids is not None:
            doc_ids = list(doc_ids)
            self.store.chunk_ids_of(doc_ids)  # validates
        st = self.store
        if st.embedder_info is None and method == "hybrid":
            method = "bm25"
        if method == "bm25":
            return make_hits(st, search_bm25(st, query, k, doc_ids), "bm25")
        qv = self._embed_query(query)
        if method == "dense":
            return make_hits(st, search_dense(st, qv, k, doc_ids), "dense")
        d = depth or max(50, 4 * k)
        fused = fuse([search_dense(st, qv, d, doc_ids), search_bm25(st, query, d, doc_ids)], k)
        return make_hits(st, fused, "hybrid")

    def _embed_query(self, query: str) -> np.ndarray:
        emb = self.embedder
        if emb is None:
            raise StoreError("this index was built without an embedder: use method='bm25'")
        embed_query = getattr(emb, "embed_query", None)
        v = embed_query([query]) if callable(embed_query) else emb.embed([query])
        return np.asarray(v, dtype=np.float32)[0]

    def search_batch(self, queries: Sequence[str], k: int = 5, method: str = "hybrid",
                     doc_ids: Iterable[str] | None = None, *, per_query_doc_ids: Sequence[Any] | None = None,
                     **kw: Any) -> list[list[Hit]]:
        """:meth:`search` for many queries (dense queries are embedded in one batch).

        ``doc_ids`` filters every query alike; ``per_query_doc_ids`` gives one
        filter per query instead (a doc id, a list of ids, or None).
        """
        queries = list(queries)
        if per_query_doc_ids is not None:
            if doc_ids is not None:
                raise ConfigError("give doc_ids or per_query_doc_ids, not both")
            filters = [[f] if isinstance(f, str) else f for f in per_query_doc_ids]
            if len(filters) != len(queries):
                raise ConfigError("per_query_doc_ids needs one entry per query")
        else:
            filters = [doc_ids] * len(queries)
        for q in queries:
            self._check_query(q, kw.get("max_query_chars", MAX_QUERY_CHARS))
        if method not in METHODS:
            raise ConfigError(f"method must be one of {', '.join(METHODS)}, not {method!r}")
        if method in ("dense", "hybrid") and self.store.embedder_info is not None and queries:
            emb = self.embedder
            embed_query = getattr(emb, "embed_query", None)
            vecs = np.asarray(embed_query(queries) if callable(embed_query) else emb.embed(queries), np.float32)
            out = []
            st = self.store
            d = kw.get("depth") or max(50, 4 * k)
            for q, v, f in zip(queries, vecs, filters):
                if method == "dense":
                    out.append(make_hits(st, search_dense(st, v, k, f), "dense"))
                else:
                    out.append(make_hits(st, fuse([search_dense(st, v, d, f), search_bm25(st, q, d, f)], k), "hybrid"))
            return out
        return [self.search(q, k, method, f, **kw) for q, f in zip(queries, filters)]
