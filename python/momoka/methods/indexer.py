"""The :class:`Indexer`: one batch of documents in, its :class:`~momoka.store.delta.Delta` out.

A batch runs, per document: the chunker; the raw views (the embedder's vectors of the chunk
texts as vector view ``"raw"``, and BM25 view ``"raw"``); then each enricher and each relator,
given a :class:`~momoka.methods.corpus.Batch`. All of it is written into a scratch in-memory
store shaped like the index's (:func:`store_template`, :func:`scratch_store`), never into the
index's store: the scratch store's contents are the batch's Delta, which
:meth:`StoreWriter.apply <momoka.store.writer.StoreWriter.apply>` then adds to the index's store
(:meth:`IndexWriter.apply <momoka.methods.index_writer.IndexWriter.apply>`), renumbering its ids. The single-process path and the Ray workers
(:mod:`momoka.methods.distributed`) run the very same :meth:`Indexer.run`; the store is only
written by ``Store.apply``. A batch that fails (an LLM stage over its share of unusable answers,
a document without chunks) leaves the index's store as it was.

Texts are embedded by an :class:`Embedding` service: the embedder of each view, the embedding
cache of a document being replaced, the counts of texts embedded and reused, and truncation.
"""

from __future__ import annotations

import copy
import dataclasses
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import registry
from ..chunking.headers import context_headers, headed, indexed_text
from ..errors import ConfigError, InputError, MomokaError, StoreError
from ..progress import Progress
from ..store._kinds import ARTIFACT_KINDS
from ..store.delta import Delta
from ..store.spec import PipelineSpec
from ..store.store import RAW_VIEW, Store, check_embedder
from ..text.model import Chunk, with_tails
from .base import DEFAULT_CHUNKER
from .corpus import Batch
from .fallbacks import set_record
from .sources import embedder_info, jsonable, load_embedder, resolve_chunker

#: Texts embedded per embedder call while indexing.
EMBED_BATCH = 256
#: The size stores record-less of their chunker were built with (the default before it was 100).
LEGACY_CHUNK_SIZE = 200


@dataclass
class Report:
    """What the last :meth:`momoka.Index.add` did (:attr:`momoka.Index.report`).

    ``added``: the doc ids added; ``unchanged``: given again, identical, not indexed; ``replaced``: changed and
    indexed again; ``redone``: identical but indexed again because some LLM outputs were fallbacks;
    ``skipped``: ``(source, reason)`` of what was not indexed; ``embedded``: texts embedded; ``reused``: vectors
    taken over from the replaced documents instead; with ``engine="ray"``, ``failed`` (doc ids whose batch
    failed after every retry) and ``timing`` (the writer's seconds applying outputs, ``apply_s``, and
    committing, ``commit_s``; the workers' seconds, ``worker_s``).
    """

    added: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    replaced: list[str] = field(default_factory=list)
    redone: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    embedded: int = 0
    reused: int = 0
    failed: list[str] = field(default_factory=list)
    timing: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict:
        """The report as JSON values (the skipped pairs as lists)."""
        out = dataclasses.asdict(self)
        out["skipped"] = [list(x) for x in self.skipped]
        return out


class Embedding:
    """The embedding service of an index's views: each view's embedder, the cache, the counts, truncation.

    :meth:`resolve` gives the embedder of a view from the view's recorded embedder
    (``{"model_id", "checksum", "dim"}``): the index's own (:attr:`own`) when it is that model
    (checked), else loaded by model id once. :attr:`report` (the index writer's :class:`Report` while it
    runs, else None) counts the texts each call embeds and the vectors it reuses (``embedded``, ``reused``).
    """

    def __init__(self, store: Any, embedder: Any, *, progress: bool | None = None):
        self.store = store
        #: The embedder given to the index, or the one loaded for its views (None until one is).
        self.own = embedder
        #: What counts the texts embedded and the vectors reused (anything with ``embedded`` and ``reused``).
        self.report: Any = None
        #: Whether embedding shows progress (None: the default, see :class:`momoka.progress.Progress`).
        self.progress = progress
        #: embedder checksum -> {text: vector}: the vectors of documents being replaced (see :meth:`keep`)
        self.cache: dict[str, dict[str, np.ndarray]] = {}
        #: Texts the last :meth:`embed` embedded truncated (over the embedder's input limit).
        self.last_truncated = 0

    def resolve(self, info: dict, view: str) -> Any:
        """The embedder recorded as ``info`` for view ``view``: :attr:`own` (checked), else loaded by model id."""
        emb, where = self.own, self.store.path or ""
        if emb is not None and embedder_info(emb)["model_id"] == info["model_id"]:
            check_embedder(info, embedder_info(emb), where)
            return emb
        if emb is None:
            try:
                emb = load_embedder(info["model_id"])
            except MomokaError:
                raise
            except Exception as exc:
                raise StoreError(f"cannot load the store's embedder {info['model_id']}: {exc}") from exc
            check_embedder(info, embedder_info(emb), where)
            self.own = emb
            return emb
        raise StoreError(f"view {view!r} was embedded with {info['model_id']}, not {embedder_info(emb)['model_id']}")

    def for_view(self, view: str = RAW_VIEW) -> Any:
        """The embedder of vector view ``view`` (loaded and checked on first use)."""
        return self.resolve(self.store.vector_view(view).info["embedder"], view)

    def embed_queries(self, queries: Sequence[str], view: str = RAW_VIEW) -> np.ndarray:
        """Query vectors for vector view ``view`` (the embedder's query form when it has one)."""
        emb = self.for_view(view)
        fn = getattr(emb, "embed_query", None)
        return np.asarray(fn(list(queries)) if callable(fn) else emb.embed(list(queries)), dtype=np.float32)

    def embed(self, texts: Sequence[str], info: dict, *, view: str = RAW_VIEW, label: str = "embedding") -> np.ndarray:
        """Embed ``texts`` with the embedder ``info`` names (that of view ``view``), in slices, with progress.

        When the embedder's vectors depend on their text alone (``batch_independent``), a text
        given twice is embedded once, and a text held in the cache (:meth:`keep`) is not embedded
        again. Texts over the embedder's input limit are embedded truncated; their number is
        :attr:`last_truncated` and reported in one warning.
        """
        emb = self.resolve(info, view)
        report = self.report
        texts = list(texts)
        vecs: list[Any] = [None] * len(texts)
        todo = list(range(len(texts)))
        if getattr(emb, "batch_independent", False):
            cache = self.cache.get(embedder_info(emb)["checksum"], {})
            first: dict[str, int] = {}
            todo = []
            for i, t in enumerate(texts):
                if t in cache:
                    vecs[i] = cache[t]
                    if report is not None:
                        report.reused += 1
                elif t not in first:
                    first[t] = i
                    todo.append(i)
        n_trunc = 0
        self.last_truncated = 0
        with Progress(label, total=len(todo), unit="texts", enabled=self.progress) as pr:
            for s in range(0, len(todo), EMBED_BATCH):
                part = todo[s : s + EMBED_BATCH]
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    got = np.asarray(emb.embed([texts[i] for i in part]), dtype=np.float32)
                # the embedder's own count of the call's truncated texts (``last_truncated``); its per-call
                # warning gives way to the one warning below (an embedder that does not count: one per warning)
                counted = getattr(emb, "last_truncated", None)
                warned = 0
                for w in caught:
                    if type(w.message).__name__ == "TruncationWarning":
                        warned += 1
                    else:
                        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
                n_trunc += int(counted) if isinstance(counted, int) and not isinstance(counted, bool) else warned
                for i, v in zip(part, got):
                    vecs[i] = v
                pr.update(len(part))
        if report is not None:
            report.embedded += len(todo)
        self.last_truncated = n_trunc
        if n_trunc:
            warnings.warn(f"{n_trunc} of {len(texts)} texts of view {view!r} are longer than the embedder's input "
                          "limit and were embedded truncated (BM25 indexes them whole); a smaller chunk size avoids this",
                          UserWarning, stacklevel=3)
        if not texts:
            return np.zeros((0, int(embedder_info(emb)["dim"])), np.float32)
        if len(todo) < len(texts):  # duplicates take the vector of their first occurrence
            for i, t in enumerate(texts):
                if vecs[i] is None:
                    vecs[i] = vecs[first[t]]
        return np.stack(vecs).astype(np.float32, copy=False)

    def keep(self, store: Any, doc_ids: Sequence[str]) -> None:
        """Put the raw vectors of ``doc_ids``'s chunks in the cache (before they are replaced).

        Only for an embedder whose vectors depend on their text alone: then a chunk text the
        new version of a document still has gets the very vector a fresh embedding would give.
        """
        if not store.has_vector_view(RAW_VIEW):
            return
        view = store.vector_view(RAW_VIEW)
        info = view.info["embedder"]
        if not getattr(self.resolve(info, RAW_VIEW), "batch_independent", False):
            return
        cache = self.cache.setdefault(info["checksum"], {})
        with_headers = headed(view.source)
        for d in doc_ids:
            ids = np.asarray(store.documents[d].chunk_ids, dtype=np.int64)
            ids = ids[view.has(ids)]
            for c, v in zip(ids.tolist(), view.get(ids) if len(ids) else ()):
                cache[indexed_text(store.chunks.get(c), with_headers)] = v


# ---------------------------------------------------------------------------------- the scratch store


def store_template(store: Any) -> dict:
    """What a scratch store needs to look like ``store``: chunker, HNSW settings, pipeline and the spec of every
    artifact (by kind, as :data:`~momoka.store._kinds.ARTIFACT_KINDS` declares it: the Delta's keys)."""
    m = store.manifest
    out = {"chunker": m.get("chunker"), "hnsw": m.get("hnsw"), "pipeline": store.pipeline.to_dict()}
    for kind in ARTIFACT_KINDS:
        out[kind.delta] = {n: kind.spec(a) for n, a in store.artifacts(kind.key).items()}
    return out


def scratch_store(template: dict):
    """A new in-memory :class:`~momoka.store.store.Store` shaped as ``template`` says (:func:`store_template`)."""
    st = Store.create(None, chunker=template["chunker"], hnsw=template["hnsw"])
    for kind in ARTIFACT_KINDS:
        for name, spec in template[kind.delta].items():
            kind.create(st, name, spec)
    return st


# ---------------------------------------------------------------------------------- the pipeline's parts


def recorded_component(spec: PipelineSpec, kind: str, name: str) -> Any:
    """Enricher (``kind="enrich"``) or relator (``"relate"``) ``name`` rebuilt from the registry with the
    options ``spec`` (a store's pipeline) records, and what its entry's ``reopen`` hook takes from the recorded
    settings; :class:`ConfigError` when it has no such component or it was
    an object the manifest cannot rebuild."""
    entry = spec.entry(kind, name) if kind in ("enrich", "relate") else None
    if entry is None:
        raise ConfigError(f"the pipeline has no {kind} component {name!r}")
    if entry.object:
        raise ConfigError(f"this store was built with a custom component {name!r}; pass it again: "
                          f"Index.open(..., components={{{name!r}: obj}})")
    kind_name = "enricher" if kind == "enrich" else "relator"
    # the entry's reopen hook may pin settings the store recorded (e.g. the defaults it was built with)
    opts = registry.entry(kind_name, name).reopen_options(dict(entry.params or {}), entry.settings)
    return registry.create(kind_name, name, **opts)


def recorded_chunker(store: Any, embedding: Embedding) -> Any:
    """The chunker ``store``'s manifest records, rebuilt (a store with no record gets the default chunker at
    :data:`LEGACY_CHUNK_SIZE`); :class:`ConfigError` for a chunker object the manifest cannot rebuild."""
    info = store.manifest.get("chunker") or {"name": DEFAULT_CHUNKER, "params": {"size": LEGACY_CHUNK_SIZE}}
    if info.get("object"):
        raise ConfigError(f"this store was built with a custom chunker ({info['name']}); pass it again: "
                          "Index.open(..., chunker=...)")
    params = dict(info.get("params") or {})
    emb = None
    if "max_embed_tokens" in params:  # a store built with the embedder's limit counts it with the store's embedder
        emb = embedding.for_view(RAW_VIEW) if store.has_vector_view(RAW_VIEW) else embedding.own
    chunker, _ = resolve_chunker(info["name"], params, emb)
    return chunker


# ---------------------------------------------------------------------------------- the indexer


def chunk_documents(chunker: Any, docs: list, on_error: str = "raise",
                    skipped: list | None = None) -> list[list[Chunk]]:
    """Chunks per document; a document without chunks raises, or gets ``[]`` and a ``skipped`` entry."""
    batch = getattr(chunker, "batch", None)
    chunks = [list(cs) for cs in batch(docs)] if callable(batch) else [list(chunker(d)) for d in docs]
    for d, cs in zip(docs, chunks):
        if not cs:
            if on_error == "raise":
                raise InputError(f"document {d.doc_id!r} produced no chunks")
            if skipped is not None:
                skipped.append((d.source or d.doc_id, "produced no chunks"))
    return chunks


class Indexer:
    """Runs the pipeline on one batch of documents: :meth:`run` gives the batch's :class:`Delta`.

    Holds the chunker, the enrichers and relators, the :class:`Embedding` service and the
    ``template`` of the store the Deltas are for (:func:`store_template`; refresh it when that
    store gains artifacts). :meth:`IndexWriter.indexer <momoka.methods.index_writer.IndexWriter.indexer>`
    builds the one of an index's pipeline.
    """

    def __init__(self, template: dict, chunker: Any, enrichers: Sequence[Any], relators: Sequence[Any],
                 embedding: Embedding, progress: bool | None = None):
        self.template = template
        self.chunker = chunker
        self.enrichers = list(enrichers)
        self.relators = list(relators)
        self.embedding = embedding
        self.progress = progress

    def run(self, docs: list, hashes: dict, on_error: str = "raise", skipped: list | None = None) -> Delta:
        """Chunk, embed, enrich and relate ``docs`` (parsed documents; ``hashes``: doc id -> content hash).

        A document without chunks raises :class:`InputError` (``on_error="raise"``) or is left out
        with an entry in ``skipped``. Returns the :class:`Delta` of the documents kept.
        """
        chunks = chunk_documents(self.chunker, docs, on_error, skipped)
        keep = [i for i, cs in enumerate(chunks) if cs]
        docs, chunks = [docs[i] for i in keep], [with_tails(docs[i].text, chunks[i]) for i in keep]
        store = scratch_store(self.template)
        self.prepare(store)
        if not docs:
            return Delta.of_store(store)
        meta = [{"doc_id": d.doc_id, "title": d.title, "source": d.source, "length": len(d.text),
                 "metadata": {"pages": d.pages.tolist()} if getattr(d, "pages", None) is not None else {},
                 "sha256": hashes.get(d.doc_id)} for d in docs]
        tally = getattr(self.chunker, "fallbacks", None)
        if tally is not None:
            for m in meta:
                set_record(m["metadata"], tally.key, tally.take(m["doc_id"]))
        with_headers = headed(self.template["bm25"][RAW_VIEW]["source"])
        if with_headers:
            for d, cs in zip(docs, chunks):  # the header is kept with the chunk, and indexed with its text
                for c, h in zip(cs, context_headers(d, cs)):
                    if h:
                        c.metadata["header"] = h
        texts = [indexed_text(c, with_headers) for cs in chunks for c in cs]
        vecs = None
        if store.has_vector_view(RAW_VIEW):
            vecs = self.embedding.embed(texts, store.vector_view(RAW_VIEW).info["embedder"], label="embedding chunks")
        ids_per_doc = store.add_documents(meta, chunks)
        flat_ids = [i for ids in ids_per_doc for i in ids]
        store.bm25_view(RAW_VIEW).add(flat_ids, texts)
        if vecs is not None:
            store.vector_view(RAW_VIEW).add(flat_ids, vecs)
        doc_ids = [d.doc_id for d in docs]
        batch = Batch(store, self.embedding, documents={d.doc_id: d for d in docs}, progress=self.progress)
        for comp in self.enrichers:
            comp.enrich(batch, doc_ids)
        for comp in self.relators:
            comp.relate(batch, doc_ids)
        return Delta.of_store(store)

    def prepare(self, store: Any) -> None:
        """Create in ``store`` every artifact the enrichers and relators declare (their ``prepare(batch)``):
        they are then present, empty, even where a component writes nothing for a batch."""
        batch = Batch(store, self.embedding, progress=self.progress)
        for comp in (*self.enrichers, *self.relators):
            fn = getattr(comp, "prepare", None)
            if callable(fn):
                fn(batch)

    def run_stored(self, store: Any, doc_ids: Sequence[str], todo: dict[int, set] | None = None) -> Delta:
        """Run the enrichers and relators on documents already in ``store`` (:meth:`momoka.Index.extend`).

        The documents, their chunks (with metadata) and their rows of every vector view are copied
        into a scratch store shaped like ``store`` (:attr:`template`), the components run there
        (``todo``: ``id(component)`` -> the doc ids it runs on, default all of ``doc_ids``), and
        what they changed comes back as a :class:`Delta` over the stored chunk ids
        (:meth:`Delta.changes_since`): ``store`` itself is not written.
        """
        scratch = scratch_store(self.template)
        self.prepare(scratch)
        entries = [store.documents[d] for d in doc_ids]
        ids = [list(e.chunk_ids) for e in entries]
        meta = [{"doc_id": e.doc_id, "title": e.title, "source": e.source, "length": e.length,
                 "metadata": copy.deepcopy(dict(e.metadata)), "sha256": e.sha256} for e in entries]
        local = scratch.add_documents(meta, [[store.chunks.get(c) for c in cs] for cs in ids])
        flat = np.asarray([c for cs in ids for c in cs], np.int64)
        flat_local = np.asarray([c for cs in local for c in cs], np.int64)
        for name in store.vector_views:  # what a component may read: the documents' vectors in every view
            have = store.vector_view(name).has(flat) if len(flat) else np.zeros(0, bool)
            if have.any():
                scratch.vector_view(name).add(flat_local[have], store.vector_view(name).get(flat[have]))
        before = Delta.of_store(scratch)
        batch = Batch(scratch, self.embedding, progress=self.progress)
        for comps, method in ((self.enrichers, "enrich"), (self.relators, "relate")):
            for comp in comps:
                mine = [d for d in doc_ids if todo is None or d in todo[id(comp)]]
                if mine:
                    getattr(comp, method)(batch, mine)
        return Delta.of_store(scratch).changes_since(before, dict(zip(flat_local.tolist(), flat.tolist())))

    def settings(self) -> list[tuple[str, str, dict]]:
        """``(kind, name, settings)`` of every enricher and relator that describes itself (for the manifest)."""
        out = []
        for kind, comps in (("enrich", self.enrichers), ("relate", self.relators)):
            for comp in comps:
                s = describe(comp)
                if s is not None:
                    out.append((kind, component_name(comp), s))
        return out


def component_name(comp: Any) -> str:
    """The name an enricher or relator object is recorded under."""
    return str(getattr(comp, "name", type(comp).__name__))


def describe(comp: Any) -> dict | None:
    """What a component's ``describe()`` reports, as JSON values (None when it has no ``describe``)."""
    fn = getattr(comp, "describe", None)
    return jsonable(fn()) if callable(fn) else None
