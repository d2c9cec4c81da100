"""The writer of a store: :class:`StoreWriter` holds the lock, applies changes, commits and merges.

One writer at a time: a writer takes an exclusive ``flock`` on ``STORE/.lock`` (a second one gets
:class:`~momoka.errors.StoreLockedError`; the kernel drops the lock when its process dies, so the lock
of a killed writer is never stale). Changes apply in memory (:meth:`StoreWriter.add_documents`,
:meth:`~StoreWriter.delete`, :meth:`~StoreWriter.apply` of a :class:`~momoka.store.delta.Delta`, the
artifacts' own ``add``/``set``) and :meth:`~StoreWriter.save` commits them: one new segment, a
generation naming the segments, then ``manifest.json`` (see :mod:`momoka.store.store` for the layout).
After a commit the merge policy (:mod:`momoka.store.segments`) may merge a run of segments, in a
background thread (:mod:`momoka.store._merger`) whose result the next save commits.

A :class:`~momoka.store.snapshot.Snapshot` (a store opened for reading) never writes;
:meth:`StoreWriter.adopt` makes the writer of the generation a snapshot loaded, taking its state over.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import tempfile
import warnings
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from ..errors import InputError, StoreError
from ..text.model import Chunk
from ._blocks import file_record
from ._io import fsync_dir, write_file
from ._kinds import ArtifactWriter
from ._lease import Lease, delete_unleased, write_lease_file
from ._manifest import FORMAT_NAME, FORMAT_VERSION, LOCK, MANIFEST, _Lock, manifest_checksum, os_reason, read_manifest
from ._merger import Merger, MergeJob
from .delta import apply_delta, check_delta
from .documents import DocEntry
from .segments import DOCS, STAGING, MergePolicy, SegmentStats, merge_background, segment_name
from .snapshot import Snapshot
from .store import Store, _leftover, _manifest_bytes, _momoka_version, _now
from .artifact import StoreWarning
from .vectors import DEFAULT_HNSW


class StoreWriter(ArtifactWriter, Store, role="writer"):
    """The writer of a store directory (or of an in-memory store): the lock, changes, commits, merges.

    Make one with :meth:`create` (a new store), :meth:`open` (an existing one; ``Store.open(path,
    writable=True)`` is the same) or :meth:`adopt` (the generation a snapshot loaded). Changes apply
    in memory and :meth:`save` commits them atomically. :meth:`close` (or the end of a ``with`` block)
    releases the lock; a closed writer takes it again on its next change, refusing when someone else
    committed meanwhile.
    """

    def __init__(self, path: str | os.PathLike | None, manifest: dict):
        super().__init__(path, manifest)
        self._init_writer()

    def _init_writer(self) -> None:
        #: What the writer merges after a commit (:class:`~momoka.store.segments.MergePolicy`; its factor is
        #: ``$MOMOKA_MERGE_FACTOR``, default 10, and its tombstone trigger is off). Replace it to change that.
        self.merge_policy = MergePolicy.from_settings()
        self._written_live: dict[str, int] = {}  # segment name -> its rows live when it was written
        #: Run the merge policy's merges in a background thread (``$MOMOKA_MERGE_BACKGROUND``, default True);
        #: False: in the save that asks for them, each a commit of its own.
        self.merge_background = merge_background()
        self._merger = Merger()
        self._lock: _Lock | None = None
        self._dirty = False
        self._torn: str | None = None  # why the changes in memory must not be committed (see apply)

    @classmethod
    def create(
        cls,
        path: str | os.PathLike | None,
        *,
        chunker: dict | None = None,
        hnsw: dict | None = None,
        overwrite: bool = False,
        extra: dict | None = None,
    ) -> StoreWriter:
        """A new, empty store (``path=None``: in memory only, :meth:`save` needs a path).

        ``chunker``: ``{"name", "params"}``. ``hnsw``: HNSW parameters of its
        vector views (default :data:`~momoka.store.vectors.DEFAULT_HNSW`).
        Refuses a non-empty directory that is not a store, and an existing
        store unless ``overwrite``. Views are added with
        :meth:`add_vector_view` / :meth:`add_bm25_view`.
        """
        manifest = {
            "format": FORMAT_NAME,
            "version": FORMAT_VERSION,
            "generation": 0,
            "dir": None,
            "created": _now(),
            "updated": None,
            "chunker": chunker,
            "hnsw": dict(DEFAULT_HNSW, **(hnsw or {})),
            "pipeline": {},
            "counts": {"documents": 0, "chunks": 0, "slots": 0},
            "artifacts": [],
            "segments": [],
            "next_segment": 1,
        }
        if extra:
            manifest["extra"] = extra
        store = cls(path, manifest)
        if path is not None:
            root = Path(path)
            if root.exists() and not root.is_dir():
                raise StoreError(f"{root} exists and is not a directory")
            if root.is_dir():
                if (root / MANIFEST).exists():
                    if not overwrite:
                        raise StoreError(
                            f"{root} is already a momoka store; open it to add documents, or overwrite it"
                        )
                    # Continue the old store's generation numbers, so the new generation never
                    # replaces files the old manifest still points at.
                    try:
                        old_gen = int(json.loads((root / MANIFEST).read_text(encoding="utf-8")).get("generation", 0))
                    except (OSError, ValueError, TypeError, AttributeError):
                        old_gen = 0
                    manifest["generation"] = max(old_gen, 0)
                elif any(not _leftover(p.name) for p in root.iterdir()):
                    raise StoreError(f"{root} is a non-empty directory that is not a momoka store; refusing to use it")
            try:
                root.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreError(f"cannot create store {root}: {os_reason(exc)}") from None
            store._acquire()
            store._dirty = True
            if not (root / MANIFEST).exists():
                left = [p for p in root.iterdir() if p.name != LOCK and _leftover(p.name)]
                if left:  # a first build that never committed (we hold the lock: its writer is gone)
                    warnings.warn(f"store {root}: its first build was interrupted before anything was committed; "
                                  f"starting it again (removed {len(left)} leftover file(s))", StoreWarning, stacklevel=2)
                    for p in left:
                        shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink(missing_ok=True)
        return store


    @classmethod
    def open(cls, path: str | os.PathLike, *, writable: bool = True) -> StoreWriter:
        """Open the store at ``path`` for writing: take the writer lock, then load its newest generation
        (format version 3, or 2 or 1, which the next save writes as one segment). ``writable`` must be True
        (it is there for ``Store.open``'s signature)."""
        if not writable:
            return Snapshot.open(path)  # type: ignore[return-value]
        root = Path(path)
        read_manifest(root)  # clear errors before the lock is taken
        store = cls(root, {})
        store._acquire()
        try:
            manifest = read_manifest(root)  # read under the lock
            store.manifest = manifest
            store._attach(manifest)
        except BaseException:
            store.close()
            raise
        return store

    @classmethod
    def adopt(cls, snapshot: Snapshot) -> StoreWriter:
        """The writer of the generation ``snapshot`` loaded, taking over its state (documents, chunks,
        artifacts, lease) without reading anything again; ``snapshot`` is closed (empty) afterwards.

        Takes the writer lock (:class:`~momoka.errors.StoreLockedError` when another writer holds it) and
        refuses with :class:`~momoka.errors.StoreError` when someone committed since the snapshot was
        loaded; ``snapshot`` is unchanged then.
        """
        if snapshot.path is None:
            raise StoreError("an in-memory snapshot has no store to write")
        lock = _Lock(snapshot.path / LOCK)
        lock.acquire()
        try:
            on_disk = read_manifest(snapshot.path)
            if on_disk.get("generation") != snapshot.manifest.get("generation"):
                raise StoreError(f"store {snapshot.path} was changed by another writer since it was opened; "
                                 "reopen it")
        except BaseException:
            lock.release()
            raise
        writer = cls.__new__(cls)
        writer.__dict__.update(snapshot.__dict__)
        writer._init_writer()
        writer._dirty = snapshot._has_delta()  # an older format: the next save writes it as one segment
        writer._lock = lock
        snapshot._given_away()
        for art in writer._all():
            art._store = writer
        writer._track()
        writer._clean_leftovers()
        writer._clean_staging()
        return writer

    def refresh(self) -> StoreWriter:
        """The writer is always at its newest commit: itself."""
        return self

    @property
    def writable(self) -> bool:
        """True when this object holds the writer lock (or is in memory only)."""
        return self.path is None or self._lock is not None

    def _acquire(self) -> None:
        if self.path is None or self._lock is not None:
            return
        lock = _Lock(self.path / LOCK)
        lock.acquire()
        self._lock = lock
        self._clean_staging()  # parts written for a writer that is gone (we hold the lock: none is running)
        if (self.path / MANIFEST).exists():  # a crashed writer's temporary files go now, not at our first save
            self._clean_leftovers()  # (a first build that never committed is handled, and told, by create)

    def ensure_writable(self) -> None:
        """Take the writer lock if not held; refuse if the store changed on disk since it was loaded."""
        if self.writable:
            return
        self._acquire()
        try:
            on_disk = read_manifest(self.path)
        except StoreError:
            self.close()
            raise
        if on_disk.get("generation") != self.manifest.get("generation"):
            self.close()
            raise StoreError(f"store {self.path} was changed by another writer since it was opened; reopen it")

    def close(self) -> None:
        """Release the writer lock and the lease on the loaded generation (unsaved changes stay in memory only).

        A background merge still running is waited for, and its result committed unless there are unsaved
        changes (then it is dropped: a later writer merges again). After close, parts not yet read (BM25,
        HNSW, relations) may be deleted by the next writer's save.
        """
        try:
            self.wait_merges(commit=self._lock is not None and not self._has_delta())
        finally:
            self._release()

    def _release(self) -> None:
        super()._release()
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def _meta_changed(self, doc_id: str) -> None:
        self._docs_dirty.add(doc_id)

    # ------------------------------------------------------------------ documents and chunks

    def add_documents(self, documents: Sequence[dict], chunks: Sequence[Sequence[Chunk]]) -> list[list[int]]:
        """Add documents with their chunks to the document and chunk tables.

        ``documents[i]`` is ``{"doc_id", "title", "source", "length", "metadata"[, "sha256"]}``
        and ``chunks[i]`` its chunks. Returns the new chunk ids per document.
        Views are not filled: callers add vectors and BM25 texts for the new
        ids. Raises :class:`InputError` for a doc_id already in the store (or
        given twice): nothing is added then.
        """
        self.ensure_writable()
        if len(chunks) != len(documents):
            raise InputError("one list of chunks per document is needed")
        seen: set[str] = set()
        for d in documents:
            did = d.get("doc_id") if isinstance(d, dict) else None
            if not isinstance(did, str) or not did:
                raise InputError(f"document id must be a non-empty str, got {did!r}")
            if did in self.documents or did in seen:
                raise InputError(f"document {did!r} is already in the store; delete it first to replace it")
            seen.add(did)
        rows = [(d["doc_id"], c) for d, cs in zip(documents, chunks) for c in cs]
        ids = self.chunks.append(rows)
        out: list[list[int]] = []
        pos = 0
        for d, cs in zip(documents, chunks):
            mine = ids[pos : pos + len(cs)]
            pos += len(cs)
            e = DocEntry(d["doc_id"], d.get("title"), d.get("source"), int(d.get("length") or 0), list(mine),
                         dict(d.get("metadata") or {}), d.get("sha256"))
            self.documents[e.doc_id] = e
            self._docs_dirty.add(e.doc_id)
            self._track_entry(e)
            out.append(list(mine))
        self._dirty = True
        return out

    def apply(self, delta) -> list[str]:
        """Add a batch built apart (a :class:`~momoka.store.delta.Delta`, by its own ids): its ids are renumbered
        to follow the store's; returns the doc ids added. The next save writes it as one segment.

        A Delta the store cannot apply is refused before anything changes (:func:`~momoka.store.delta.check_delta`).
        One that fails half-way (its deletions applied, its documents not all added) leaves changes that
        must not be committed: the writer then refuses to :meth:`save` (:class:`~momoka.errors.StoreError`);
        the last commit holds every document, in its old version. Close the writer and open the store again.
        """
        check_delta(self, delta)
        try:
            return apply_delta(self, delta)
        except BaseException as exc:
            self._torn = f"applying a batch failed half-way ({type(exc).__name__}: {exc})"
            raise

    def delete(self, doc_ids: Iterable[str]) -> int:
        """Delete documents: their chunks leave the table, every view and every relation.

        Returns the number of chunks removed. Raises :class:`InputError` for an
        unknown doc_id (nothing is deleted then).
        """
        self.ensure_writable()
        doc_ids = list(doc_ids)
        unknown = [d for d in doc_ids if d not in self.documents]
        if unknown:
            raise InputError(f"unknown document id(s): {', '.join(map(repr, unknown[:5]))}")
        removed = sorted({c for d in doc_ids for c in self.documents[d].chunk_ids})
        for kind in ("vectors", "bm25", "relation"):
            for art in self._artifacts[kind].values():
                art.delete(removed)
        self.chunks.delete(removed)
        for did in dict.fromkeys(doc_ids):
            del self.documents[did]
            self._docs_dirty.discard(did)
            self._docs_deleted.add(did)
        self._dirty = True
        return len(removed)

    # ------------------------------------------------------------------ save

    @property
    def dirty(self) -> bool:
        """True when there are changes not yet saved."""
        return self._dirty or self._has_delta()

    def mark_dirty(self) -> None:
        """Record a change made outside the store's methods (e.g. document metadata), for :attr:`dirty`."""
        self.ensure_writable()
        self._dirty = True

    def save(self, path: str | os.PathLike | None = None) -> Path:
        """Persist the changes since the last save atomically: one new segment, a generation, then the manifest.

        ``path`` saves an in-memory store to a new directory (which becomes its
        path). Older segments are not touched; the merge policy may then merge
        the newest ones (:mod:`momoka.store.segments`).
        """
        if path is not None and (self.path is None or Path(path) != self.path):
            if self.path is not None:
                raise StoreError("this store already has a directory; copy it instead of saving elsewhere")
            root = Path(path)
            if root.is_dir() and any(p.name != LOCK for p in root.iterdir()):
                if (root / MANIFEST).exists():
                    raise StoreError(f"{root} is already a momoka store; refusing to overwrite it")
                raise StoreError(f"{root} is a non-empty directory that is not a momoka store; refusing to use it")
            root.mkdir(parents=True, exist_ok=True)
            self.path = root
            self._acquire()
        if self.path is None:
            raise StoreError("an in-memory store needs a path to save to")
        self.ensure_writable()
        if self._torn is not None:
            raise StoreError(f"store {self.path}: {self._torn}; its changes since the last commit cannot be saved "
                             "(the last commit holds every document): close it and open the store again")
        root = self.path
        tmps: list[Path] = []
        try:
            return self._save(root, tmps)
        except OSError as exc:
            for t in tmps:
                shutil.rmtree(t, ignore_errors=True) if t.is_dir() else t.unlink(missing_ok=True)
            raise StoreError(f"cannot save store {root}: {os_reason(exc)}; nothing was changed") from None

    def _next_segment(self, root: Path) -> str:
        """The name of the next segment: numbers are never reused, even by a store built over an old one."""
        taken = [int(p.name[4:10]) for p in root.iterdir() if re.fullmatch(r"seg-\d{6}", p.name)]
        n = max([int(self.manifest.get("next_segment") or 1)] + [t + 1 for t in taken])
        self.manifest["next_segment"] = n + 1
        return segment_name(n)

    def _new_segment(self, root: Path, tmps: list[Path]) -> tuple[str, Path]:
        """A temporary folder for a new segment: ``(name, folder)``."""
        self._clean_leftovers()
        name = self._next_segment(root)
        tmp = root / f"{name}.tmp-{os.getpid()}"
        tmps.append(tmp)
        tmp.mkdir()
        return name, tmp

    def _save(self, root: Path, tmps: list[Path]) -> Path:
        self._clean_leftovers()
        keys = {a.key for a in self._all()} | {DOCS}
        segments = [dict(sg, parts={k: v for k, v in sg["parts"].items() if k in keys}) for sg in self.segments]
        job = self._merger.finished()  # a background merge that finished: committed with this save
        if job is not None:
            segments = self._with_merge(job, segments, tmps)
        written: list = []
        new = None
        if self._has_delta():
            sname, sdir = self._new_segment(root, tmps)
            parts: dict[str, dict] = {}
            files = self._write_documents(sdir, self._docs_dirty, self._docs_deleted)
            if files:
                parts[DOCS] = {rel: file_record(sdir / rel) for rel in files}
            for art in self._all():
                if art.has_delta():
                    written.append(art)
                    rels = art.write_delta(sdir)
                    if rels:
                        known = art.written_records() if hasattr(art, "written_records") else {}
                        parts[art.key] = {rel: known.get(rel) or file_record(sdir / rel) for rel in rels}
            segments.append({"name": sname, "level": 0, "base": self.chunks._saved, "end": self.n_slots,
                             "parts": parts})
            new = (sname, sdir)
        self._commit(root, tmps, new, segments)
        for art in written:
            art.committed()
        self._docs_dirty.clear()
        self._docs_deleted.clear()
        self._dirty = False
        self._merged(job)
        try:
            if job is not None and job.error is not None:
                raise job.error
            self._merge_policy(root, self.merge_background)
        except OSError as exc:  # the commit stands; the merge is tried again after the next one
            warnings.warn(f"store {root}: merging segments failed ({os_reason(exc)}); the commit is saved and the "
                          "merge is tried again at the next save", StoreWarning, stacklevel=3)
        return root

    def _commit(self, root: Path, tmps: list[Path], new: tuple[str, Path] | None, segments: list[dict]) -> None:
        """Put the new segment in place (fsynced), write the generation naming ``segments`` and commit the
        manifest naming it; then delete what no kept generation uses."""
        if new is not None:
            sname, sdir = new
            for d, _, _ in os.walk(sdir, topdown=False):
                fsync_dir(Path(d))
            final = root / sname
            if final.exists():  # a leftover of a crashed save that never reached the manifest
                shutil.rmtree(final)
            os.rename(sdir, final)
            tmps[tmps.index(sdir)] = final  # removed again if the commit fails
        gen = int(self.manifest.get("generation") or 0) + 1
        name = f"gen-{gen:06d}"
        gtmp = root / f"{name}.tmp-{os.getpid()}"
        if gtmp.exists():
            shutil.rmtree(gtmp)
        tmps.append(gtmp)
        gtmp.mkdir()
        write_lease_file(gtmp)
        manifest = self._manifest_for(gen, name, segments)
        write_file(gtmp / MANIFEST, _manifest_bytes(manifest))  # the generation's own copy (for clean-up)
        fsync_dir(gtmp)
        gfinal = root / name
        if gfinal.exists():
            shutil.rmtree(gfinal)
        os.rename(gtmp, gfinal)
        tmps[tmps.index(gtmp)] = gfinal
        fsync_dir(root)
        lease = Lease.take(gfinal)  # before anyone else can see the new generation
        try:
            mtmp = root / f"{MANIFEST}.tmp-{os.getpid()}"
            tmps.append(mtmp)
            write_file(mtmp, _manifest_bytes(manifest))
            os.replace(mtmp, root / MANIFEST)  # the commit
        except BaseException:
            lease.release()
            raise
        tmps.clear()  # committed
        previous = self.manifest.get("dir")
        if self._lease is not None:
            self._lease.release()
        self._lease = lease
        fsync_dir(root)
        self.manifest = manifest
        self.segments = segments
        self._clean_old(keep={name, previous})

    def _point_parts(self) -> None:
        """Point every artifact at its parts in the current segments (after a save or merge)."""
        trusted = None
        if self._verified is not None:  # what was verified at open, and what this object wrote since
            trusted = set(self._verified) | {f"{sg['name']}/{rel}" for sg in self.segments if sg["name"] not in self._opened
                                             for files in sg["parts"].values() for rel in files}
        for art in self._all():
            art.set_parts(self._parts_of(art.key, self.path, self.segments, trusted))

    @property
    def merge_factor(self) -> int:
        """Segments of one level merged together after a commit (the :attr:`merge_policy`'s ``factor``)."""
        return self.merge_policy.factor

    @merge_factor.setter
    def merge_factor(self, factor: int) -> None:
        self.merge_policy = dataclasses.replace(self.merge_policy, factor=factor)

    def segment_stats(self) -> list[SegmentStats]:
        """What the merge policy is told of each live segment, oldest first: its level, its rows live when it
        was written (read from its chunk columns, once per segment) and how many of them are deleted now."""
        out = []
        for sg in self.segments:
            lo, hi = int(sg.get("base", 0)), int(sg.get("end", 0))
            rows = self._written_live.get(sg["name"])
            if rows is None:
                rows = hi - lo
                files = sg["parts"].get(self.chunks.key) or {}
                if "chunks/live.npy" in files and hi > lo:
                    live = np.load(self.path / sg["name"] / "chunks/live.npy", allow_pickle=False)
                    rows = int(np.count_nonzero(live))
                self._written_live[sg["name"]] = rows
            out.append(SegmentStats(level=int(sg.get("level", 0)), rows=rows,
                                    deleted=max(0, rows - self.chunks.live_count(lo, hi))))
        return out

    def _next_run(self) -> tuple[int, int] | None:
        """The run of segments the merge policy asks to merge now (None: nothing)."""
        policy = self.merge_policy
        if policy.deleted_share is None:  # the log rule needs the levels only: no segment file is read
            return policy.next_merge([SegmentStats(level=int(sg.get("level", 0))) for sg in self.segments])
        return policy.next_merge(self.segment_stats())

    def _merge_policy(self, root: Path, background: bool) -> None:
        """Start the merge the policy asks for in the background (unless one runs: the next is chosen after
        it is committed), or run its merges here, each a commit of its own, while it asks for one."""
        while not self._merger.busy:
            run = self._next_run()
            if run is None:
                return
            job = self._merge_job(root, *run, keep_level=run[1] - run[0] == 1)
            if background:
                self._merger.start(job)
                return
            job.run()
            self._commit_merge(job)

    def _merge_job(self, root: Path, first: int, stop: int, keep_level: bool = False) -> MergeJob:
        """A merge of the current segments ``first..stop`` into a new segment (not started)."""
        return MergeJob(root, self.manifest, first, stop, self._next_segment(root), Snapshot._bare,
                        clean=first == 0 and stop == len(self.segments), keep_level=keep_level)

    def wait_merges(self, commit: bool = True) -> bool:
        """Wait for the background merge, if one runs, and commit its result (``commit``; else drop it).

        Returns True when a merge was committed. Unsaved changes are not saved: with any, the result waits
        for the next save. A merge that failed on a file system error warns (:class:`StoreWarning`) and is
        tried again after a later commit; any other failure is raised.
        """
        self._merger.wait()
        if commit and self._has_delta():
            return False  # the next save commits it
        job = self._merger.finished()
        if job is None:
            return False
        if job.error is None and commit and self._lock is not None:
            try:
                return self._commit_merge(job)
            except OSError as exc:
                job.error = exc
        job.discard()
        if isinstance(job.error, OSError):
            warnings.warn(f"store {self.path}: merging segments failed ({os_reason(job.error)}); the commits are "
                          "saved and the merge is tried again after the next one", StoreWarning, stacklevel=2)
        elif job.error is not None:
            raise job.error
        return False

    def merge(self, everything: bool = True) -> bool:
        """Merge segments now: all of them into one (``everything``), else as the merge policy asks.

        Returns True when something was merged. Unsaved changes are saved first and a background merge is
        waited for. A store that a full merge left in one segment has nothing to merge.
        """
        self.ensure_writable()
        if self.path is None:
            raise StoreError("an in-memory store has no segments to merge; save it first")
        if self.dirty:
            self.save()
        before = [sg["name"] for sg in self.segments]
        try:
            self.wait_merges()
            if everything:
                if len(self.segments) > 1 or (self.segments and not self.segments[0].get("clean")):
                    job = self._merge_job(self.path, 0, len(self.segments))
                    job.run()
                    self._commit_merge(job)
            else:
                self._merge_policy(self.path, background=False)
        except OSError as exc:
            raise StoreError(f"cannot merge store {self.path}: {os_reason(exc)}; nothing was changed") from None
        return [sg["name"] for sg in self.segments] != before

    def _with_merge(self, job: MergeJob, segments: list[dict], tmps: list[Path]) -> list[dict]:
        """``segments`` with the run ``job`` merged replaced by its segment (moved into place; listed in ``tmps``
        so that a failed commit removes it). Segments committed since the job started stay after it, with
        their tombstones. A failed job, or one whose run is no longer there, is dropped: ``segments``."""
        names = [sg["name"] for sg in segments]
        k = len(job.names)
        at = next((i for i in range(len(names) - k + 1) if names[i : i + k] == job.names), None)
        if job.entry is None or at is None:
            job.discard()
            return segments
        run = segments[at : at + k]
        # parts of artifacts removed (or removed and made anew) since the job started are not taken over
        entry = dict(job.entry, parts={key: v for key, v in job.entry["parts"].items()
                                       if any(key in sg["parts"] for sg in run)})
        if not (at == 0 and k == len(segments)):
            entry.pop("clean", None)
        final = self.path / job.name
        if final.exists():  # a leftover of a crashed save that never reached the manifest
            shutil.rmtree(final)
        os.rename(job.folder, final)
        tmps.append(final)
        job.taken = True
        return segments[:at] + [entry] + segments[at + k :]

    def _commit_merge(self, job: MergeJob) -> bool:
        """Commit the result of ``job`` alone (no unsaved changes); True when it was committed."""
        if job.error is not None:
            raise job.error
        tmps: list[Path] = []
        try:
            segments = self._with_merge(job, self.segments, tmps)
            if not job.taken:
                return False
            self._commit(self.path, tmps, None, segments)
        except BaseException:
            for t in tmps:
                shutil.rmtree(t, ignore_errors=True) if t.is_dir() else t.unlink(missing_ok=True)
            raise
        self._merged(job)
        return True

    def _merged(self, job: MergeJob | None) -> None:
        """After a commit (that took the result of ``job`` over, if not None): point every artifact at its parts."""
        if job is not None and job.taken:
            for art in self._all():
                art.merged_into(job.names, job.name)
        self._point_parts()

    def _manifest_for(self, gen: int, name: str, segments: list) -> dict:
        """The manifest naming generation ``name`` and its ``segments`` (with its checksum)."""
        manifest = {k: v for k, v in self.manifest.items() if k not in ("embedder", "bm25", "vector_dtype")}
        manifest["pipeline"] = self.pipeline.to_dict()  # the one place the manifest's pipeline is written
        manifest["hnsw"] = dict(DEFAULT_HNSW, **(manifest.get("hnsw") or {}))
        manifest.update({
            "version": FORMAT_VERSION,
            "generation": gen,
            "dir": name,
            "previous": self.manifest.get("dir"),
            "updated": _now(),
            "momoka_version": _momoka_version(),
            "counts": {"documents": len(self.documents), "chunks": self.n_chunks, "slots": self.n_slots},
            "artifacts": [a.entry() for a in self._all()],
            "segments": segments,
        })
        manifest.pop("checksum", None)
        manifest["checksum"] = manifest_checksum(manifest)
        return manifest

    def remove_artifact(self, kind: str, name: str) -> None:
        """Drop a view, relation or node table (kind: vectors, bm25, relation, nodes), e.g. to rebuild it."""
        super().remove_artifact(kind, name)
        key = f"{kind}/{name}"
        for sg in self.segments:  # its parts leave the store at the next save
            sg["parts"].pop(key, None)

    def _clean_leftovers(self) -> None:
        """Remove temporary files of crashed saves and merges (we hold the lock: none is in progress but the
        background merge of this store)."""
        merger = getattr(self, "_merger", None)
        running = merger.job.folder if merger is not None and merger.job is not None else None
        for p in self.path.iterdir():
            if ".tmp-" in p.name and p != running:
                shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink(missing_ok=True)

    def staging(self) -> Path:
        """A new, empty folder under ``STORE/staging/`` where other processes (Ray workers) write parts that this
        writer adopts (:meth:`VectorView.stage <momoka.store.vectors.VectorView.stage>`: the next save moves
        them into its segment). It is on the store's file system, so adopting a part is a rename. Whatever is
        left in it is deleted when the writer lock is next taken (a killed run's parts are never adopted)."""
        self.ensure_writable()
        if self.path is None:
            raise StoreError("an in-memory store has no staging folder; save it first")
        root = self.path / STAGING
        root.mkdir(exist_ok=True)
        return Path(tempfile.mkdtemp(prefix="run-", dir=root))

    def _clean_staging(self) -> None:
        """Remove ``STORE/staging/``: parts written for an earlier writer and never adopted."""
        if self.path is not None:
            shutil.rmtree(self.path / STAGING, ignore_errors=True)

    def _clean_old(self, keep: set) -> None:
        """Delete the generations not in ``keep`` that no reader leases (leased ones go at a later save).

        ``keep`` holds the new generation and the previous one, for readers of older momoka versions,
        which take no lease."""
        root = self.path
        for p in root.iterdir():
            if p.is_dir() and p.name.startswith("gen-") and ".tmp-" not in p.name and p.name not in keep:
                delete_unleased(p)
        # segments go once no generation left (the kept ones, those readers lease) names them
        used = {sg["name"] for sg in self.segments}
        for p in root.iterdir():
            if p.is_dir() and re.fullmatch(r"gen-\d{6}", p.name) and p.name != self.manifest.get("dir"):
                try:
                    m = json.loads((p / MANIFEST).read_text(encoding="utf-8"))
                except FileNotFoundError:
                    continue  # a generation of format 1 or 2: its files are its own
                except (OSError, ValueError):
                    return  # unreadable: delete no segment this time
                used.update(sg.get("name") for sg in m.get("segments") or [])
        for p in root.iterdir():
            if p.is_dir() and re.fullmatch(r"seg-\d{6}", p.name) and p.name not in used:
                shutil.rmtree(p, ignore_errors=True)
