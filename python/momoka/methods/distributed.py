"""Distributed indexing on Ray: ``Index.add(..., engine="ray")`` and ``momoka index --engine ray``.

Who does what:

- **Workers** (Ray actors, :class:`Worker`) each load the chunker, the embedder and the pipeline's
  enrichers and relators once, then take batches of documents. A batch runs through
  :meth:`Indexer.run <momoka.methods.indexer.Indexer.run>` -- the very function the
  single-process path runs -- which indexes it into an in-memory scratch store shaped like the
  real one and returns its :class:`~momoka.store.delta.Delta`: the documents with their metadata,
  the chunks, every vector view's rows, the texts given to every BM25 view, relation rows and
  node-table rows. The worker ships it back with the components' settings, **without the vector
  rows**, which it keeps: when the driver reaches the batch it tells the worker the chunk id the
  batch starts at, and the worker writes every view's part of the batch (ids, rows, HNSW graph,
  :func:`momoka.store.vectors.write_part`) into a folder of the store's staging folder
  (``STORE/staging/run-*/``, written under a temporary name, fsynced, then renamed) and returns
  the file names, sizes and checksums.
- **The driver** (the process calling :meth:`Index.add`) reads and parses the files, skips documents
  already committed, hands out batches and is the single writer: it applies the outputs to the real
  store in submission order (:meth:`IndexWriter.apply <momoka.methods.index_writer.IndexWriter.apply>`,
  which maps the scratch store's chunk and node ids onto new global ids, so the store is the one a
  single-process run builds, ids included), stages the part the worker wrote
  (:meth:`VectorView.stage <momoka.store.vectors.VectorView.stage>`) and commits: the commit moves the
  part's files into its new segment (a rename: no vector passes through the driver) and records the
  worker's checksums. A segment holds one part of a view, so while workers write parts a task is up to
  ``commit_docs`` documents (whole batches of the single-process path, run one after the other and shipped
  as one Delta) and the driver commits after every task, as the single-process path commits; otherwise a
  task is one batch, committed every ``commit_docs`` documents or ``commit_seconds`` seconds. A killed
  driver loses only what was not committed; rerunning the same command skips the committed documents
  (their content hash matches), so they are never chunked or embedded again. What a run leaves in
  the staging folder is removed at its end, and by the next writer that takes the store's lock.
- **No shared filesystem**: a worker that cannot read the run's token file in the staging folder (the
  store is not on a filesystem it shares with the driver) writes nothing; the driver then takes the
  vectors from it into the Delta, as with ``MOMOKA_RAY_WRITE_PARTS=0``, and warns once. Without
  commits (``commit=False``) or with ``MOMOKA_RAY_WRITE_PARTS=0`` the workers ship their vectors.
- **A killed worker**: its actor is restarted by Ray (``max_restarts``) and the batch retried
  (``max_task_retries``); a batch whose retries run out is reported in ``index.report.failed``
  (with ``on_error="skip"``) or raises :class:`~momoka.errors.MomokaError` after committing every
  batch before it (``on_error="raise"``). A worker that dies after running a batch and before writing
  its vectors no longer holds them: the batch runs again (the same batch gives the same output), its
  Delta shipped. A worker killed while writing leaves a temporary folder that nothing adopts. The
  store stays consistent either way: only the driver commits, and only parts whose files are complete.
- **LLM-bound stages** (LLM titles, LLM chunking, LLM referees) keep one concurrency limit over
  all workers: one :class:`Limiter` actor hands out ``llm_concurrency`` slots, and every worker
  installs it with :func:`momoka.llm.base.set_request_limiter`, so each request holds a slot of
  it as well as its client's own. The response cache is the SQLite file of
  :func:`momoka.llm.cache.default_cache_path` (``$MOMOKA_LLM_CACHE``), which several processes
  share safely (WAL, one writer transaction at a time); on a cluster of several machines point
  ``MOMOKA_LLM_CACHE`` at a shared filesystem.

Enrichers and relators run per batch of documents, as their protocol says
(``enrich(batch, doc_ids)`` for those documents only); a component that needs the other
documents of the store while it runs cannot be distributed this way. Node tables whose rows hold
store ids (JERR's entity graph) declare where (``id_fields``, ``doc_fields``), and the driver
renumbers them (:class:`~momoka.store.delta.Delta`); rows holding ints in undeclared fields are refused.
"""

from __future__ import annotations

import os
import secrets
import shutil
import time
import warnings
from collections.abc import Collection
from pathlib import Path
from typing import Any

import numpy as np

from .. import settings
from ..errors import ConfigError, MomokaError
from ..progress import Progress
from ..store.spec import PipelineSpec
from .base import ADD_BATCH
from .indexer import Embedding, Indexer, Report, recorded_chunker, recorded_component, scratch_store, store_template

#: Times Ray restarts a dead worker actor, and retries a batch whose worker died.
MAX_RESTARTS = 3
#: Default number of LLM requests in flight over all workers (the OpenAI client's own default);
#: ``$MOMOKA_LLM_GLOBAL_CONCURRENCY`` sets another.
LLM_CONCURRENCY: int = settings.default("MOMOKA_LLM_GLOBAL_CONCURRENCY")
ENV_LLM_CONCURRENCY = "MOMOKA_LLM_GLOBAL_CONCURRENCY"

INSTALL_HINT = 'Ray is not installed: pip install "momoka[ray]"'
#: ``$MOMOKA_RAY_WRITE_PARTS``: workers write their batches' vectors into the store (off: they ship them).
ENV_WRITE_PARTS = "MOMOKA_RAY_WRITE_PARTS"
#: The file of a run's staging folder holding the run's token: a worker that reads it there shares the
#: driver's filesystem.
TOKEN_FILE = "driver.token"
#: While workers write parts, tasks of several batches are made only while each worker still gets this many.
TASKS_PER_WORKER = 4
#: The workers' concurrency group of write() and take(), apart from run()'s.
IO = "io"


def require_ray():
    """The ``ray`` module, or :class:`ConfigError` saying how to install it."""
    try:
        import ray  # optional: ray
    except ImportError:
        raise ConfigError(INSTALL_HINT) from None
    return ray


# ---------------------------------------------------------------------------------- Ray actors


class Worker:
    """One Ray worker: the models loaded once, then :meth:`run` per batch of documents."""

    def __init__(self, template: dict, chunker: Any = None, embedder: Any = None, components: dict | None = None,
                 limiter: Any = None):
        self.template = template
        if limiter is not None:
            from ..llm.base import set_request_limiter  # start-up: momoka.llm.base

            set_request_limiter(_LimiterClient(limiter))
        # the chunker, the embedder and the components of the pipeline, rebuilt from the spec unless given,
        # loaded once (the embedding service reads the views of an empty scratch store shaped like the real one)
        spec = PipelineSpec.from_dict(template["pipeline"])
        embedding = Embedding(scratch_store(template), embedder)
        given = dict(components or {})
        parts = {kind: [given[c.name] if c.name in given else recorded_component(spec, kind, c.name)
                        for c in spec.components(kind)] for kind in ("enrich", "relate")}
        chunker = chunker if chunker is not None else recorded_chunker(embedding.store, embedding)
        self.indexer = Indexer(template, chunker, parts["enrich"], parts["relate"], embedding, False)
        self.held: dict[int, tuple] = {}  # batch number -> its vectors, until write() or take()

    def pid(self) -> int:
        """The worker's process id."""
        return os.getpid()

    def run(self, docs: list, hashes: dict, on_error: str, hold: int | None = None, step: int | None = None) -> dict:
        """Chunk, embed, enrich and relate ``docs`` (:meth:`Indexer.run <momoka.methods.indexer.Indexer.run>`):
        the batch's Delta, the components' settings, what was skipped and the texts embedded.

        ``step``: run the documents in batches of ``step`` (the single-process path's batches, so the vectors
        are the same bit for bit) and ship one Delta of them all, numbered as the driver numbers them when it
        applies them one after the other.

        ``hold``: the batch's number; its vectors stay here (the Delta ships without their rows, ``"held"``
        says so) until :meth:`write` writes them into the store's staging folder, numbered as the driver
        says, or :meth:`take` hands them over."""
        t0 = time.perf_counter()
        counts = self.indexer.embedding.report = Report()  # texts embedded, counted as the single-process path does
        skipped: list = []
        docs = list(docs)
        step = step or len(docs) or 1
        deltas = [self.indexer.run(docs[i : i + step], hashes, on_error, skipped) for i in range(0, len(docs), step)]
        delta = deltas[0] if len(deltas) == 1 else _combined(self.template, deltas)
        out = {"delta": delta, "settings": self.indexer.settings(), "skipped": skipped,
               "embedded": int(counts.embedded), "seconds": time.perf_counter() - t0}
        rows = {name: (np.asarray(e["ids"], np.int64), e["rows"]) for name, e in delta.vectors.items()
                if e["rows"] is not None and len(e["ids"])}
        if hold is not None and rows and not delta.stored:  # (new documents: their chunks are numbered in order)
            order = [int(c) for cs in delta.chunks for c, _ in cs]
            specs = {name: {k: e.get(k) for k in ("embedder", "dtype", "source")} for name, e in delta.vectors.items()}
            delta.vectors = {name: {**e, "ids": [], "rows": None} for name, e in delta.vectors.items()}
            self.held[hold] = (rows, order, specs)
            out["held"] = hold
        return out

    def write(self, hold: int, base: int, folder: str, token: str, hnsw: dict | None) -> dict:
        """Write the vectors of batch ``hold`` into a new folder under ``folder`` (the store's staging folder),
        its chunks numbered from ``base`` in the order of the batch's documents, as the driver's store numbers
        them: ``{"folder", "views": {name: {"ids", "records"}}}`` for :meth:`VectorView.stage
        <momoka.store.vectors.VectorView.stage>`. ``{"unreachable": True}`` when ``folder`` is not the
        driver's (its token file is missing or holds another token: no shared filesystem), ``{"lost": True}``
        when the vectors are not here (this worker was restarted since it ran the batch).

        Files are written under a temporary name and renamed when complete (fsynced), so a worker killed
        while writing leaves only a temporary folder, which is never adopted."""
        from ..store._io import fsync_dir  # start-up: momoka.store._io
        from ..store.vectors import write_part  # start-up: momoka.store.vectors

        if _read_token(Path(folder)) != token:
            return {"unreachable": True}
        item = self.held.pop(hold, None)
        if item is None:
            return {"lost": True}
        rows, order, specs = item
        gid = {c: base + k for k, c in enumerate(order)}
        tmp = Path(folder) / f"b{hold:06d}.tmp-{os.getpid()}"
        views = {}
        for name, (ids, vecs) in rows.items():
            new = np.array([gid[int(c)] for c in ids], dtype=np.int64)
            views[name] = {"ids": new, "records": write_part(tmp, name, specs[name], new, vecs, hnsw)}
        if not views:
            return {"folder": None, "views": {}}
        for d, _, _ in os.walk(tmp, topdown=False):
            fsync_dir(Path(d))
        final = Path(folder) / f"b{hold:06d}-{os.getpid()}-{time.monotonic_ns()}"
        os.rename(tmp, final)
        fsync_dir(Path(folder))
        return {"folder": str(final), "views": views}

    def take(self, hold: int) -> dict | None:
        """The vectors of batch ``hold`` as the Delta's entries hold them (``{name: (ids, rows)}``), given up
        here; None when they are not here."""
        item = self.held.pop(hold, None)
        return None if item is None else item[0]


class Limiter:
    """One process-wide pool of LLM request slots, shared by every worker (a Ray async actor)."""

    def __init__(self, slots: int):
        import asyncio  # start-up: asyncio

        self.slots = int(slots)
        self.sem = asyncio.Semaphore(self.slots)
        self.held = self.peak = 0

    async def acquire(self) -> None:
        """Wait for a free slot."""
        await self.sem.acquire()
        self.held += 1
        self.peak = max(self.peak, self.held)

    async def release(self) -> None:
        """Give a slot back."""
        self.held -= 1
        self.sem.release()

    async def stats(self) -> dict:
        """``{"slots", "held", "peak"}``: the limit, slots held now, most ever held at once."""
        return {"slots": self.slots, "held": self.held, "peak": self.peak}


class _LimiterClient:
    """The :func:`~momoka.llm.base.set_request_limiter` interface over a :class:`Limiter` actor handle."""

    def __init__(self, actor: Any):
        self.actor = actor

    async def acquire(self) -> None:
        await self.actor.acquire.remote()

    async def release(self) -> None:
        await self.actor.release.remote()


# ---------------------------------------------------------------------------------- the driver


def connect(address: str | None = None, num_cpus: int | None = None):
    """Ray, connected to the cluster at ``address`` (None: the running one, else a new local one)."""
    ray = require_ray()
    if not ray.is_initialized():
        kw: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
        if address:
            kw["address"] = address
        elif num_cpus:
            kw["num_cpus"] = num_cpus
        here = Path(__file__).resolve().parents[2]
        if here.name not in ("site-packages", "dist-packages"):
            # momoka runs from a source checkout: the workers import this one, not another installed copy
            path = os.pathsep.join(p for p in (str(here), os.environ.get("PYTHONPATH")) if p)
            kw["runtime_env"] = {"env_vars": {"PYTHONPATH": path}}
        ray.init(**kw)
    return ray


def _shippable(writer: Any) -> tuple[Any, Any, dict]:
    """The chunker, embedder and components the workers cannot rebuild from the manifest (objects)."""
    chunker = writer.chunker if (writer.store.manifest.get("chunker") or {}).get("object") else None
    emb = writer.embedding.own
    if emb is not None and type(emb).__module__.startswith("momoka.models"):
        emb = None  # a registry model: each worker loads it itself
    comps = {c.name: writer.component(kind, c.name) for kind in ("enrich", "relate")
             for c in writer.spec.components(kind) if c.object}
    return chunker, emb, comps


def add_with_ray(writer: Any, docs: list, hashes: dict, *, on_error: str, commits: Any, workers: int | None = None,
                 address: str | None = None, llm_concurrency: int | None = None,
                 batch: int | None = None, replace: Collection[str] = ()) -> None:
    """Run ``docs`` through the pipeline on Ray workers and commit their outputs through ``writer`` (the
    :class:`~momoka.methods.index_writer.IndexWriter`) in order.

    Called by :meth:`Index.add` with ``engine="ray"`` (the documents are parsed and checked there).
    A batch is ``batch`` documents (default: the single-process path's batches, ``min(32, commit_docs)``,
    so both paths give the same store; a smaller ``commit_docs`` gives more, smaller batches). A task is
    one batch, or, while workers write their vectors into the store (``$MOMOKA_RAY_WRITE_PARTS``, with
    commits), up to ``commit_docs`` documents of whole batches while every worker still gets
    :data:`TASKS_PER_WORKER` tasks; the driver then commits after every task (one segment each).
    Fills ``writer.report``: ``added``, ``skipped``, ``failed`` (doc ids whose batch failed after
    every retry), ``embedded`` (texts embedded by the workers) and ``timing`` (the writer's seconds
    applying outputs, ``apply_s``, and committing, ``commit_s``; the workers' seconds, ``worker_s``).
    ``replace``: stored documents indexed again, each deleted in the batch that adds its new version.
    """
    ray = connect(address)
    from ray.exceptions import RayActorError, RayTaskError  # optional: ray

    report = writer.report
    report.embedded = 0
    # seconds the writer spent applying outputs and committing, and the workers' seconds summed
    report.timing = timing = {"apply_s": 0.0, "commit_s": 0.0, "worker_s": 0.0}
    if not docs:
        return
    n_workers = int(workers or max(1, int(ray.cluster_resources().get("CPU", 1))))
    if llm_concurrency is None:
        llm_concurrency = settings.get_int(ENV_LLM_CONCURRENCY)
    chunker, emb, comps = _shippable(writer)
    limiter = ray.remote(num_cpus=0)(Limiter).remote(llm_concurrency)
    # a batch's write() and take() run in their own thread ("io"), beside the next batch's run()
    actor_cls = ray.remote(num_cpus=1, max_restarts=MAX_RESTARTS, max_task_retries=MAX_RESTARTS,
                           concurrency_groups={IO: 1})(Worker)
    template = store_template(writer.store)
    actors = [actor_cls.remote(template, chunker, emb, comps, limiter) for _ in range(n_workers)]
    # Workers write their batches' vectors into the store's staging folder when the driver commits as it
    # goes (the driver adopts one batch's part per commit); else, or where a worker cannot reach the
    # folder, they ship them in the Delta.
    stage = token = None
    if commits.enabled and settings.get_flag(ENV_WRITE_PARTS):
        stage, token = writer.store.staging(), secrets.token_hex(16)
        (stage / TOKEN_FILE).write_text(token, encoding="utf-8")
    hnsw = writer.store.manifest.get("hnsw")
    unreachable = False
    if batch is None:
        # The batches of the single-process path: the default embedder's int8 activations are quantised
        # per forward pass, so a chunk's vector depends on the texts embedded with it; the same batches
        # give the same vectors, bit for bit.
        batch = max(1, min(ADD_BATCH, writer.commit_docs))
    # While workers write parts, a task is up to commit_docs documents (whole batches, at least
    # TASKS_PER_WORKER tasks per worker): its part is one segment, as one commit of the single-process path.
    per_task = 1
    if stage is not None:
        per_task = max(1, min(writer.commit_docs // batch, int(len(docs) / (batch * TASKS_PER_WORKER * n_workers))))
    step = batch if per_task > 1 else None
    batch *= per_task
    batches = [docs[i : i + batch] for i in range(0, len(docs), batch)]
    hashes_of = [{d.doc_id: hashes.get(d.doc_id) for d in b} for b in batches]
    pending: dict[Any, tuple[int, Any]] = {}
    results: dict[int, Any] = {}
    ran_on: dict[int, Any] = {}  # batch number -> the actor that ran it (holding its vectors)
    nxt_submit = nxt_apply = 0
    idle = list(actors)
    err: BaseException | None = None
    try:
        with Progress("indexing on ray", total=len(docs), unit="docs", enabled=writer.progress) as pr:
            while nxt_apply < len(batches):
                while idle and nxt_submit < len(batches) and err is None and nxt_submit - nxt_apply < 4 * n_workers:
                    a = idle.pop()
                    hold = nxt_submit if stage is not None and not unreachable else None
                    pending[a.run.remote(batches[nxt_submit], hashes_of[nxt_submit], on_error, hold, step)] = (
                        nxt_submit, a)
                    nxt_submit += 1
                if nxt_apply not in results:
                    if not pending:
                        break  # stopped by an error: nothing more comes
                    done, _ = ray.wait(list(pending), num_returns=1)
                    i, a = pending.pop(done[0])
                    try:
                        results[i] = ray.get(done[0])
                        ran_on[i] = a
                        idle.append(a)
                    except RayTaskError as exc:  # the pipeline raised (e.g. a document without chunks)
                        cause = exc.as_instanceof_cause()
                        err = err or (cause if isinstance(cause, MomokaError) else exc)
                        results[i] = None
                    except RayActorError as exc:  # the worker died more often than it may be restarted
                        results[i] = exc
                        if not idle and not pending:  # no worker left for the batches not yet given out
                            for j in range(nxt_submit, len(batches)):
                                results[j] = exc
                            nxt_submit = len(batches)
                    continue
                out = results.pop(nxt_apply)
                a = ran_on.pop(nxt_apply, None)
                b, h = batches[nxt_apply], hashes_of[nxt_apply]
                nxt_apply += 1
                if out is None:
                    break
                if isinstance(out, BaseException):
                    ids = [d.doc_id for d in b]
                    if on_error == "raise":
                        err = err or MomokaError(f"a Ray worker died {MAX_RESTARTS + 1} times on documents "
                                                 f"{', '.join(ids[:5])}{' ...' if len(ids) > 5 else ''}: {out}")
                        break
                    report.failed.extend(ids)
                    report.skipped.extend((d.source or d.doc_id, f"its Ray worker died: {out}") for d in b)
                    pr.update(len(b))
                    continue
                t_w = time.perf_counter()
                written = None
                if out.get("held") is not None:
                    out, written, lost_reach = _written_part(ray, writer, out, a, actors, b, h, on_error, stage,
                                                             token, hnsw, step)
                    if lost_reach and not unreachable:
                        unreachable = True
                        warnings.warn(f"a Ray worker cannot reach the store's staging folder {stage} (the store is "
                                      "not on a filesystem the workers share): the workers ship their vectors to "
                                      "the driver instead", UserWarning, stacklevel=3)
                report.added.extend(writer.apply(out, replace=replace))
                if written and written["views"]:
                    _stage(writer, out, written)
                t_c = time.perf_counter()
                # while workers write parts, every batch is committed: a part is adopted only by a view without
                # unsaved rows (a batch shipped meanwhile, e.g. run again, must not wait for the next count)
                commits.added(len(report.added), now=stage is not None)
                t_e = time.perf_counter()
                report.skipped.extend(out["skipped"])
                report.embedded += int(out["embedded"])
                timing["apply_s"] += t_c - t_w
                timing["commit_s"] += t_e - t_c
                timing["worker_s"] += float(out["seconds"])
                pr.update(len(b))
    finally:
        for ref in pending:
            try:
                ray.cancel(ref, force=False)
            except Exception:  # noqa: BLE001 - the task may be gone already
                pass
        for a in actors:
            ray.kill(a)
        ray.kill(limiter)
        if stage is not None:  # what no commit adopted (a worker killed while writing, a failed run)
            shutil.rmtree(stage, ignore_errors=True)
            try:
                stage.parent.rmdir()  # the store's staging folder, when no other run's is in it
            except OSError:
                pass
    if err is not None:
        commits.finish()
        raise err


def _combined(template: dict, deltas: list) -> Any:
    """One Delta of several batches' Deltas: applied in order to a scratch store (renumbered as the driver
    would apply them one after the other), then read back."""
    from ..store.delta import Delta, apply_delta  # start-up: momoka.store.delta

    st = scratch_store(template)
    for d in deltas:
        apply_delta(st, d)
    return Delta.of_store(st)


def _worker_path(stage: Path) -> str:
    """The staging folder as the workers are told it (the driver's path: workers must share its filesystem)."""
    return str(stage)


def _read_token(folder: Path) -> str | None:
    """The token of a run's staging folder, or None when it cannot be read there."""
    try:
        return (folder / TOKEN_FILE).read_text(encoding="utf-8")
    except OSError:
        return None


def _written_part(ray: Any, writer: Any, out: dict, actor: Any, actors: list, batch: list, hashes: dict,
                  on_error: str, stage: Path, token: str, hnsw: dict | None,
                  step: int | None = None) -> tuple[dict, dict | None, bool]:
    """Have the worker holding batch ``out``'s vectors write them, numbered from the store's next chunk id:
    ``(out, written, unreachable)``, ``written`` the part's description (for :func:`_stage`).

    When the worker cannot reach the staging folder (``unreachable`` True), it hands the vectors over and they
    go into ``out``'s Delta (``written`` None), as when workers do not write parts. When it no longer holds
    them (it died since), the batch is run again, shipping its Delta (the same batch gives the same output).
    """
    from ray.exceptions import RayActorError, RayTaskError  # optional: ray

    hold = out["held"]
    try:
        w = ray.get(actor.write.options(concurrency_group=IO).remote(hold, writer.store.n_slots, _worker_path(stage),
                                                                     token, hnsw))
    except (RayActorError, RayTaskError):
        w = {"lost": True}
    if "views" in w:
        return out, w, False
    if w.get("unreachable"):
        try:
            rows = ray.get(actor.take.options(concurrency_group=IO).remote(hold))
        except (RayActorError, RayTaskError):
            rows = None
        if rows is not None:
            for name, (ids, vecs) in rows.items():
                out["delta"].vectors[name].update(ids=ids, rows=vecs)
            return out, None, True
    exc: BaseException | None = None
    for a in [actor] + [x for x in actors if x is not actor]:
        try:
            return ray.get(a.run.remote(batch, hashes, on_error, None, step)), None, bool(w.get("unreachable"))
        except RayActorError as e:
            exc = e
    raise MomokaError(f"no Ray worker is left to index again the batch whose vectors were lost: {exc}")


def _stage(writer: Any, out: dict, written: dict) -> None:
    """Adopt the part a worker wrote for batch ``out`` (already applied): each view's vectors are staged for
    the commit that follows. Its ids must be the chunk ids the batch's documents got."""
    store = writer.store
    got = [c for d in out["delta"].doc_ids for c in store.documents[d].chunk_ids]
    for name, v in written["views"].items():
        ids = np.asarray(v["ids"], np.int64)
        if got != list(range(got[0] if got else 0, (got[0] if got else 0) + len(got))) or not set(ids.tolist()) <= set(got):
            raise MomokaError(f"internal error: a Ray worker numbered the vectors of view {name!r} {ids[:5].tolist()} "
                              f"..., not as the store numbered the batch's chunks {got[:5]} ...")
        store.vector_view(name).stage(written["folder"], ids, v["records"])
