"""The :class:`Index`: a pipeline of registered components over one :class:`Store`.

::

    import momoka
    with momoka.Index.build(["report.md", "notes/"], store="my.store") as index:   # releases the lock at the end
        for item in index.search("what did the report conclude?", k=5):          # hybrid by default
            print(item.score, item.doc_id, item.start, item.end, item.text[:80])
    index = momoka.Index.open("my.store")
    index.add(["new.txt"]); index.delete(["report"]); index.save()

The :class:`Index` is the front door (build, open, add, extend, delete, save, search, ask), a
facade over the parts that do the work: indexing runs in :mod:`momoka.methods.engine` (batches,
commits, fallback tallies, the Ray dispatch, extend), each batch through the
:class:`~momoka.methods.indexer.Indexer` (chunker, raw views, enrichers, relators) into a
:class:`~momoka.store.delta.Delta` that the :class:`Store` applies; texts are embedded by the
:class:`~momoka.methods.indexer.Embedding` service, results built by
:class:`~momoka.methods.results.Results`. The pipeline (chunker,
enrichers, relators and their options) is recorded in the store's manifest, so
:meth:`Index.add` runs the same components on new documents only. Searching asks a
registered retriever by name. Inputs (paths, documents, chunkers, embedders, queries) are
in :mod:`momoka.methods.sources`.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .. import settings
from ..errors import ConfigError, InputError, MissingArtifactError
from ..store.snapshot import Snapshot
from ..store.store import RAW_VIEW, Store, check_embedder, read_manifest
from ..store.writer import StoreWriter
from .. import registry
from . import engine as engine_
from .base import (  # noqa: F401 (re-exported)
    ADD_BATCH, DEFAULT_ASSEMBLE_CAP, DEFAULT_ASSEMBLE_EXTRA, DEFAULT_ASSEMBLE_MIN_HITS, DEFAULT_ASSEMBLE_TRIM,
    DEFAULT_ASSEMBLE_TRIM_FILL, DEFAULT_BUDGET, DEFAULT_CHUNK_SIZE, DEFAULT_CHUNKER, DEFAULT_RETRIEVER, Item, Member,
    Result, check_budget)
from .context import Corpus, stored_document
from .engine import ENGINES, check_engine, check_share  # noqa: F401 (ENGINES re-exported)
from .indexer import EMBED_BATCH, Embedding, Indexer  # noqa: F401 (EMBED_BATCH re-exported)
from .results import Results
from .sources import (MAX_QUERY_CHARS, check_query, embed_limit, embedder_info, language_default_embedder,
                      make_embedder, resolve_chunker)

#: The size stores record-less of their chunker were built with (the default before it was 100).
LEGACY_CHUNK_SIZE = 200
#: Items returned when neither k nor a budget is given.
DEFAULT_K = 5
#: Built retrievers an :class:`Index` keeps (one per name and options), the least recently used dropped first.
MAX_RETRIEVERS = 32


def chunker_params(chunker: Any, size: int | None = None, params: dict | None = None, embedder: Any = None,
                   headers: bool = True) -> dict:
    """The parameters chunker ``chunker`` is built with, the same for every caller.

    :meth:`Index.build`, ``momoka index`` (and its ``--estimate``), ``momoka chunk``,
    ``eval`` and ``eval-chunking`` all build their chunker from this, so ``momoka
    chunk FILE`` previews exactly the chunks ``momoka index`` stores: ``params``
    (None values dropped) plus ``size`` when given; the default chunker
    (:data:`DEFAULT_CHUNKER`) without a size gets :data:`DEFAULT_CHUNK_SIZE`, any
    other chunker its own default; the recursive chunker gets ``hard_wrap="auto"`` and ``glue_titles=True``. With
    ``embedder`` (one that counts its input, :func:`~momoka.methods.sources.embed_limit`), a classic
    chunker gets ``max_embed_tokens``, the embedder's input limit less the
    :data:`~momoka.chunking.context.HEADER_TOKENS` its header may take (``headers``, as the index embeds
    each chunk with its header: :mod:`momoka.chunking.context`): no chunk is embedded truncated
    (pass the same embedder to :func:`~momoka.methods.sources.resolve_chunker`).
    """
    out = {k: v for k, v in (params or {}).items() if v is not None}
    if size is not None:
        out["size"] = size
    elif chunker == DEFAULT_CHUNKER and "size" not in out:
        out["size"] = DEFAULT_CHUNK_SIZE
    if chunker == "recursive" and "hard_wrap" not in out:
        out["hard_wrap"] = "auto"  # hard-wrapped prose is split at sentences (RecursiveChunker.separators_for)
    if chunker == "recursive" and "glue_titles" not in out:
        out["glue_titles"] = True  # a title line stays with its text (RecursiveChunker.glue_titles)
    limit = embed_limit(embedder) if embedder is not None else None
    if limit is not None and "max_embed_tokens" not in out and isinstance(chunker, str):
        from ..chunking import available_chunkers  # start-up: momoka.chunking

        if chunker in available_chunkers():  # over-long chunks are split further (Chunker._fit_embedding)
            from ..chunking.context import HEADER_TOKENS  # start-up: momoka.chunking

            room = limit[1] - HEADER_TOKENS if headers else limit[1]
            # an embedder with a small input (under twice the header's share) keeps it all for the chunk
            out["max_embed_tokens"] = room if room >= limit[1] // 2 else limit[1]
    return out


class Index:
    """A searchable index of documents: a :class:`Store` plus the pipeline that fills it.

    Build one with :meth:`build`, or load one with :meth:`open`. Search with
    :meth:`search` and any registered retriever (``momoka.registry.available("retriever")``).
    An index that writes holds its store's writer lock until :meth:`close`; use it as a
    context manager (``with Index.build(...) as index:``) to release the lock at the end of
    the block. Readers (:meth:`open` without changes) take no lock.
    """

    def __init__(self, store: Store, *, chunker: Any = None, embedder: Any = None,
                 components: dict[str, Any] | None = None, progress: bool | None = None):
        self.store = store
        self._chunker = chunker
        self._components: dict[str, Any] = dict(components or {})
        self._retrievers: OrderedDict[tuple, Any] = OrderedDict()  # LRU, see retriever()
        self._retrievers_lock = threading.Lock()
        #: Built retrievers kept, one per name and options (:meth:`retriever`); beyond it the least recently
        #: used is dropped (and built again when asked for), so options that vary per call cost no memory.
        self.max_retrievers: int = MAX_RETRIEVERS
        self.progress = progress
        #: The embedding service of this index's views (embedder per view, cache, counts, truncation).
        self.embedding = Embedding(store, embedder, lambda: self.report, lambda: self.progress)
        #: Members, titles and results of the store's chunks (:mod:`momoka.methods.results`).
        self.results = Results(store)
        #: Queries longer than this many characters are refused (raise it for long queries).
        self.max_query_chars = MAX_QUERY_CHARS
        #: ``add(..., commit=True)`` saves a generation after this many documents ...
        self.commit_docs: int = settings.get_int("MOMOKA_COMMIT_DOCS")
        #: ... or after this many seconds, whichever comes first.
        self.commit_seconds: float = settings.get_float("MOMOKA_COMMIT_SECONDS")
        #: What the last :meth:`add` did: ``{"added", "unchanged", "replaced", "redone", "skipped": [(source,
        #: reason)]}`` (``redone``: unchanged documents indexed again because some LLM outputs were fallbacks).
        self.report: dict = {"added": [], "unchanged": [], "replaced": [], "redone": [], "skipped": [],
                             "embedded": 0, "reused": 0}
        #: The share of unusable answers above which an LLM stage stops (None: ``$MOMOKA_LLM_MAX_FAILED``,
        #: else 0.25); see :mod:`momoka.methods.fallbacks`.
        self.llm_max_failed: float | None = None

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
        enrich: Sequence[Any] = (),
        relate: Sequence[Any] = (),
        bm25: dict | None = None,
        vector_dtype: str = "float32",
        overwrite: bool = False,
        progress: bool | None = None,
        on_error: str = "raise",
        encoding: str | None = None,
        commit_docs: int | None = None,
        commit_seconds: float | None = None,
        engine: str = "local",
        workers: int | None = None,
        address: str | None = None,
        llm_max_failed: float | None = None,
        headers: bool = True,
        follow_links: bool = False,
        **extra_chunker_params: Any,
    ) -> Index:
        """Chunk, embed, enrich, relate and index ``sources``; save to ``store`` when given.

        Args:
            sources: file or directory paths (.txt/.md/.html), :class:`momoka.text.Document`
                objects, dicts ``{"doc_id", "text", "title"}`` or eval ``DocRecord``s.
            store: directory to save the store to (None: in memory; call :meth:`save` later).
            chunker: a registered chunker name or a chunker object.
            size: chunk size for the named chunker (default 100 tokens for ``recursive``).
            embedder: ``"default"`` (installed on demand), a registry model id, an
                object with ``.embed/.dim/.model_id/.checksum``, or None for BM25 only.
                ``"default"`` is language-aware: documents mostly in non-Latin scripts (Chinese,
                Japanese, Korean, Cyrillic, Arabic...) are built with ``multilingual-e5-small`` when
                it is installed, said in one line on stderr, and warn once that it is needed when it
                is not (:func:`~momoka.methods.sources.language_default_embedder`); English and
                other Latin-script text gets ``minilm-l6-v2-int8`` as before.
            enrich, relate: enrichers and relators to run after chunking: registered
                names, ``(name, options)`` pairs or component objects.
            bm25: BM25 parameters of the raw view (see :data:`momoka.store.store.DEFAULT_BM25`).
            vector_dtype: ``"float32"`` or ``"float16"`` for the raw vectors.
            overwrite: replace an existing store at ``store``.
            on_error, encoding, follow_links: as for :meth:`add`.
            commit_docs, commit_seconds: commit every this many documents or seconds
                (default :attr:`commit_docs`, :attr:`commit_seconds`).
            engine, workers, address: ``engine="ray"`` runs the per-document work on Ray
                workers (see :meth:`add`).
            llm_max_failed: the share of unusable LLM answers above which an LLM-backed
                stage (chunker, enricher, relator) stops with
                :class:`~momoka.errors.LLMFallbackError` (see :meth:`add`).
            headers: embed and BM25-index each chunk with its contextual header (the document's
                title and the chunk's section or title line, :mod:`momoka.chunking.context`), as
                recorded in the raw views' ``source``; False indexes the chunk text alone.

        With a ``store`` directory the work is committed as it is done (see
        :meth:`add`, ``commit``): an interrupted build keeps every committed
        generation; open the store and :meth:`add` the same sources with
        ``existing="skip"`` to finish it (``momoka index`` does). A build killed
        before its first commit is started again by the next build.
        ``progress``: progress on stderr (default: a live line on a terminal, a line
        every few seconds otherwise; ``MOMOKA_PROGRESS=0`` silences it).
        ``extra_chunker_params``: more parameters for the named chunker (see :func:`chunker_params`).
        """
        if isinstance(embedder, str) and embedder == "default":
            if not isinstance(sources, (str, os.PathLike)):
                sources = list(sources)  # read twice: a sample for the language, then all of it
            embedder = language_default_embedder(sources, encoding=encoding, follow_links=follow_links)
        emb = make_embedder(embedder)
        params = chunker_params(chunker, size, extra_chunker_params, embedder=emb, headers=bool(headers))
        check_share(llm_max_failed)
        chunker_obj, chunker_info = resolve_chunker(chunker, params, emb)
        check_engine(engine)
        st, components = engine_.create_store(store, chunker_info, emb, enrich=enrich, relate=relate, bm25=bm25,
                                              vector_dtype=vector_dtype, overwrite=overwrite, engine=engine,
                                              headers=bool(headers))
        try:
            index = cls(st, chunker=chunker_obj, embedder=emb, components=components, progress=progress)
            Indexer.of(index).prepare(st)  # every declared artifact, before any document
            if commit_docs:
                index.commit_docs = int(commit_docs)
            if commit_seconds:
                index.commit_seconds = float(commit_seconds)
            index.add(sources, on_error=on_error, encoding=encoding, commit=store is not None, engine=engine,
                      workers=workers, address=address, llm_max_failed=llm_max_failed, follow_links=follow_links)
            if store is not None and index.store.dirty:
                index.save()
        except BaseException:
            st.close()
            raise
        return index

    @classmethod
    def open(cls, path: str | os.PathLike, *, embedder: Any = None, chunker: Any = None, writable: bool = False,
             components: dict[str, Any] | None = None, progress: bool | None = None) -> Index:
        """Load the store at ``path``.

        The embedder is loaded on first use from the model registry by the
        store's model id; an ``embedder`` given here must be the one the store
        was built with (same model id and checksum), else
        :class:`~momoka.errors.StoreMismatchError`. The chunker and the
        pipeline's components are rebuilt from the manifest unless given
        (``components``: name -> object, for components that are not
        registered). ``writable=True`` takes the writer lock now; otherwise the
        first change takes it.
        """
        read_manifest(path)  # clear errors before anything else
        st = Store.open(path, writable=writable)
        try:
            if embedder is not None and st.embedder_info is not None:
                check_embedder(st.embedder_info, embedder_info(embedder), path)
            return cls(st, chunker=chunker, embedder=embedder, components=components, progress=progress)
        except BaseException:
            st.close()  # its lock and its lease go with the failed open
            raise

    # ------------------------------------------------------------------ parts

    @property
    def path(self) -> Path | None:
        """The store directory (None for an in-memory index)."""
        return self.store.path

    @property
    def pipeline(self) -> dict:
        """``{"chunker": ..., "enrich": [...], "relate": [...]}`` as the store records it (a copy: the typed
        spec is the store's :attr:`~momoka.store.store.Store.pipeline`, which its writer commits)."""
        return self.store.pipeline.view(self.store.manifest.get("chunker"))

    def has_component(self, kind: str, name: str) -> bool:
        """Whether the pipeline ran enricher/relator ``name`` (``kind``: ``"enrich"`` or ``"relate"``)."""
        return kind in ("enrich", "relate") and self.store.pipeline.entry(kind, name) is not None

    def embedder_for(self, view: str = RAW_VIEW):
        """The embedder of vector view ``view`` (loaded and checked on first use)."""
        return self.embedding.for_view(view)

    @property
    def embedder(self):
        """The embedder of the raw view (None for a BM25-only store)."""
        if not self.store.has_vector_view(RAW_VIEW):
            return self.embedding.own
        return self.embedder_for(RAW_VIEW)

    @property
    def chunker(self):
        """The chunker documents are cut with (rebuilt from the manifest when needed)."""
        if self._chunker is None:
            info = self.store.manifest.get("chunker") or {"name": DEFAULT_CHUNKER, "params": {"size": LEGACY_CHUNK_SIZE}}
            if info.get("object"):
                raise ConfigError(f"this store was built with a custom chunker ({info['name']}); pass it again: "
                                  "Index.open(..., chunker=...)")
            params = dict(info.get("params") or {})
            # a store built with the embedder's limit counts it with the store's embedder
            self._chunker, _ = resolve_chunker(info["name"], params,
                                               self.embedder if "max_embed_tokens" in params else None)
        return self._chunker

    def component(self, kind: str, name: str) -> Any:
        """The enricher (``kind="enrich"``) or relator (``"relate"``) ``name`` of the pipeline."""
        if name not in self._components:
            self._components[name] = engine_.recorded_component(self.pipeline, kind, name)
        return self._components[name]

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

    # ------------------------------------------------------------------ embedding

    def embed(self, texts: Sequence[str], *, view: str = RAW_VIEW, label: str = "embedding") -> np.ndarray:
        """Embed ``texts`` with the embedder of ``view``, in slices, with progress (see
        :meth:`Embedding.embed <momoka.methods.indexer.Embedding.embed>`: duplicates and the vectors of
        replaced documents are not embedded again, :attr:`report` counts ``"embedded"`` and ``"reused"``,
        texts over the embedder's input limit are embedded truncated with one warning)."""
        return self.embedding.embed(texts, self.store.vector_view(view).info["embedder"], view=view, label=label)

    @property
    def last_truncated(self) -> int:
        """Texts the last :meth:`embed` embedded truncated (over the embedder's input limit)."""
        return self.embedding.last_truncated

    def embed_queries(self, queries: Sequence[str], *, view: str = RAW_VIEW) -> np.ndarray:
        """Query vectors for vector view ``view`` (the embedder's query form when it has one)."""
        return self.embedding.embed_queries(queries, view)

    # ------------------------------------------------------------------ changes

    def add(self, sources: Iterable[Any], *, progress: bool | None = None, existing: str = "error",
            on_error: str = "raise", encoding: str | None = None, commit: bool = False, engine: str = "local",
            workers: int | None = None, address: str | None = None,
            llm_max_failed: float | None = None, follow_links: bool = False) -> list[str]:
        """Chunk, embed and add documents, then run the pipeline's enrichers and relators on them.

        Accepts the forms of :meth:`build`. Returns the added doc ids (also in
        :attr:`report`, with what was skipped and why, and the number of texts
        embedded and of vectors reused from the replaced documents: ``"embedded"``,
        ``"reused"``; see :meth:`embed`).

        ``existing``: what to do with a doc id already in the index:
        ``"error"`` raises :class:`InputError` before anything is added;
        ``"skip"`` skips it when its text and title are identical (sha256) and
        reports it as skipped when they changed; ``"replace"`` skips identical
        ones and replaces changed ones. With ``"skip"`` and ``"replace"``, an
        identical document some of whose LLM outputs are fallbacks is indexed
        again (:attr:`report` ``"redone"``): its usable answers come from the
        LLM cache, so only the fallback items are asked again.
        ``llm_max_failed``: the share of unusable answers above which an
        LLM-backed stage stops with :class:`~momoka.errors.LLMFallbackError`
        before that batch is stored (default :attr:`llm_max_failed`, else
        ``$MOMOKA_LLM_MAX_FAILED``, else 0.25); below it, each stage with
        unusable answers gives one warning with their share, and each document
        records which of its outputs are fallbacks (:mod:`momoka.methods.fallbacks`).
        ``encoding``: the text encoding of every file; None (default) reads each file's own: its byte order
        mark, an HTML file's declared charset, else UTF-8, else charset-normalizer's guess with a warning
        (:mod:`momoka.text.io`).
        ``on_error``: a file that cannot be read or chunked raises
        (``"raise"``, nothing added) or is skipped and reported (``"skip"``).
        Symbolic links found in a folder follow one rule
        (:func:`~momoka.methods.sources.expand_paths`): links to files and folders
        inside the paths given are followed (a loop is not), a link whose target
        is elsewhere is not, unless ``follow_links``; a link not followed is
        skipped and reported like an unreadable file (``on_error``).
        ``commit=True`` saves a generation every :attr:`commit_docs` documents or
        :attr:`commit_seconds` seconds and at the end (a store with a directory
        only), so an interruption loses at most the documents since the last
        commit; otherwise changes are in memory until :meth:`save`. Raises
        :class:`EmptyInputError` when no document is given.
        ``engine="ray"`` runs the per-document work (chunk, embed, enrich,
        relate) on Ray workers (``workers`` actors, default one per CPU of the
        cluster at ``address``, default a local one) while this process commits
        their outputs in order (see :mod:`momoka.methods.distributed`); the
        store is the one ``engine="local"`` builds.
        """
        if progress is not None:
            self.progress = progress
        check_engine(engine)
        self._writer()
        docs, hashes = engine_.collect(self, sources, existing=existing, on_error=on_error, encoding=encoding,
                                       follow_links=bool(follow_links))
        if llm_max_failed is not None:
            check_share(llm_max_failed)
            self.llm_max_failed = llm_max_failed
        try:
            engine_.add(self, docs, hashes, on_error=on_error, commit=commit, engine=engine, workers=workers,
                        address=address)
        finally:
            self._retrievers.clear()
        return list(self.report["added"])

    def document(self, doc_id: str):
        """The :class:`momoka.text.Document` of ``doc_id``.

        It is rebuilt from the stored chunks: every
        chunk's text at its offsets, whitespace between chunks as spaces (the
        chunkers cover every non-whitespace character, so only whitespace
        differs), parsed as plain text with the stored title and page spans.
        """
        return stored_document(self.store, doc_id)

    def page_of(self, doc_id: str, offset: int) -> int | None:
        """The page number (1-based) of ``offset`` in document ``doc_id``; ``None`` when it has no pages
        (only PDFs have them)."""
        if self.store.documents.get(doc_id) is None:
            raise InputError(f"unknown document id {doc_id!r}")
        return self.results.pages(doc_id, offset, offset + 1)[0]

    def record_settings(self, kind: str, name: str, settings: dict) -> None:
        """Record what enricher/relator ``name`` reports (its ``describe()``) in the pipeline of the manifest."""
        self.store.pipeline.record_settings(kind, name, settings)

    def extend(self, *, enrich: Sequence[Any] = (), relate: Sequence[Any] = (), commit: bool = False,
               llm_max_failed: float | None = None) -> None:
        """Add enrichers/relators to an existing index and run them on every document.

        The components join the recorded pipeline, so later :meth:`add` calls
        run them too. A component already in the pipeline raises
        :class:`ConfigError`, unless an interrupted :meth:`extend` left it with
        documents still to do (:meth:`pending`): then it resumes on those only.

        ``commit=True`` (with a store directory) runs each component on
        :attr:`commit_docs` documents at a time and saves after each batch,
        recording the documents still to do in the manifest, so a kill or
        Ctrl-C loses at most one batch.

        ``llm_max_failed``: as for :meth:`add` (an LLM-backed component stops above
        this share of unusable answers before its batch is stored, and warns below it).
        """
        if llm_max_failed is not None:
            check_share(llm_max_failed)
            self.llm_max_failed = llm_max_failed
        self._writer()
        try:
            engine_.extend(self, enrich, relate, commit, objects=self._components)
        finally:
            self._retrievers.clear()

    def needs(self, kind: str, name: str) -> bool:
        """Whether :meth:`extend` has work for enricher/relator ``name``: not in the pipeline, or left unfinished."""
        return not self.has_component(kind, name) or bool(self.pending(kind, name))

    def pending(self, kind: str, name: str) -> list[str]:
        """Documents an interrupted :meth:`extend` left for enricher/relator ``name`` to do (empty when none)."""
        entry = self.store.pipeline.entry(kind, name) if kind in ("enrich", "relate") else None
        return list(entry.pending or []) if entry is not None else []

    def delete(self, doc_ids: Iterable[str] | str) -> int:
        """Delete documents by id (from every view and relation); returns the number of chunks removed.

        Raises :class:`InputError` for an unknown id (nothing is deleted then).
        """
        if isinstance(doc_ids, str):
            doc_ids = [doc_ids]
        return self._writer().delete(doc_ids)

    def save(self, path: str | os.PathLike | None = None) -> Path:
        """Persist atomically to the store directory (or to ``path`` for an in-memory index)."""
        return self._writer().save(path)

    def optimize(self) -> bool:
        """Merge the store's segments into one (saving unsaved changes first); True when something was merged.

        Each commit adds a segment and the merge policy merges the newest ones as
        they pile up (:mod:`momoka.store.segments`); this merges them all: the data
        of deleted chunks leaves the store and each dense view has one HNSW graph.
        """
        merged = self._writer().merge(everything=True)
        self._retrievers.clear()
        return merged

    def refresh(self) -> bool:
        """Move this reader to the store's newest commit; True when it moved.

        An index opened for reading answers from the generation it opened
        however many commits other writers make (it holds a lease on it, so
        its files are not deleted under it) until it is refreshed or closed.
        Not for use while other threads search this index: a server opens a
        new :class:`Index` and swaps it in instead (``momoka serve`` does).
        """
        old = self.store
        new = old.refresh()
        if new is old:
            return False
        emb = self.embedding.own
        try:
            if emb is not None and new.embedder_info is not None:
                check_embedder(new.embedder_info, embedder_info(emb), new.path or "")
        except BaseException:
            new.close()
            raise
        self._use(new)
        old.close()
        return True

    def _writer(self) -> StoreWriter:
        """The store's writer: an index opened for reading becomes the writer of the generation it loaded
        on its first change (taking the lock; refused when someone committed since it was opened)."""
        if isinstance(self.store, Snapshot):
            self._use(StoreWriter.adopt(self.store))
        self.store.ensure_writable()  # a closed writer takes its lock again
        return self.store

    def _use(self, store: Store) -> None:
        """Answer from ``store`` from now on (a newer snapshot, or the writer that adopted the snapshot)."""
        self.store = store
        self.embedding.store = store
        self.results.store = store
        self.results.reset()
        self._retrievers.clear()

    def close(self) -> None:
        """Release the writer lock and the reader's lease (unsaved changes are dropped from disk's point of view)."""
        self.store.close()

    def __enter__(self) -> Index:
        """``with Index.build(...) as index:`` / ``with Index.open(...) as index:``: :meth:`close` at the end."""
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------------ results

    def member(self, chunk_id: int) -> Member:
        """The :class:`~momoka.methods.base.Member` for a stored chunk."""
        return self.results.member(chunk_id)

    def title(self, doc_id: str) -> str | None:
        """The document's title as stored (None when it has none)."""
        return self.results.title(doc_id)

    def result(self, query: str, ranked: Sequence[tuple[Any, float]], retriever: str, provenance: dict | None = None,
               *, stats: dict | None = None) -> Result:
        """A :class:`~momoka.methods.base.Result` from ranked ``(chunk id or tuple of ids, score)`` pairs."""
        return self.results.result(query, ranked, retriever, provenance, stats=stats)

    # ------------------------------------------------------------------ search

    def check_queries(self, queries: Sequence[str]) -> list[str]:
        """Validated queries: a list of non-empty str of at most :attr:`max_query_chars` characters."""
        if isinstance(queries, str):
            raise InputError("give a list of queries (use search() for one query)")
        return [check_query(q, self.max_query_chars) for q in queries]

    def retriever(self, name: str = DEFAULT_RETRIEVER, **options: Any):
        """The registered retriever ``name`` over this index (built once per name and options).

        The last :attr:`max_retrievers` retrievers built are kept (least recently used dropped first;
        :attr:`cached_retrievers` counts them), so a caller passing new options every time (a server's
        clients) does not grow memory. Raises :class:`ConfigError` for an unknown name, and
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
        why = registry.missing(name, self.store, options)
        if why is not None:
            raise MissingArtifactError(why)
        r = registry.create("retriever", name, Corpus(self), **options)
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

    def search(self, query: str, k: int | None = None, retriever: str = DEFAULT_RETRIEVER, *,
               budget: int | None = None, doc_ids: Iterable[str] | str | None = None, where: dict | None = None,
               assemble: bool = True, **options: Any):
        """The best items for ``query`` from retriever ``retriever`` (a :class:`~momoka.methods.base.Result`).

        ``k``: at most this many items (default 5 without a budget).
        ``budget``: fill a context of this many characters instead, from the
        top ``k`` items (when given; otherwise as many as :meth:`depth_for`
        reads). With ``assemble`` (default) the context is assembled
        (:mod:`momoka.methods.assemble`, its default widening rule):
        touching hits merged with the whitespace between them, a hit widened
        to its paragraph where the rule says, the first item that does not
        fit cut to its sentences that best match the query, later ones
        skipped, no character twice (``result.fit(budget,
        assemble=index.assembler(cap, min_hits=..., extra=..., trim=...))`` for other
        settings); ``assemble=False`` keeps the longest prefix of the ranking that
        fits. ``doc_ids`` restricts the search to these documents; ``where``
        filters on metadata before the budget is filled (``{"type": "pdf",
        "folder": "docs", "title": ..., "page": (3, 7)}``: the grammar, how it
        is applied and its limits are in :mod:`momoka.methods.filters`);
        ``options`` go to the retriever (e.g. ``view="titled"`` for ``dense``).
        A BM25-only index answers ``hybrid`` with BM25 alone. Every member of
        every item carries its ``section`` and, in a document with pages (a
        PDF), its ``page`` and ``page_end`` (1-based).
        """
        return self.search_batch([query], k, retriever, budget=budget, doc_ids=doc_ids, where=where,
                                 assemble=assemble, **options)[0]

    def search_batch(self, queries: Sequence[str], k: int | None = None, retriever: str = DEFAULT_RETRIEVER, *,
                     budget: int | None = None, doc_ids: Iterable[str] | str | None = None,
                     per_query_doc_ids: Sequence[Any] | None = None, where: dict | None = None,
                     assemble: bool = True, **options: Any) -> list:
        """:meth:`search` for many queries (one batch for the retriever).

        ``per_query_doc_ids`` gives one document filter per query (a doc id, a
        list of ids, or None) instead of ``doc_ids`` for all; ``where`` applies
        to every query.
        """
        from .filters import filtered_search  # start-up: momoka.methods.filters

        r = self.retriever(retriever, **options)
        depth = self.search_depth(k, budget)
        if per_query_doc_ids is not None and where is None:
            out = r.retrieve_batch(queries, depth, doc_ids=doc_ids, per_query_doc_ids=per_query_doc_ids)
        else:
            out = filtered_search(r, self, queries, depth, where, doc_ids, per_query_doc_ids)
        if budget is not None:
            asm = self.assembler() if assemble else None
            out = [res.fit(budget, assemble=asm) for res in out]
        return [self.results.locate(res) for res in out]

    def assembler(self, cap: int = DEFAULT_ASSEMBLE_CAP, *, min_hits: int = DEFAULT_ASSEMBLE_MIN_HITS,
                  extra: int = DEFAULT_ASSEMBLE_EXTRA, trim: int = DEFAULT_ASSEMBLE_TRIM,
                  trim_fill: float = DEFAULT_ASSEMBLE_TRIM_FILL):
        """The :class:`~momoka.methods.assemble.Assembler` over this index's chunks with these widening and
        trimming settings (built once per state of the chunk table): ``result.fit(budget,
        assemble=index.assembler())``."""
        return self.results.assembler(cap, min_hits=min_hits, extra=extra, trim=trim, trim_fill=trim_fill)

    def ask(self, question: str, *, retriever: str = DEFAULT_RETRIEVER, reader: str | None = None,
            k: int | None = None, budget: int | None = DEFAULT_BUDGET, refine: str | None = None,
            options: dict[str, dict] | None = None, assemble: bool = True, where: dict | None = None):
        """Retrieve for ``question`` and answer it: an :class:`~momoka.methods.base.Answer`.

        ``reader``: a registered reader; ``None`` is ``llm`` when an endpoint is
        configured (``MOMOKA_LLM_BASE_URL``), else ``evidence``: the best
        sentences quoted with their exact spans (``Answer.kind == "evidence"``),
        since the local 135M model's answers are often wrong; ``local`` makes it
        answer anyway (the model is installed on first use). ``budget``: the
        characters of passages retrieved and given to the reader
        (``max_context_chars``; ``None``: ``k`` items, all given), assembled
        as :meth:`search` does unless ``assemble=False``. ``refine``: a
        refiner run on the result first (``ets``). ``options``: per component
        name, its options (``{"hybrid": {"fusion": "rrf"}, "evidence": {"sentences": 5}}``); options for
        a component the call does not run are a :class:`~momoka.errors.ConfigError` (checked first).
        ``where``: a metadata filter on the retrieval, as for :meth:`search`. Every citation and
        context passage of the answer carries its ``section`` and, in a document with pages, its
        ``page`` and ``page_end``.
        """
        from .standard.reader import default_reader, make_reader  # start-up: momoka.methods.standard.reader

        opts = {n: dict(o) for n, o in (options or {}).items()}
        reader = reader or default_reader()
        registry.check_options_used({n: o for n, o in opts.items() if n not in (retriever, refine, reader)},
                                    [retriever, *([refine] if refine else []), reader])
        res = self.search(question, k=k, retriever=retriever, budget=budget, where=where, assemble=assemble,
                          **opts.pop(retriever, {}))
        if refine:
            res = registry.create("refiner", refine, embedder=self.embedder, corpus=Corpus(self),
                                  **opts.pop(refine, {})).refine(question, res)
            res = self.results.locate(res)
        answer = make_reader(reader, opts.pop(reader, {}), budget, lambda: self.embedder).answer(question, res)
        return self.results.locate_answer(answer)

    def search_depth(self, k: int | None = None, budget: int | None = None) -> int:
        """How many items :meth:`search` asks its retriever for: ``k`` when given, else :meth:`depth_for`
        ``budget`` when given, else 5."""
        return k if k is not None else (self.depth_for(budget) if budget is not None else DEFAULT_K)

    def depth_for(self, budget: int) -> int:
        """How many items to read to fill ``budget`` characters: enough at half the mean chunk length."""
        return self.results.depth_for(budget)
