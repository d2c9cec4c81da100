"""The indexing engine behind :meth:`momoka.Index.add` and :meth:`momoka.Index.extend`.

:func:`collect` reads the sources into documents and decides, per document already in the
index, whether it is unchanged, replaced or indexed again. :func:`add` cuts the documents into
batches, runs each through the :class:`~momoka.methods.indexer.Indexer` (in this process, or on
Ray workers: :mod:`momoka.methods.distributed`), applies each batch's
:class:`~momoka.store.delta.Delta` to the store (:func:`~momoka.methods.indexer.apply_batch`) and
commits as it goes (:class:`Commits`). :func:`extend` runs added enrichers and relators over the
documents already stored. The fallback tallies of LLM-backed stages are reset before a run and
reported after it (:mod:`momoka.methods.fallbacks`).
"""

from __future__ import annotations

import copy
import os
import posixpath
import time
import warnings
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError, EmptyInputError, InputError
from ..progress import Progress
from .. import registry
from ..store.spec import ComponentSpec, PipelineSpec
from ..store.store import RAW_VIEW, Store
from .base import ADD_BATCH
from .fallbacks import has_fallbacks, summarize
from .indexer import Indexer, apply_batch, describe, store_template
from .sources import READS, content_hash, embedder_info, expand_paths, jsonable, to_document

if TYPE_CHECKING:  # (annotations only: the Index calls this module)
    from .pipeline import Index

#: Ways to run the per-document work of :meth:`Index.add`: in this process, or on Ray workers.
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
    """When :meth:`Index.add` (with ``commit=True``) saves a generation: every
    :attr:`Index.commit_docs` documents or :attr:`Index.commit_seconds` seconds, and at the end."""

    def __init__(self, index: Index, enabled: bool):
        self.index = index
        self.enabled = bool(enabled) and index.store.path is not None
        self._done, self._since, self._t = 0, 0, time.monotonic()

    def added(self, total: int) -> None:
        """``total`` documents are in the store so far: commit when enough time or documents have passed."""
        self._since += total - self._done
        self._done = total
        ix = self.index
        if self.enabled and self._since and (self._since >= ix.commit_docs
                                            or time.monotonic() - self._t >= ix.commit_seconds):
            ix.store.save()
            self._since, self._t = 0, time.monotonic()

    def finish(self) -> None:
        """Commit what is left."""
        if self.enabled and self.index.store.dirty:
            self.index.store.save()


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
                 headers: bool = True) -> tuple[Store, dict]:
    """The new store of :meth:`Index.build`: its raw views and its pipeline recorded; returns it and the
    component objects given (name -> object). Every option is checked before a store directory is made.
    ``headers``: the raw views index each chunk with its header (:data:`~momoka.chunking.context.HEADED_TEXT`)."""
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
    from ..chunking.context import HEADED_TEXT  # start-up: momoka.chunking

    source = {"text": HEADED_TEXT if headers else "chunk", "by": "index"}
    st = Store.create(path, chunker=chunker_info, overwrite=overwrite)
    try:
        if embedder is not None:
            st.add_vector_view(RAW_VIEW, embedder=embedder_info(embedder), dtype=vector_dtype, source=dict(source))
        st.add_bm25_view(RAW_VIEW, params=bm25, source=dict(source))
    except BaseException:
        st.close()
        raise
    st.pipeline = PipelineSpec(chunker=chunker_info,
                               **{key: [ComponentSpec(name, jsonable(prm), obj is not None) for name, prm, obj in specs[key]]
                                  for key in specs})
    return st, {name: obj for key in specs for name, _, obj in specs[key] if obj is not None}


def recorded_component(pipeline: dict, kind: str, name: str) -> Any:
    """Enricher (``kind="enrich"``) or relator (``"relate"``) ``name`` rebuilt from the registry with the
    options ``pipeline`` (a manifest's) records, and what its entry's ``reopen`` hook takes from the recorded
    settings; :class:`ConfigError` when it has no such component or it was
    an object the manifest cannot rebuild."""
    spec = next((c for c in pipeline.get(kind, []) if c["name"] == name), None)
    if spec is None:
        raise ConfigError(f"the pipeline has no {kind} component {name!r}")
    if spec.get("object"):
        raise ConfigError(f"this store was built with a custom component {name!r}; pass it again: "
                          f"Index.open(..., components={{{name!r}: obj}})")
    kind_name = "enricher" if kind == "enrich" else "relator"
    # the entry's reopen hook may pin settings the store recorded (e.g. the defaults it was built with)
    opts = registry.entry(kind_name, name).reopen_options(dict(spec.get("params") or {}), spec.get("settings"))
    return registry.create(kind_name, name, **opts)


def collect(index: Index, sources: Any, *, existing: str, on_error: str, encoding: str | None,
            follow_links: bool = False) -> tuple[list, dict]:
    """The documents of ``sources`` to index and their content hashes; fills a new ``index.report``.

    Documents already in the index are sorted as :meth:`Index.add` says (``existing``); those
    to index again (``report["replaced"]``, ``report["redone"]``) stay in the store until :func:`add`
    applies their new versions.
    """
    if existing not in ("error", "skip", "replace"):
        raise ConfigError(f"existing must be 'error', 'skip' or 'replace', not {existing!r}")
    if on_error not in ("raise", "skip"):
        raise ConfigError(f"on_error must be 'raise' or 'skip', not {on_error!r}")
    if isinstance(sources, type(index)) or not isinstance(sources, (str, os.PathLike, Iterable)):
        raise InputError(f"cannot index a {type(sources).__name__}: give paths, Documents or dicts with text "
                         "(to add documents to an index, call its add())")
    skipped: list[tuple[str, str]] = []
    unsupported: list = []
    items = expand_paths([sources] if isinstance(sources, (str, os.PathLike)) else list(sources), unsupported,
                         strict=on_error == "raise", follow_links=follow_links)
    skipped.extend((str(p), why) for p, why in unsupported)
    if not items:
        raise EmptyInputError("no documents to add")
    index.report = report = {"added": [], "unchanged": [], "replaced": [], "redone": [], "skipped": skipped,
                             "embedded": 0, "reused": 0}
    docs, hashes = [], {}
    seen: set[str] = set()
    with Progress("reading", total=len(items), unit="files", enabled=index.progress) as pr:
        for it in items:
            pr.update(0, file=_shown_name(it))
            d = _read_one(it, encoding, on_error, skipped)
            pr.update(1)
            if d is None:
                continue
            if _admit(index, d, it, seen, existing, on_error, report, skipped):
                docs.append(d)
                hashes[d.doc_id] = content_hash(d)
    return docs, hashes


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


def _admit(index: Index, d: Any, it: Any, seen: set, existing: str, on_error: str, report: dict,
           skipped: list) -> bool:
    """Whether document ``d`` (read from ``it``) is to be indexed: not given twice, and new to the store, or
    changed and replaced, or redone; fills ``report`` and ``skipped`` with what it decided otherwise."""
    if d.doc_id in seen:
        if on_error == "raise":
            raise InputError(f"document {d.doc_id!r} is given twice")
        skipped.append((str(it), f"document id {d.doc_id!r} is given twice"))
        return False
    seen.add(d.doc_id)
    old = index.store.documents.get(d.doc_id)
    if old is None:
        return True
    if existing == "error":
        raise InputError(f"document {d.doc_id!r} is already in the index; delete it first to replace it "
                         "(momoka index skips identical documents and re-indexes changed ones with --replace)")
    h = content_hash(d)
    if old.sha256 is None or old.sha256 == h:
        if not has_fallbacks(old.metadata):
            report["unchanged"].append(d.doc_id)
            return False
        report["redone"].append(d.doc_id)
    elif existing == "skip":
        skipped.append((str(it), f"document {d.doc_id!r} changed since it was indexed (--replace "
                                  "re-indexes it)"))
        return False
    else:
        report["replaced"].append(d.doc_id)
    return True


def add(index: Index, docs: list, hashes: dict, *, on_error: str, commit: bool, engine: str,
        workers: int | None = None, address: str | None = None) -> None:
    """Index ``docs`` into ``index`` batch by batch (see :meth:`Index.add`); fills ``index.report``.

    A document indexed again (replaced or redone) is deleted in the batch that adds its new version
    (:func:`~momoka.methods.indexer.apply_batch`), so every commit, and every reader, holds it in its old
    or its new version, whatever fails or is killed in between; one whose new version is not added (a
    failure, or skipped) keeps its old version and leaves ``replaced``/``redone``.
    """
    report, skipped = index.report, index.report["skipped"]
    embedding = index.embedding
    embedding.cache.clear()
    again = set(report["replaced"] + report["redone"])
    if again and engine == "local":
        embedding.keep(index.store, sorted(again))
    commits = Commits(index, commit)
    # the fallback tallies of this process's stages (Ray workers keep their own: records only)
    stages = [] if engine == "ray" or not docs else llm_stages(
        index, index.chunker, *(index.component(k, c["name"]) for k in ("enrich", "relate") for c in index.pipeline[k]))
    try:
        if engine == "ray":
            from .distributed import add_with_ray  # start-up: momoka.methods.distributed

            add_with_ray(index, docs, hashes, on_error=on_error, commits=commits, workers=workers, address=address,
                         replace=again)
        else:
            indexer = Indexer.of(index)
            step = max(1, min(ADD_BATCH, index.commit_docs)) if commits.enabled else max(len(docs), 1)
            with Progress("indexing", total=len(docs), unit="docs", enabled=index.progress) as pr:
                for i in range(0, len(docs), step):
                    batch = docs[i : i + step]
                    delta = indexer.run(batch, hashes, on_error, skipped)
                    report["added"].extend(apply_batch(index, {"delta": delta, "settings": indexer.settings()},
                                                       replace=again))
                    indexer.template = store_template(index.store)  # with any artifact the batch created
                    pr.update(len(batch))
                    commits.added(len(report["added"]))
        fallbacks_done(index, stages)
        commits.finish()
    finally:
        embedding.cache.clear()
        if again:  # those whose new version was not added are still there in their old one
            added = set(report["added"])
            for key in ("replaced", "redone"):
                report[key] = [d for d in report[key] if d in added]
    if skipped and on_error == "raise":  # only unsupported files can be skipped here
        warnings.warn(f"skipped {len(skipped)} file(s) that are not documents, e.g. {skipped[0][0]} ({READS}; "
                      "the index report's 'skipped' names each with its reason)", UserWarning, stacklevel=3)


def extend(index: Index, enrich: Sequence[Any], relate: Sequence[Any], commit: bool,
           objects: dict[str, Any] | None = None) -> None:
    """Run added enrichers/relators over every stored document (see :meth:`Index.extend`).

    The documents go in batches (all at once without ``commit``) through
    :meth:`Indexer.run_stored <momoka.methods.indexer.Indexer.run_stored>`, each batch's
    :class:`~momoka.store.delta.Delta` applied by the store: a batch that fails leaves the store
    as the last applied batch left it, and an extend that fails before its first batch is applied
    leaves the index as it was (its pipeline included). ``objects``: the index's component objects by
    name (those given here join it; :meth:`Index.component` finds them there).
    """
    store = index.store
    store.ensure_writable()
    commit = commit and store.path is not None
    spec = store.pipeline
    objects = {} if objects is None else objects  # the index's component objects, by name (given ones join it)
    pipeline, components = copy.deepcopy(spec), dict(objects)
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
                    entry = ComponentSpec(name, jsonable(prm), obj is not None, pending=list(index.doc_ids))
                    spec.components(key).append(entry)
                if obj is not None:
                    objects[name] = obj
                runs.append((key, index.component(key, name), entry))
        stages = llm_stages(index, *(comp for _, comp, _ in runs))
        todo = {id(comp): set(entry.pending) for _, comp, entry in runs}
        docs = [d for d in store.documents if any(d in t for t in todo.values())]
        indexer = Indexer(store_template(store), None, [c for k, c, _ in runs if k == "enrich"],
                          [c for k, c, _ in runs if k == "relate"], index.embedding, index.progress)
        step = max(1, index.commit_docs) if commit else max(len(docs), 1)
        for i in range(0, max(len(docs), 1), step):  # once at least: the declared artifacts are made
            part = docs[i : i + step]
            indexer.template = store_template(store)  # with any artifact the last batch created
            apply_batch(index, {"delta": indexer.run_stored(store, part, todo), "settings": indexer.settings()})
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
        record(index, key, comp)
    fallbacks_done(index, stages)
    store.mark_dirty()
    if commit:
        store.save()  # the pipeline without documents left to do


def record(index: Index, kind: str, comp: Any) -> None:
    """Record what ``comp`` reports (its ``describe()``) in ``index``'s pipeline."""
    s = describe(comp)
    if s is not None:
        index.record_settings(kind, getattr(comp, "name", type(comp).__name__), s)


def llm_stages(index: Index, *components: Any) -> list:
    """The fallback tallies of these components (those that have one), reset for a new run."""
    stages = [t for t in (getattr(c, "fallbacks", None) for c in components) if t is not None]
    for t in stages:
        t.reset(index.llm_max_failed)
    return stages


def fallbacks_done(index: Index, stages: list) -> None:
    """After a run: one warning per LLM stage that had unusable answers; the manifest's per-stage sums."""
    for t in stages:
        msg = t.warning()
        if msg:
            warnings.warn(msg, UserWarning, stacklevel=4)
    sums = summarize(index.store.documents.values())
    index.store.pipeline.fallbacks = sums or None
