"""The :class:`Indexer`: one batch of documents in, its :class:`~momoka.store.delta.Delta` out.

A batch runs, per document: the chunker; the raw views (the embedder's vectors of the chunk
texts as vector view ``"raw"``, and BM25 view ``"raw"``); then each enricher and each relator,
given a :class:`~momoka.methods.context.Batch`. All of it is written into a scratch in-memory
store shaped like the index's (:func:`store_template`, :func:`scratch_store`), never into the
index's store: the scratch store's contents are the batch's Delta, which
:meth:`Store.apply <momoka.store.store.Store.apply>` then adds to the index's store
(:func:`apply_batch`), renumbering its ids. The single-process path and the Ray workers
(:mod:`momoka.methods.distributed`) run the very same :meth:`Indexer.run`; the store is only
written by ``Store.apply``. A batch that fails (an LLM stage over its share of unusable answers,
a document without chunks) leaves the index's store as it was.

Texts are embedded by an :class:`Embedding` service: the embedder of each view, the embedding
cache of a document being replaced, the counts of texts embedded and reused, and truncation.
"""

from __future__ import annotations

import copy
import re
import warnings
from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..chunking.context import context_headers, headed, indexed_text
from ..errors import InputError, MomokaError, StoreError
from ..store.delta import Delta
from ..progress import Progress
from ..text.model import Chunk, with_tails
from ..store.store import RAW_VIEW, Store, check_embedder
from .context import Batch
from .fallbacks import set_record
from .sources import embedder_info, jsonable, load_embedder

if TYPE_CHECKING:  # (annotations only: the Index imports this module)
    from .pipeline import Index

#: Texts embedded per embedder call while indexing.
EMBED_BATCH = 256


class Embedding:
    """The embedding service of an index's views: each view's embedder, the cache, the counts, truncation.

    :meth:`resolve` gives the embedder of a view from the view's recorded embedder
    (``{"model_id", "checksum", "dim"}``): the index's own (:attr:`own`) when it is that model
    (checked), else loaded by model id once. ``report()`` gives the dict whose ``"embedded"`` and
    ``"reused"`` counts each call adds to.
    """

    def __init__(self, store: Any, embedder: Any, report: Callable[[], dict], progress: Callable[[], Any]):
        self.store = store
        #: The embedder given to the index, or the one loaded for its views (None until one is).
        self.own = embedder
        self._report = report
        self._progress = progress
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
        report = self._report()
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
                    report["reused"] = report.get("reused", 0) + 1
                elif t not in first:
                    first[t] = i
                    todo.append(i)
        n_trunc = 0
        self.last_truncated = 0
        with Progress(label, total=len(todo), unit="texts", enabled=self._progress()) as pr:
            for s in range(0, len(todo), EMBED_BATCH):
                part = todo[s : s + EMBED_BATCH]
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    got = np.asarray(emb.embed([texts[i] for i in part]), dtype=np.float32)
                for w in caught:
                    if type(w.message).__name__ == "TruncationWarning":
                        m = re.match(r"(\d+) of", str(w.message))
                        n_trunc += int(m.group(1)) if m else 1
                    else:
                        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
                for i, v in zip(part, got):
                    vecs[i] = v
                pr.update(len(part))
        report["embedded"] = report.get("embedded", 0) + len(todo)
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
    """What a scratch store needs to look like ``store``: chunker, HNSW settings, pipeline and every artifact."""
    m = store.manifest
    arts = store._artifacts
    vectors = {n: {"embedder": v.embedder, "dtype": v.dtype, "source": dict(v.source)}
               for n, v in arts["vectors"].items()}
    bm25 = {n: {"params": dict(v.params), "source": dict(v.source)} for n, v in arts["bm25"].items()}
    relations = {n: {"ordered": r.ordered, "weighted": r.weighted, "target_table": r.target_table,
                     "source": dict(r.source)} for n, r in arts["relation"].items()}
    nodes = {n: {"source": dict(t.source), "id_fields": dict(t.id_fields), "doc_fields": copy.deepcopy(t.doc_fields)}
             for n, t in arts["nodes"].items()}
    return {"chunker": m.get("chunker"), "hnsw": m.get("hnsw"), "pipeline": store.pipeline.to_dict(),
            "vectors": vectors, "bm25": bm25, "relations": relations, "nodes": nodes}


def scratch_store(template: dict):
    """A new in-memory :class:`~momoka.store.store.Store` shaped as ``template`` says (:func:`store_template`)."""
    st = Store.create(None, chunker=template["chunker"], hnsw=template["hnsw"])
    for name, e in template["vectors"].items():
        st.add_vector_view(name, embedder=e["embedder"], dtype=e["dtype"], source=e["source"])
    for name, e in template["bm25"].items():
        st.add_bm25_view(name, params=e["params"], source=e["source"])
    for name, e in template["relations"].items():
        st.add_relation(name, ordered=e["ordered"], weighted=e["weighted"], target_table=e["target_table"],
                        source=e["source"])
    for name, e in template["nodes"].items():
        st.add_node_table(name, source=e["source"], id_fields=e["id_fields"], doc_fields=e["doc_fields"])
    return st


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
    store gains artifacts). Build one over an index with :meth:`of`.
    """

    def __init__(self, template: dict, chunker: Any, enrichers: Sequence[Any], relators: Sequence[Any],
                 embedding: Embedding, progress: bool | None = None):
        self.template = template
        self.chunker = chunker
        self.enrichers = list(enrichers)
        self.relators = list(relators)
        self.embedding = embedding
        self.progress = progress

    @classmethod
    def of(cls, index: Index) -> Indexer:
        """The indexer of ``index``'s pipeline (its chunker, enrichers, relators and embedding service)."""
        p = index.pipeline
        return cls(store_template(index.store), index.chunker, [index.component("enrich", c["name"]) for c in p["enrich"]],
                   [index.component("relate", c["name"]) for c in p["relate"]], index.embedding, index.progress)

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


def apply_batch(index: Index, out: dict, replace: Collection[str] = ()) -> list[str]:
    """Write one batch's output (``{"delta", "settings"}``) into ``index``'s store; returns the doc ids added.

    :meth:`Store.apply <momoka.store.store.Store.apply>` renumbers the batch's chunk and node ids to
    follow the store's (the store is then the same whichever process indexed the batch, ids
    included); artifacts the store lacks are created as the batch's scratch store had them. The
    components' settings are recorded in the manifest's pipeline. ``replace``: ids of stored documents
    being indexed again; those of this batch are deleted as it is applied (the delta's ``deletes``), so
    a commit never holds the deletion of a document without its new version.
    """
    delta = out["delta"]
    if replace:
        delta.deletes = [d for d in delta.doc_ids if d in replace and d in index.store.documents]
    added = index.store.apply(delta)
    for kind, name, recorded in out["settings"]:
        index.record_settings(kind, name, recorded)
    index.store.mark_dirty()
    return added
