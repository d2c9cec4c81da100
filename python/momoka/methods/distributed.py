"""Distributed indexing on Ray: ``Index.add(..., engine="ray")`` and ``momoka index --engine ray``.

Who does what:

- **Workers** (Ray actors, :class:`Worker`) each load the chunker, the embedder and the pipeline's
  enrichers and relators once, then take batches of documents. A batch runs through
  :meth:`Indexer.run <momoka.methods.indexer.Indexer.run>` -- the very function the
  single-process path runs -- which indexes it into an in-memory scratch store shaped like the
  real one and returns its :class:`~momoka.store.delta.Delta`: the documents with their metadata,
  the chunks, every vector view's rows, the texts given to every BM25 view, relation rows and
  node-table rows. The worker ships it back with the components' settings.
- **The driver** (the process calling :meth:`Index.add`) reads and parses the files (so workers
  need no shared filesystem), skips documents already committed, hands out batches and is the
  single writer: it applies the outputs to the real store in submission order
  (:meth:`IndexWriter.apply <momoka.methods.index_writer.IndexWriter.apply>`, which maps the scratch store's chunk and node ids onto new global ids, so
  the store is the one a single-process run builds, ids included) and commits every ``commit_docs``
  documents or ``commit_seconds`` seconds: a commit writes one segment holding only the new
  batches, so the driver's commit costs the batch, not the store. A killed driver loses only what
  was not committed; rerunning the same command skips the committed documents (their content
  hash matches), so they are never chunked or embedded again.
- **A killed worker**: its actor is restarted by Ray (``max_restarts``) and the batch retried
  (``max_task_retries``); a batch whose retries run out is reported in ``index.report.failed``
  (with ``on_error="skip"``) or raises :class:`~momoka.errors.MomokaError` after committing every
  batch before it (``on_error="raise"``). The store stays consistent either way: only the driver
  writes it.
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
import time
from collections.abc import Collection
from pathlib import Path
from typing import Any

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

    def pid(self) -> int:
        """The worker's process id."""
        return os.getpid()

    def run(self, docs: list, hashes: dict, on_error: str) -> dict:
        """Chunk, embed, enrich and relate ``docs`` (:meth:`Indexer.run <momoka.methods.indexer.Indexer.run>`):
        the batch's Delta, the components' settings, what was skipped and the texts embedded."""
        t0 = time.perf_counter()
        counts = self.indexer.embedding.report = Report()  # texts embedded, counted as the single-process path does
        skipped: list = []
        delta = self.indexer.run(list(docs), hashes, on_error, skipped)
        return {"delta": delta, "settings": self.indexer.settings(), "skipped": skipped,
                "embedded": int(counts.embedded), "seconds": time.perf_counter() - t0}


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
    A task is ``batch`` documents (default: the single-process path's batches, ``min(32, commit_docs)``,
    so both paths give the same store; a smaller ``commit_docs`` gives more, smaller tasks).
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
    actor_cls = ray.remote(num_cpus=1, max_restarts=MAX_RESTARTS, max_task_retries=MAX_RESTARTS)(Worker)
    template = store_template(writer.store)
    actors = [actor_cls.remote(template, chunker, emb, comps, limiter) for _ in range(n_workers)]
    if batch is None:
        # The batches of the single-process path: the default embedder's int8 activations are quantised
        # per forward pass, so a chunk's vector depends on the texts embedded with it; the same batches
        # give the same vectors, bit for bit.
        batch = max(1, min(ADD_BATCH, writer.commit_docs))
    batches = [docs[i : i + batch] for i in range(0, len(docs), batch)]
    hashes_of = [{d.doc_id: hashes.get(d.doc_id) for d in b} for b in batches]
    pending: dict[Any, tuple[int, Any]] = {}
    results: dict[int, Any] = {}
    nxt_submit = nxt_apply = 0
    idle = list(actors)
    err: BaseException | None = None
    try:
        with Progress("indexing on ray", total=len(docs), unit="docs", enabled=writer.progress) as pr:
            while nxt_apply < len(batches):
                while idle and nxt_submit < len(batches) and err is None and nxt_submit - nxt_apply < 4 * n_workers:
                    a = idle.pop()
                    pending[a.run.remote(batches[nxt_submit], hashes_of[nxt_submit], on_error)] = (nxt_submit, a)
                    nxt_submit += 1
                if nxt_apply not in results:
                    if not pending:
                        break  # stopped by an error: nothing more comes
                    done, _ = ray.wait(list(pending), num_returns=1)
                    i, a = pending.pop(done[0])
                    try:
                        results[i] = ray.get(done[0])
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
                b = batches[nxt_apply]
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
                report.added.extend(writer.apply(out, replace=replace))
                t_c = time.perf_counter()
                commits.added(len(report.added))
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
    if err is not None:
        commits.finish()
        raise err
