"""The write side of an index: :class:`IndexWriter`, behind :meth:`momoka.Index.add` and :meth:`~momoka.Index.extend`.

An :class:`IndexWriter` is built from the typed pipeline spec
(:class:`~momoka.store.spec.PipelineSpec`), the store's writer
(:class:`~momoka.store.writer.StoreWriter`, which holds the lock) and the
:class:`~momoka.methods.indexer.Embedding` service; it holds no :class:`~momoka.Index`.
:meth:`IndexWriter.collect` reads the sources into documents and decides, per document already in the
index, whether it is unchanged, replaced or indexed again. :meth:`IndexWriter.add` cuts the documents into
batches, runs each through the :class:`~momoka.methods.indexer.Indexer` (in this process, or on
Ray workers: :mod:`momoka.methods.distributed`), applies each batch's
:class:`~momoka.store.delta.Delta` to the store (:meth:`IndexWriter.apply`) and
commits as it goes (:class:`Commits`). :meth:`IndexWriter.extend` runs added enrichers and relators over the
documents already stored. The fallback tallies of LLM-backed stages are reset before a run and
reported after it (:mod:`momoka.methods.fallbacks`). What a run did is its :class:`Report`.
"""

from __future__ import annotations

import copy
import os
import posixpath
import time
import warnings
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from .. import registry, settings
from ..errors import ConfigError, EmptyInputError, InputError
from ..progress import Progress
from ..store.spec import ComponentSpec, PipelineSpec
from ..store.store import RAW_VIEW, Store
from .base import ADD_BATCH
from .fallbacks import has_fallbacks, summarize
from .indexer import (Indexer, Report, describe, recorded_chunker,  # noqa: F401 (re-exported)
                      recorded_component, store_template)
from .sources import READS, content_hash, embedder_info, expand_paths, jsonable, to_document

if TYPE_CHECKING:  # annotations only
    from ..store.delta import Delta
    from ..store.writer import StoreWriter
    from .indexer import Embedding

#: Ways to run the per-document work of :meth:`IndexWriter.add`: in this process, or on Ray workers.
ENGINES = ("local", "ray")


def check_share(x: Any) -> None:
    """``llm_max_failed`` must be None or a share in [0, 1]."""
    if x is not None and (isinstance(x, bool) or not isinstance(x, (int, float)) or not 0 <= x <= 1):
        raise ConfigError(f"llm_max_failed must be a share between 0 and 1, not {x!r}")


def check_engine(engine: str) -> None:
    """``engine`` must be one of :data:`ENGINES`."""
    if engine not in ENGINES:
        raise ConfigError(f"engine must be one of {', '.join(ENGINES)}, not {engine!r}")


class Commits:
    """When :meth:`IndexWriter.add` (with ``commit=True``) saves a generation: every
    :attr:`IndexWriter.commit_docs` documents or :attr:`IndexWriter.commit_seconds` seconds, and at the end."""

    def __init__(self, writer: IndexWriter, enabled: bool):
        self.writer = writer
        self.enabled = bool(enabled) and writer.store.path is not None
        self._done, self._since, self._t = 0, 0, time.monotonic()

    def added(self, total: int, now: bool = False) -> None:
        """``total`` documents are in the store so far: commit when enough time or documents have passed
        (``now``: commit anyway, e.g. after adopting a part a Ray worker wrote: a segment holds one)."""
        self._since += total - self._done
        self._done = total
        w = self.writer
        if self.enabled and (now or self._since) and (now or self._since >= w.commit_docs
                                                      or time.monotonic() - self._t >= w.commit_seconds):
            w.store.save()
            self._since, self._t = 0, time.monotonic()

    def finish(self) -> None:
        """Commit what is left."""
        if self.enabled and self.writer.store.dirty:
            self.writer.store.save()


def component_spec(kind: str, spec: Any) -> tuple[str, dict, Any]:
    """``(name, params, object or None)`` from a name, a ``(name, params)`` pair or a component object.

    A pair whose options are not all JSON values (e.g. an LLM client object) is
    built here and treated as a component object: the manifest cannot record
    it, so a reopened index asks for it again instead of rebuilding it wrong.
    """
    if isinstance(spec, str):
        return spec, {}, None
    if isinstance(spec, tuple) and len(spec) == 2 and isinstance(spec[0], str) and isinstance(spec[1], dict):
        name, prm = spec[0], dict(spec[1])
        if jsonable(prm) != prm:
            return name, {}, registry.create(kind, name, **prm)
        return name, prm, None
    method = "enrich" if kind == "enricher" else "relate"
    if callable(getattr(spec, method, None)):
        return str(getattr(spec, "name", type(spec).__name__)), {}, spec
    raise ConfigError(f"an {kind} is a registered name, a (name, options) pair or an object with .{method}(index, "
                      f"doc_ids); got {spec!r}")


def create_store(path: Any, chunker_info: dict, embedder: Any, *, enrich: Sequence[Any], relate: Sequence[Any],
                 bm25: dict | None, vector_dtype: str, overwrite: bool, engine: str,
                 headers: bool = True) -> tuple[StoreWriter, PipelineSpec, dict]:
    """The new store of :meth:`momoka.Index.build` with its raw views, the pipeline spec to fill it with and the
    component objects given (name -> object). Every option is checked before a store directory is made.
    ``headers``: the raw views index each chunk with its header (:data:`~momoka.chunking.headers.HEADED_TEXT`)."""
    if engine == "ray":
        from .distributed import require_ray  # start-up: momoka.methods.distributed

        require_ray()
    if vector_dtype not in ("float32", "float16"):
        raise ConfigError(f"vector_dtype must be 'float32' or 'float16', not {vector_dtype!r}")
    specs = {"enrich": [component_spec("enricher", e) for e in enrich],
             "relate": [component_spec("relator", r) for r in relate]}
    for key, kind in (("enrich", "enricher"), ("relate", "relator")):
        for name, _, obj in specs[key]:
            if obj is None:
                registry.entry(kind, name)  # an unknown name fails here
    from ..chunking.headers import HEADED_TEXT  # start-up: momoka.chunking

    source = {"text": HEADED_TEXT if headers else "chunk", "by": "index"}
    st = Store.create(path, chunker=chunker_info, overwrite=overwrite)
    try:
        if embedder is not None:
            st.add_vector_view(RAW_VIEW, embedder=embedder_info(embedder), dtype=vector_dtype, source=dict(source))
        st.add_bm25_view(RAW_VIEW, params=bm25, source=dict(source))
    except BaseException:
        st.close()
        raise
    spec = PipelineSpec(chunker=chunker_info,
                        **{key: [ComponentSpec(name, jsonable(prm), obj is not None) for name, prm, obj in specs[key]]
                           for key in specs})
    return st, spec, {name: obj for key in specs for name, _, obj in specs[key] if obj is not None}


class IndexWriter:
    """The write side of an index: the pipeline's components run over documents, committed into a store.

    ``IndexWriter(spec, store_writer, embedding)``: ``spec`` is the pipeline the writer fills the store
    with (it becomes the store's :attr:`~momoka.store.store.Store.pipeline`, which the store writer alone
    commits), ``store_writer`` the :class:`~momoka.store.writer.StoreWriter` (the lock), ``embedding``
    the :class:`~momoka.methods.indexer.Embedding` service. ``chunker`` and ``components`` (name ->
    object): objects given instead of rebuilding them from the spec (the dict is shared: objects
    given to :meth:`extend` join it). :attr:`momoka.Index.writer` gives the index's own.
    """

    def __init__(self, spec: PipelineSpec, store_writer: StoreWriter, embedding: Embedding, *,
                 chunker: Any = None, components: dict[str, Any] | None = None, progress: bool | None = None):
        if store_writer.pipeline is not spec:
            store_writer.pipeline = spec
        self._store = store_writer
        self._embedding = embedding
        self._chunker = chunker
        self._components: dict[str, Any] = {} if components is None else components
        #: Whether long work shows progress (None: the default, see :class:`momoka.progress.Progress`).
        self.progress = progress
        #: :meth:`add` with ``commit=True`` saves a generation after this many documents ...
        self.commit_docs: int = settings.get_int("MOMOKA_COMMIT_DOCS")
        #: ... or after this many seconds, whichever comes first.
        self.commit_seconds: float = settings.get_float("MOMOKA_COMMIT_SECONDS")
        #: The share of unusable answers above which an LLM stage stops (None: ``$MOMOKA_LLM_MAX_FAILED``,
        #: else 0.25); see :mod:`momoka.methods.fallbacks`.
        self.llm_max_failed: float | None = None
        #: What the last :meth:`add` did.
        self.report = Report()
        #: Called after :meth:`optimize` changed the store's segments (the index's read side forgets what it
        #: built over them); None: nothing to tell.
        self.changed: Callable[[], None] | None = None

    # ------------------------------------------------------------------ parts

    @property
    def store(self) -> StoreWriter:
        """The :class:`~momoka.store.writer.StoreWriter` written."""
        return self._store

    @property
    def spec(self) -> PipelineSpec:
        """The pipeline spec (the store's :attr:`~momoka.store.store.Store.pipeline`)."""
        return self._store.pipeline

    @property
    def embedding(self) -> Embedding:
        """The :class:`~momoka.methods.indexer.Embedding` service."""
        return self._embedding

    @property
    def chunker(self):
        """The chunker documents are cut with (rebuilt from the manifest when needed)."""
        if self._chunker is None:
            self._chunker = recorded_chunker(self._store, self._embedding)
        return self._chunker

    def component(self, kind: str, name: str) -> Any:
        """The enricher (``kind="enrich"``) or relator (``"relate"``) ``name`` of the pipeline."""
        if name not in self._components:
            self._components[name] = recorded_component(self.spec, kind, name)
        return self._components[name]

    def indexer(self) -> Indexer:
        """The :class:`~momoka.methods.indexer.Indexer` of the pipeline (its chunker, enrichers, relators and
        the embedding service)."""
        p = self.spec
        return Indexer(store_template(self._store), self.chunker, [self.component("enrich", c.name) for c in p.enrich],
                       [self.component("relate", c.name) for c in p.relate], self._embedding, self.progress)

    def prepare(self) -> None:
        """Create every artifact the pipeline's components declare, before any document."""
        self.indexer().prepare(self._store)

    def record_settings(self, kind: str, name: str, settings: dict) -> None:
        """Record what enricher/relator ``name`` reports (its ``describe()``) in the pipeline spec."""
        self.spec.record_settings(kind, name, settings)

    def apply(self, out: dict, replace: Collection[str] = ()) -> list[str]:
        """Write one batch's output (``{"delta", "settings"}``) into the store; returns the doc ids added.

        :meth:`StoreWriter.apply <momoka.store.writer.StoreWriter.apply>` renumbers the batch's chunk and
        node ids to follow the store's (the store is then the same whichever process indexed the batch, ids
        included); artifacts the store lacks are created as the batch's scratch store had them. The
        components' settings are recorded in the pipeline spec. ``replace``: ids of stored documents
        being indexed again; those of this batch are deleted as it is applied (the delta's ``deletes``), so
        a commit never holds the deletion of a document without its new version.
        """
        delta: Delta = out["delta"]
        store = self._store
        if replace:
            delta.deletes = [d for d in delta.doc_ids if d in replace and d in store.documents]
        added = store.apply(delta)
        for kind, name, recorded in out["settings"]:
            self.record_settings(kind, name, recorded)
        store.mark_dirty()
        return added

    def optimize(self) -> bool:
        """Merge the store's segments into one (saving unsaved changes first); True when something was merged.

        Each commit adds a segment and the merge policy merges the newest ones as
        they pile up (:mod:`momoka.store.segments`); this merges them all: the data
        of deleted chunks leaves the store and each dense view has one HNSW graph.
        """
        self._store.ensure_writable()
        try:
            return self._store.merge(everything=True)
        finally:
            if self.changed is not None:
                self.changed()

    # ------------------------------------------------------------------ add

    def collect(self, sources: Any, *, existing: str, on_error: str, encoding: str | None,
                follow_links: bool = False) -> tuple[list, dict]:
        """The documents of ``sources`` to index and their content hashes; starts a new :attr:`report`.

        Documents already in the index are sorted as :meth:`momoka.Index.add` says (``existing``); those
        to index again (``report.replaced``, ``report.redone``) stay in the store until :meth:`add`
        applies their new versions.
        """
        if existing not in ("error", "skip", "replace"):
            raise ConfigError(f"existing must be 'error', 'skip' or 'replace', not {existing!r}")
        if on_error not in ("raise", "skip"):
            raise ConfigError(f"on_error must be 'raise' or 'skip', not {on_error!r}")
        if not isinstance(sources, (str, os.PathLike, Iterable)):
            raise InputError(f"cannot index a {type(sources).__name__}: give paths, Documents or dicts with text "
                             "(to add documents to an index, call its add())")
        skipped: list[tuple[str, str]] = []
        unsupported: list = []
        items = expand_paths([sources] if isinstance(sources, (str, os.PathLike)) else list(sources), unsupported,
                             strict=on_error == "raise", follow_links=follow_links)
        skipped.extend((str(p), why) for p, why in unsupported)
        if not items:
            raise EmptyInputError("no documents to add")
        self.report = report = Report(skipped=skipped)
        docs, hashes = [], {}
        seen: set[str] = set()
        with Progress("reading", total=len(items), unit="files", enabled=self.progress) as pr:
            for it in items:
                pr.update(0, file=_shown_name(it))
                d = _read_one(it, encoding, on_error, skipped)
                pr.update(1)
                if d is None:
                    continue
                if self._admit(d, it, seen, existing, on_error, report):
                    docs.append(d)
                    hashes[d.doc_id] = content_hash(d)
        return docs, hashes

    def _admit(self, d: Any, it: Any, seen: set, existing: str, on_error: str, report: Report) -> bool:
        """Whether document ``d`` (read from ``it``) is to be indexed: not given twice, and new to the store, or
        changed and replaced, or redone; fills ``report`` with what it decided otherwise."""
        skipped = report.skipped
        if d.doc_id in seen:
            if on_error == "raise":
                raise InputError(f"document {d.doc_id!r} is given twice")
            skipped.append((str(it), f"document id {d.doc_id!r} is given twice"))
            return False
        seen.add(d.doc_id)
        old = self._store.documents.get(d.doc_id)
        if old is None:
            return True
        if existing == "error":
            raise InputError(f"document {d.doc_id!r} is already in the index; delete it first to replace it "
                             "(momoka index skips identical documents and re-indexes changed ones with --replace)")
        h = content_hash(d)
        if old.sha256 is None or old.sha256 == h:
            if not has_fallbacks(old.metadata):
                report.unchanged.append(d.doc_id)
                return False
            report.redone.append(d.doc_id)
        elif existing == "skip":
            skipped.append((str(it), f"document {d.doc_id!r} changed since it was indexed (--replace "
                                      "re-indexes it)"))
            return False
        else:
            report.replaced.append(d.doc_id)
        return True

    def add(self, docs: list, hashes: dict, *, on_error: str, commit: bool, engine: str,
            workers: int | None = None, address: str | None = None) -> None:
        """Index ``docs`` (from :meth:`collect`) batch by batch (see :meth:`momoka.Index.add`); fills :attr:`report`.

        A document indexed again (replaced or redone) is deleted in the batch that adds its new version
        (:meth:`apply`), so every commit, and every reader, holds it in its old
        or its new version, whatever fails or is killed in between; one whose new version is not added (a
        failure, or skipped) keeps its old version and leaves ``replaced``/``redone``.
        """
        report = self.report
        skipped = report.skipped
        embedding = self._embedding
        embedding.report, embedding.progress = report, self.progress
        embedding.cache.clear()
        again = set(report.replaced + report.redone)
        if again and engine == "local":
            embedding.keep(self._store, sorted(again))
        commits = Commits(self, commit)
        # the fallback tallies of this process's stages (Ray workers keep their own: records only)
        stages = [] if engine == "ray" or not docs else self._llm_stages(
            self.chunker, *(self.component(k, c.name) for k in ("enrich", "relate") for c in self.spec.components(k)))
        try:
            if engine == "ray":
                from .distributed import add_with_ray  # start-up: momoka.methods.distributed

                add_with_ray(self, docs, hashes, on_error=on_error, commits=commits, workers=workers,
                             address=address, replace=again)
            else:
                indexer = self.indexer()
                step = max(1, min(ADD_BATCH, self.commit_docs)) if commits.enabled else max(len(docs), 1)
                with Progress("indexing", total=len(docs), unit="docs", enabled=self.progress) as pr:
                    for i in range(0, len(docs), step):
                        batch = docs[i : i + step]
                        delta = indexer.run(batch, hashes, on_error, skipped)
                        report.added.extend(self.apply({"delta": delta, "settings": indexer.settings()},
                                                       replace=again))
                        indexer.template = store_template(self._store)  # with any artifact the batch created
                        pr.update(len(batch))
                        commits.added(len(report.added))
            self._fallbacks_done(stages)
            commits.finish()
        finally:
            embedding.cache.clear()
            if again:  # those whose new version was not added are still there in their old one
                added = set(report.added)
                report.replaced = [d for d in report.replaced if d in added]
                report.redone = [d for d in report.redone if d in added]
        if skipped and on_error == "raise":  # only unsupported files can be skipped here
            warnings.warn(f"skipped {len(skipped)} file(s) that are not documents, e.g. {skipped[0][0]} ({READS}; "
                          "the index report's 'skipped' names each with its reason)", UserWarning, stacklevel=3)

    # ------------------------------------------------------------------ extend

    def extend(self, enrich: Sequence[Any], relate: Sequence[Any], commit: bool) -> None:
        """Run added enrichers/relators over every stored document (see :meth:`momoka.Index.extend`).

        The documents go in batches (all at once without ``commit``) through
        :meth:`Indexer.run_stored <momoka.methods.indexer.Indexer.run_stored>`, each batch's
        :class:`~momoka.store.delta.Delta` applied by the store: a batch that fails leaves the store
        as the last applied batch left it, and an extend that fails before its first batch is applied
        leaves the index as it was (its pipeline included). Component objects given join :attr:`component`'s.
        """
        store = self._store
        store.ensure_writable()
        commit = commit and store.path is not None
        spec = store.pipeline
        objects = self._components
        pipeline, components = copy.deepcopy(spec), dict(objects)
        self._embedding.progress = self.progress
        applied = False
        try:
            runs = []
            for key, kind, given in (("enrich", "enricher", enrich), ("relate", "relator", relate)):
                for one in given:
                    name, prm, obj = component_spec(kind, one)
                    entry = spec.entry(key, name)
                    if entry is not None and not entry.pending:
                        raise ConfigError(f"the index already has {kind} {name!r}")
                    if entry is None:
                        entry = ComponentSpec(name, jsonable(prm), obj is not None, pending=list(store.documents))
                        spec.components(key).append(entry)
                    if obj is not None:
                        objects[name] = obj
                    runs.append((key, self.component(key, name), entry))
            stages = self._llm_stages(*(comp for _, comp, _ in runs))
            todo = {id(comp): set(entry.pending) for _, comp, entry in runs}
            docs = [d for d in store.documents if any(d in t for t in todo.values())]
            indexer = Indexer(store_template(store), None, [c for k, c, _ in runs if k == "enrich"],
                              [c for k, c, _ in runs if k == "relate"], self._embedding, self.progress)
            step = max(1, self.commit_docs) if commit else max(len(docs), 1)
            for i in range(0, max(len(docs), 1), step):  # once at least: the declared artifacts are made
                part = docs[i : i + step]
                indexer.template = store_template(store)  # with any artifact the last batch created
                self.apply({"delta": indexer.run_stored(store, part, todo), "settings": indexer.settings()})
                applied = True
                done = set(part)
                for _, _, entry in runs:
                    entry.pending = [d for d in entry.pending if d not in done and d in store.documents]
                if commit:
                    store.save()
        except BaseException:
            if not applied:  # nothing of this extend is in the store: neither is it in the pipeline
                store.pipeline = pipeline
                objects.clear()
                objects.update(components)
            raise
        for key, comp, entry in runs:
            entry.pending = None
            s = describe(comp)
            if s is not None:
                self.record_settings(key, getattr(comp, "name", type(comp).__name__), s)
        self._fallbacks_done(stages)
        store.mark_dirty()
        if commit:
            store.save()  # the pipeline without documents left to do

    # ------------------------------------------------------------------ LLM fallbacks

    def _llm_stages(self, *components: Any) -> list:
        """The fallback tallies of these components (those that have one), reset for a new run."""
        stages = [t for t in (getattr(c, "fallbacks", None) for c in components) if t is not None]
        for t in stages:
            t.reset(self.llm_max_failed)
        return stages

    def _fallbacks_done(self, stages: list) -> None:
        """After a run: one warning per LLM stage that had unusable answers; the spec's per-stage sums."""
        for t in stages:
            msg = t.warning()
            if msg:
                warnings.warn(msg, UserWarning, stacklevel=4)
        sums = summarize(self._store.documents.values())
        self.spec.fallbacks = sums or None


def _shown_name(item: Any) -> str:
    """What the progress line names: a file as its id's folder and its file name (``notes/light.txt``), a
    Document by its id, other items as ``-``."""
    path = getattr(item, "path", None)
    if path is not None and getattr(item, "doc_id", None):
        return posixpath.join(posixpath.dirname(item.doc_id), os.path.basename(os.fspath(path)))
    if isinstance(item, (str, os.PathLike)):
        return os.path.basename(os.fspath(item)) or os.fspath(item)
    return str(getattr(item, "doc_id", None) or "-")


def _read_one(it: Any, encoding: Any, on_error: str, skipped: list) -> Any:
    """``it`` as a Document, or None (skipped, with its reason) when it cannot be read and ``on_error`` skips."""
    try:
        return to_document(it, encoding=encoding)
    except InputError as exc:
        if on_error == "raise":
            raise
        skipped.append((str(it), str(exc)))
        return None
