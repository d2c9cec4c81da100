"""The :class:`Index`: a pipeline of registered components over one :class:`Store`.

::

    import momoka
    with momoka.Index.build(["report.md", "notes/"], store="my.store") as index:   # releases the lock at the end
        for item in index.search("what did the report conclude?", k=5):          # hybrid by default
            print(item.score, item.doc_id, item.start, item.end, item.text[:80])
    index = momoka.Index.open("my.store")
    index.add(["new.txt"]); index.delete(["report"]); index.save()

The :class:`Index` is the front door (build, open, add, extend, delete, save, search, ask, refresh,
close), a facade over the parts that do the work: the read side is a
:class:`~momoka.methods.corpus.Corpus` (:attr:`Index.corpus`: a store snapshot, the
:class:`~momoka.methods.indexer.Embedding` service, the :class:`~momoka.methods.results.Results`
factory and the retrievers built over them); the write side is an
:class:`~momoka.methods.index_writer.IndexWriter` (:attr:`Index.writer`: batches, commits, fallback
tallies, the Ray dispatch, extend), which runs each batch through the
:class:`~momoka.methods.indexer.Indexer` (chunker, raw views, enrichers, relators) into a
:class:`~momoka.store.delta.Delta` that the :class:`~momoka.store.writer.StoreWriter` applies. The pipeline (chunker,
enrichers, relators and their options) is recorded in the store's manifest, so
:meth:`Index.add` runs the same components on new documents only. Searching asks a
registered retriever by name. Inputs (paths, documents, chunkers, embedders, queries) are
in :mod:`momoka.methods.sources`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from .. import registry
from ..errors import InputError
from ..store.snapshot import Snapshot
from ..store.spec import PipelineSpec
from ..store.store import Store, check_embedder, read_manifest
from ..store.writer import StoreWriter
from .base import (  # noqa: F401 (re-exported)
    ADD_BATCH, DEFAULT_ASSEMBLE_CAP, DEFAULT_ASSEMBLE_EXTRA, DEFAULT_ASSEMBLE_MIN_HITS, DEFAULT_ASSEMBLE_TRIM,
    DEFAULT_ASSEMBLE_TRIM_FILL, DEFAULT_BUDGET, DEFAULT_CHUNK_SIZE, DEFAULT_CHUNKER, DEFAULT_RETRIEVER, Item, Member,
    Result, check_budget)
from .corpus import DEFAULT_K, MAX_RETRIEVERS, Corpus  # noqa: F401 (re-exported)
from .index_writer import ENGINES, IndexWriter, check_engine, check_share, create_store  # noqa: F401 (re-exported)
from .indexer import EMBED_BATCH, LEGACY_CHUNK_SIZE, Embedding, Report  # noqa: F401 (re-exported)
from .results import Results
from .sources import (MAX_QUERY_CHARS, embed_limit, embedder_info, language_default_embedder,  # noqa: F401
                      make_embedder, resolve_chunker)


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
    :data:`~momoka.chunking.headers.HEADER_TOKENS` its header may take (``headers``, as the index embeds
    each chunk with its header: :mod:`momoka.chunking.headers`): no chunk is embedded truncated
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

        if chunker in available_chunkers():  # over-long chunks are split further (ClassicChunker._fit_embedding)
            from ..chunking.headers import HEADER_TOKENS  # start-up: momoka.chunking

            room = limit[1] - HEADER_TOKENS if headers else limit[1]
            # an embedder with a small input (under twice the header's share) keeps it all for the chunk
            out["max_embed_tokens"] = room if room >= limit[1] // 2 else limit[1]
    return out


class Index:
    """A searchable index of documents: the facade over a store, its read side and its write side.

    Build one with :meth:`build`, or load one with :meth:`open`. Search with
    :meth:`search` and any registered retriever (``momoka.registry.available("retriever")``).
    An index that writes holds its store's writer lock until :meth:`close`; use it as a
    context manager (``with Index.build(...) as index:``) to release the lock at the end of
    the block. Readers (:meth:`open` without changes) take no lock.

    The facade's parts: :attr:`store` (a read-only :class:`~momoka.store.snapshot.Snapshot` until the
    index writes, then its :class:`~momoka.store.writer.StoreWriter`), :attr:`corpus` (the read side:
    documents, titles, pages, query embedding, results, retrievers: :class:`~momoka.methods.corpus.Corpus`),
    :attr:`writer` (the write side: the pipeline's components, commits, the LLM fallback limit:
    :class:`~momoka.methods.index_writer.IndexWriter`) and :attr:`report` (what the last :meth:`add` did).
    """

    def __init__(self, store: Store, *, chunker: Any = None, embedder: Any = None,
                 components: dict[str, Any] | None = None, progress: bool | None = None):
        self._store = store
        self._chunker = chunker
        self._components: dict[str, Any] = dict(components or {})
        self._progress = progress
        embedding = Embedding(store, embedder, progress=progress)
        self._corpus = Corpus(store, embedding, Results(store), progress=progress)
        self._writer: IndexWriter | None = None

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
                (default ``index.writer.commit_docs``, ``commit_seconds``).
            engine, workers, address: ``engine="ray"`` runs the per-document work on Ray
                workers (see :meth:`add`).
            llm_max_failed: the share of unusable LLM answers above which an LLM-backed
                stage (chunker, enricher, relator) stops with
                :class:`~momoka.errors.LLMFallbackError` (see :meth:`add`).
            headers: embed and BM25-index each chunk with its contextual header (the document's
                title and the chunk's section or title line, :mod:`momoka.chunking.headers`), as
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
        emb = make_embedder(embedder, deferred=engine == "ray")  # a Ray driver embeds nothing: loaded on first use
        params = chunker_params(chunker, size, extra_chunker_params, embedder=emb, headers=bool(headers))
        check_share(llm_max_failed)
        chunker_obj, chunker_info = resolve_chunker(chunker, params, emb)
        check_engine(engine)
        st, spec, components = create_store(store, chunker_info, emb, enrich=enrich, relate=relate, bm25=bm25,
                                            vector_dtype=vector_dtype, overwrite=overwrite, engine=engine,
                                            headers=bool(headers))
        try:
            index = cls(st, chunker=chunker_obj, embedder=emb, components=components, progress=progress)
            writer = index._writing(spec)
            writer.prepare()  # every declared artifact, before any document
            if commit_docs:
                writer.commit_docs = int(commit_docs)
            if commit_seconds:
                writer.commit_seconds = float(commit_seconds)
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
    def store(self) -> Store:
        """The store: a read-only :class:`~momoka.store.snapshot.Snapshot` of the generation opened, or the
        :class:`~momoka.store.writer.StoreWriter` once this index writes."""
        return self._store

    @property
    def corpus(self) -> Corpus:
        """The read side (:class:`~momoka.methods.corpus.Corpus`, what a retriever is given): ``doc_ids``,
        ``document``, ``title``, ``page_of``, ``pipeline``, ``embedder``, ``embed_queries``, ``member``,
        ``result``, ``assembler``, ``depth_for``, ``retriever`` and the query limit ``max_query_chars``."""
        return self._corpus

    @property
    def writer(self) -> IndexWriter:
        """The write side (:class:`~momoka.methods.index_writer.IndexWriter`): ``chunker``, ``component``,
        ``commit_docs``, ``commit_seconds``, ``llm_max_failed``, ``optimize``. An index opened for reading
        becomes the writer of the generation it loaded here (taking the lock; refused when someone committed
        since it was opened); a closed writer takes its lock again."""
        return self._writing()

    @property
    def report(self) -> Report:
        """What the last :meth:`add` did (:class:`~momoka.methods.indexer.Report`: ``added``, ``unchanged``,
        ``replaced``, ``redone``, ``skipped`` as ``(source, reason)``, ``embedded``, ``reused``)."""
        return self._writer.report if self._writer is not None else Report()

    def __len__(self) -> int:
        return len(self._store.documents)

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self._store.documents

    def __repr__(self) -> str:
        emb = (self._store.embedder_info or {}).get("model_id")
        return f"Index({self._store.path}, documents={len(self)}, chunks={self._store.n_chunks}, embedder={emb})"

    # ------------------------------------------------------------------ changes

    def add(self, sources: Iterable[Any], *, progress: bool | None = None, existing: str = "error",
            on_error: str = "raise", encoding: str | None = None, commit: bool = False, engine: str = "local",
            workers: int | None = None, address: str | None = None,
            llm_max_failed: float | None = None, follow_links: bool = False) -> list[str]:
        """Chunk, embed and add documents, then run the pipeline's enrichers and relators on them.

        Accepts the forms of :meth:`build`. Returns the added doc ids (also in
        :attr:`report`, with what was skipped and why, and the number of texts
        embedded and of vectors reused from the replaced documents: ``"embedded"``,
        ``"reused"``; see :meth:`Embedding.embed <momoka.methods.indexer.Embedding.embed>`).

        ``existing``: what to do with a doc id already in the index:
        ``"error"`` raises :class:`InputError` before anything is added;
        ``"skip"`` skips it when its text and title are identical (sha256) and
        reports it as skipped when they changed; ``"replace"`` skips identical
        ones and replaces changed ones. With ``"skip"`` and ``"replace"``, an
        identical document some of whose LLM outputs are fallbacks is indexed
        again (:attr:`report` ``redone``): its usable answers come from the
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
        ``commit=True`` saves a generation every ``writer.commit_docs`` documents or
        ``commit_seconds`` seconds and at the end (a store with a directory
        only), so an interruption loses at most the documents since the last
        commit; otherwise changes are in memory until :meth:`save`. Raises
        :class:`EmptyInputError` when no document is given.
        ``engine="ray"`` runs the per-document work (chunk, embed, enrich,
        relate) on Ray workers (``workers`` actors, default one per CPU of the
        cluster at ``address``, default a local one) while this process commits
        their outputs in order (see :mod:`momoka.methods.distributed`); the
        store is the one ``engine="local"`` builds.
        """
        check_engine(engine)
        if isinstance(sources, Index):
            raise InputError("cannot index an Index: give paths, Documents or dicts with text "
                             "(to add documents to an index, call its add())")
        writer = self._writing()
        if progress is not None:
            writer.progress = self._corpus.progress = progress
        docs, hashes = writer.collect(sources, existing=existing, on_error=on_error, encoding=encoding,
                                      follow_links=bool(follow_links))
        if llm_max_failed is not None:
            check_share(llm_max_failed)
            writer.llm_max_failed = llm_max_failed
        try:
            writer.add(docs, hashes, on_error=on_error, commit=commit, engine=engine, workers=workers, address=address)
        finally:
            self._corpus.forget()
        return list(writer.report.added)

    def extend(self, *, enrich: Sequence[Any] = (), relate: Sequence[Any] = (), commit: bool = False,
               llm_max_failed: float | None = None) -> None:
        """Add enrichers/relators to an existing index and run them on every document.

        The components join the recorded pipeline, so later :meth:`add` calls
        run them too. A component already in the pipeline raises
        :class:`ConfigError`, unless an interrupted :meth:`extend` left it with
        documents still to do (``index.store.pipeline.pending(kind, name)``): then it resumes on those only.

        ``commit=True`` (with a store directory) runs each component on
        ``writer.commit_docs`` documents at a time and saves after each batch,
        recording the documents still to do in the manifest, so a kill or
        Ctrl-C loses at most one batch.

        ``llm_max_failed``: as for :meth:`add` (an LLM-backed component stops above
        this share of unusable answers before its batch is stored, and warns below it).
        """
        if llm_max_failed is not None:
            check_share(llm_max_failed)
        writer = self._writing()
        if llm_max_failed is not None:
            writer.llm_max_failed = llm_max_failed
        try:
            writer.extend(enrich, relate, commit)
        finally:
            self._corpus.forget()

    def delete(self, doc_ids: Iterable[str] | str) -> int:
        """Delete documents by id (from every view and relation); returns the number of chunks removed.

        Raises :class:`InputError` for an unknown id (nothing is deleted then).
        """
        if isinstance(doc_ids, str):
            doc_ids = [doc_ids]
        return self._writing().store.delete(doc_ids)

    def save(self, path: str | os.PathLike | None = None) -> Path:
        """Persist atomically to the store directory (or to ``path`` for an in-memory index)."""
        return self._writing().store.save(path)

    def refresh(self) -> bool:
        """Move this reader to the store's newest commit; True when it moved.

        An index opened for reading answers from the generation it opened
        however many commits other writers make (it holds a lease on it, so
        its files are not deleted under it) until it is refreshed or closed.
        Not for use while other threads search this index: a server opens a
        new :class:`Index` and swaps it in instead (``momoka serve`` does).
        """
        old = self._store
        new = old.refresh()
        if new is old:
            return False
        emb = self._corpus.embedding.own
        try:
            if emb is not None and new.embedder_info is not None:
                check_embedder(new.embedder_info, embedder_info(emb), new.path or "")
        except BaseException:
            new.close()
            raise
        self._use(new)
        old.close()
        return True

    def _writing(self, spec: PipelineSpec | None = None) -> IndexWriter:
        """The index's :class:`IndexWriter` (made on the first change: an index opened for reading becomes the
        writer of the generation it loaded, taking the lock); ``spec``: the pipeline of a new store."""
        if isinstance(self._store, Snapshot):
            self._use(StoreWriter.adopt(self._store))
        self._store.ensure_writable()  # a closed writer takes its lock again
        if self._writer is None:
            self._writer = IndexWriter(spec if spec is not None else self._store.pipeline, self._store,
                                       self._corpus.embedding, chunker=self._chunker, components=self._components,
                                       progress=self._progress)
            self._writer.changed = self._corpus.forget
        return self._writer

    def _use(self, store: Store) -> None:
        """Answer from ``store`` from now on (a newer snapshot, or the writer that adopted the snapshot)."""
        self._store = store
        self._corpus._use(store)

    def close(self) -> None:
        """Release the writer lock and the reader's lease (unsaved changes are dropped from disk's point of view)."""
        self._store.close()

    def __enter__(self) -> Index:
        """``with Index.build(...) as index:`` / ``with Index.open(...) as index:``: :meth:`close` at the end."""
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------------ search

    def search(self, query: str, k: int | None = None, retriever: str = DEFAULT_RETRIEVER, *,
               budget: int | None = None, doc_ids: Iterable[str] | str | None = None, where: dict | None = None,
               assemble: bool = True, **options: Any):
        """The best items for ``query`` from retriever ``retriever`` (a :class:`~momoka.methods.base.Result`).

        ``k``: at most this many items (default 5 without a budget).
        ``budget``: fill a context of this many characters instead, from the
        top ``k`` items (when given; otherwise as many as :meth:`Corpus.depth_for <momoka.methods.corpus.Corpus.depth_for>`
        reads). With ``assemble`` (default) the context is assembled
        (:mod:`momoka.methods.assemble`, its default widening rule):
        touching hits merged with the whitespace between them, a hit widened
        to its paragraph where the rule says, the first item that does not
        fit cut to its sentences that best match the query, later ones
        skipped, no character twice (``result.fit(budget,
        assemble=index.corpus.assembler(cap, min_hits=..., extra=..., trim=...))`` for other
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

        corpus = self._corpus
        r = corpus.retriever(retriever, **options)
        depth = corpus.search_depth(k, budget)
        if per_query_doc_ids is not None and where is None:
            out = r.retrieve_batch(queries, depth, doc_ids=doc_ids, per_query_doc_ids=per_query_doc_ids)
        else:
            out = filtered_search(r, corpus, queries, depth, where, doc_ids, per_query_doc_ids)
        if budget is not None:
            asm = corpus.assembler() if assemble else None
            out = [res.fit(budget, assemble=asm) for res in out]
        return [corpus.results.locate(res) for res in out]

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

        corpus = self._corpus
        opts = {n: dict(o) for n, o in (options or {}).items()}
        reader = reader or default_reader()
        registry.check_options_used({n: o for n, o in opts.items() if n not in (retriever, refine, reader)},
                                    [retriever, *([refine] if refine else []), reader])
        res = self.search(question, k=k, retriever=retriever, budget=budget, where=where, assemble=assemble,
                          **opts.pop(retriever, {}))
        if refine:
            res = registry.create("refiner", refine, embedder=corpus.embedder, corpus=corpus,
                                  **opts.pop(refine, {})).refine(question, res)
            res = corpus.results.locate(res)
        answer = make_reader(reader, opts.pop(reader, {}), budget, lambda: corpus.embedder).answer(question, res)
        return corpus.results.locate_answer(answer)
