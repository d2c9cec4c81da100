"""The persistent store: a directory of named, typed artifacts in atomic generations.

Layout (format version 3)::

    STORE/
      manifest.json          format, version, generation, dir, chunker, hnsw, pipeline, counts,
                             artifacts (kind, name, source, settings), segments (oldest first:
                             name, level, base..end chunk ids, parts: files with bytes + sha256)
      seg-000012/            the changes of one commit or merge (see :mod:`momoka.store.segments`)
        documents.jsonl      document entries added or changed: doc_id, title, source, length, chunk ids, metadata
        documents.deleted.json   ids of documents deleted
        chunks/              new chunk rows, columnar (see :mod:`momoka.store.chunk_table`), metadata, tombstones
        vectors/NAME.*       a dense view's new vectors (ids + rows) and tombstones
        hnsw/NAME.bin        their HNSW graph (hnswlib, inner product, labels = chunk ids), for large parts
        bm25/NAME.*          a native BM25 index of the view's new slots, and tombstones
        relations/NAME.*     relation rows set (CSR), and tombstones
        nodes/NAME.jsonl     node rows added (entities that relations can point at)
      gen-000007/            a generation: .lease (readers' shared locks) and manifest.json (its manifest)
      .lock                  writer lock (flock; holds the writer's pid)

Writes are atomic and append-only: :meth:`Store.save` writes one new segment
holding the changes since the last save (temporary name, fsync, rename; no
other segment is touched), then a generation folder naming the segments, then
replaces ``manifest.json`` (temporary file + rename). The manifest is written
last and names its generation, so a crash or kill at any point leaves the store
at its last saved state; leftovers are cleaned by the next writer. After a
commit, the merge policy may merge a run of segments into one
(:mod:`momoka.store.segments`): in a background thread that reads the committed
segments and writes a new one without holding up commits; the next save (or
:meth:`Store.close`) commits its result together with its own segment
(:mod:`momoka.store._merger`). Generations older than
the previous one are deleted by the save, except those a reader leases
(:mod:`momoka.store._lease`), and a segment once no generation left names it:
an open reader keeps answering from the generation it loaded until
:meth:`Store.refresh` or :meth:`Store.close`.

Chunk ids are global, dense and never reused: row ``i`` of the chunk table,
and the id of every vector, BM25 document and relation row, belongs to chunk
``i``. Deleted chunks leave dead rows (``live = False``) and tombstones in
every view; merging their segment drops their data.

Opening reads the manifest, the document entries and the chunk columns, and
memory-maps the vectors; BM25 indexes, HNSW graphs, relations, node tables and
chunk metadata are read on first use. Stores of format version 2 (every
artifact whole in one generation) and 1 (one ``chunks.jsonl``, ``vectors.npy``,
``hnsw.bin``, ``bm25.bin``) are read into memory and written as one segment by
the next save.

One writer at a time: opening for writing takes an exclusive ``flock`` on
``.lock``; a second writer gets :class:`~momoka.errors.StoreLockedError`. The
kernel drops the lock when its process dies, so the lock of a killed writer
is never stale. Readers take no writer lock, only a shared lease on their generation.

Length: about 800 lines, of which the layout above and the lifecycle (create, open,
lock, generations, save) are one unit; each artifact kind has its own module.
"""

from __future__ import annotations

import datetime as _dt
import errno
import json
import os
import re
import shutil
import warnings
from collections.abc import Iterable, Sequence
from pathlib import Path

from .._version import __version__
from ..errors import InputError, StoreCorruptedError, StoreError
from ..text.model import Chunk
from ._blocks import file_record
from ._io import fsync_dir, jsonl, write_file
from .artifact import Part
from .delta import apply_delta
from .documents import TrackedMeta
from .segments import DOCS, DOCS_DELETED, DOCS_FILE, merge_background, merge_factor, next_merge, segment_name
from ._merger import Merger, MergeJob
from ._lease import Lease, delete_unleased, write_lease_file
from ._manifest import (FORMAT_NAME, RAW_VIEW, FORMAT_VERSION, LOCK, MANIFEST, _Lock, check_embedder, embedder_of,
                        manifest_checksum, os_reason, read_manifest)
from ._kinds import KINDS, ArtifactRegistry
from ._v1 import load_v1
from ._v2 import load_v2
from ._verify import check_on_open, missing
from .artifact import Artifact, StoreWarning
from .bm25_view import DEFAULT_BM25, BM25View
from .chunk_table import ChunkTable
from .documents import DocEntry
from .node_table import NodeTable
from .relations import Relation
from .vectors import DEFAULT_HNSW, VectorView

__all__ = ["DEFAULT_BM25", "DEFAULT_HNSW", "FORMAT_NAME", "FORMAT_VERSION", "RAW_VIEW", "DocEntry", "Store",
           "check_embedder", "embedder_of", "read_manifest"]


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()


def _momoka_version() -> str:
    return __version__


#: Tries to open a store while writers keep committing before it fails.
_ATTEMPTS = 8


def _leftover(name: str) -> bool:
    """Files a writer leaves in a store directory before its first manifest: the lock, generations, segments."""
    return name == LOCK or ".tmp-" in name or bool(re.fullmatch(r"(gen|seg)-\d{6}", name))


def _manifest_bytes(manifest: dict) -> bytes:
    return (json.dumps(manifest, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


class Store(ArtifactRegistry):
    """A momoka store directory: documents, the chunk table and named artifacts.

    Use :meth:`create` for a new store and :meth:`open` for an existing one.
    Changes apply in memory and are persisted by :meth:`save`. A store opened
    read-only becomes a writer on its first change (taking the lock then, and
    refusing if someone saved since).
    """

    def __init__(self, path: str | os.PathLike | None, manifest: dict):
        self.path = Path(path) if path is not None else None
        self.manifest = manifest
        self.documents: dict[str, DocEntry] = {}
        self.chunks = ChunkTable(self)
        self._artifacts: dict[str, dict[str, Artifact]] = {k: {} for k in KINDS}
        self.segments: list[dict] = []  # the live segments of the loaded generation, oldest first
        self._docs_dirty: set[str] = set()  # documents added or changed since the last save
        self._docs_deleted: set[str] = set()  # ... and deleted
        #: Segments of one level merged together after a commit (``$MOMOKA_MERGE_FACTOR``, default 10).
        self.merge_factor = merge_factor()
        #: Run the merge policy's merges in a background thread (``$MOMOKA_MERGE_BACKGROUND``, default True);
        #: False: in the save that asks for them, each a commit of its own.
        self.merge_background = merge_background()
        self._merger = Merger()
        self._lock: _Lock | None = None
        self._lease: Lease | None = None  # on the generation this store loaded (see refresh)
        self._dirty = False
        # Files (paths in the store) verified when the loaded generation was opened, and the segments it
        # held; files of other segments were written by this object. None: nothing was read from disk.
        self._verified: set[str] | None = None
        self._opened: set[str] = set()

    # ------------------------------------------------------------------ create / open

    @classmethod
    def create(
        cls,
        path: str | os.PathLike | None,
        *,
        chunker: dict | None = None,
        hnsw: dict | None = None,
        overwrite: bool = False,
        extra: dict | None = None,
    ) -> Store:
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
    def open(cls, path: str | os.PathLike, *, writable: bool = False) -> Store:
        """Open the store at ``path`` (format version 3, or 2 or 1, which the next save writes as one segment).

        ``writable=True`` takes the writer lock now (else on the first change).
        """
        root = Path(path)
        manifest = read_manifest(root)
        store = cls(root, manifest)
        if writable:
            store._acquire()
            manifest = read_manifest(root)  # re-read under the lock
            store.manifest = manifest
        try:
            store._attach(manifest)
        except BaseException:
            store.close()
            raise
        return store

    def _attach(self, manifest: dict) -> None:
        """Lease and load the generation ``manifest`` names (re-reading the manifest when a writer replaced it)."""
        root = self.path
        for _ in range(_ATTEMPTS):
            gen = manifest.get("dir")
            lease = None
            try:
                lease = Lease.take(root / gen) if gen is not None else None
                self._load(manifest)
            except FileNotFoundError as exc:
                if lease is not None:
                    lease.release()
                newer = read_manifest(root)
                if newer.get("dir") == gen:  # not a writer's commit: a file of this generation is missing
                    raise missing(root, exc.filename or root / str(gen)) from None
                manifest = newer
                continue
            except BaseException:  # damaged or unreadable: the lease must not outlive the failed open
                if lease is not None:
                    lease.release()
                raise
            if self._lease is not None:
                self._lease.release()
            self._lease, self.manifest = lease, manifest
            return
        raise StoreError(f"store {root}: a writer committed during each of {_ATTEMPTS} attempts to open it; try again")

    def refresh(self) -> bool:
        """Move this reader to the store's newest commit; True when it moved.

        A reader keeps answering from the generation it loaded however many
        commits follow (it holds a lease on it, see :mod:`momoka.store._lease`);
        this re-reads the manifest and, when a newer generation was committed,
        loads it and lets the old one go. The writer (or an in-memory store)
        is always at its newest commit: False. Unsaved changes: StoreError.
        """
        if self.path is None or self.writable:
            return False
        if self.dirty:
            raise StoreError(f"store {self.path} has unsaved changes; save them before refreshing")
        manifest = read_manifest(self.path)
        if manifest.get("dir") == self.manifest.get("dir"):
            return False
        self._attach(manifest)
        return True

    def _load(self, manifest: dict) -> None:
        """Load the generation ``manifest`` names; the state changes only when all of it loaded."""
        root = self.path
        assert root is not None
        gen = manifest.get("dir")
        gdir = root / str(gen)
        if gen is not None and not gdir.is_dir():
            raise FileNotFoundError(errno.ENOENT, "generation folder is missing", str(gdir))
        version = int(manifest["version"])
        if gen is None or version < 3:
            self.documents, self.chunks, self.segments = {}, ChunkTable(self), []
            self._artifacts = {k: {} for k in KINDS}
            if gen is not None:
                (load_v1 if version < 2 else load_v2)(self, gdir, manifest)
                for art in self._all():
                    art.unsave()  # the next save writes everything as one segment
                self._docs_dirty = set(self.documents)
                self._track()
            return
        segments = [dict(sg, parts={k: dict(v) for k, v in (sg.get("parts") or {}).items()})
                    for sg in manifest.get("segments") or []]
        verified = check_on_open(root, segments)  # FileNotFoundError: handled by _attach()
        documents = self._read_documents(root, segments, verified)
        hnsw = manifest.get("hnsw")
        chunks, artifacts = ChunkTable(self), {k: {} for k in KINDS}
        makers = {"vectors": lambda e: VectorView(self, e["name"], embedder=e["embedder"],
                                                  dtype=e.get("dtype", "float32"), source=e.get("source"), hnsw=hnsw),
                  "bm25": lambda e: BM25View(self, e["name"], params=e.get("params"), source=e.get("source")),
                  "relation": lambda e: Relation(self, e["name"], ordered=e.get("ordered", True),
                                                 weighted=e.get("weighted", False),
                                                 target_table=e.get("target_table"), source=e.get("source")),
                  "nodes": lambda e: NodeTable(self, e["name"], e.get("source"), id_fields=e.get("id_fields"),
                                               doc_fields=e.get("doc_fields"))}
        try:
            for e in manifest.get("artifacts") or []:
                kind, name = e.get("kind"), e.get("name")
                if kind in makers:
                    artifacts[kind][name] = makers[kind](e)
                elif kind != "chunks":
                    raise StoreError(f"store {root} has an artifact of unknown kind {kind!r} ({name!r}); upgrade momoka")
        except (KeyError, TypeError) as exc:
            raise StoreCorruptedError(f"store {root} is corrupted: a bad artifact entry in the manifest ({exc})") from None
        chunks.load_parts(self._parts_of(chunks.key, root, segments, verified))
        for arts in artifacts.values():
            for art in arts.values():
                art.load_parts(self._parts_of(art.key, root, segments, verified))
        counts = manifest.get("counts") or {}
        if chunks.n_slots != counts.get("slots", chunks.n_slots) or len(documents) != counts.get(
                "documents", len(documents)):
            raise StoreCorruptedError(f"store {root} is corrupted: the chunk table or documents disagree with the manifest")
        self.documents, self.chunks, self._artifacts, self.segments = documents, chunks, artifacts, segments
        self._verified, self._opened = verified, {sg["name"] for sg in segments}
        self._docs_dirty, self._docs_deleted = set(), set()
        self._track()

    @staticmethod
    def _parts_of(key: str, root: Path, segments: list[dict], verified: set[str] | None = None) -> list[Part]:
        """The parts artifact ``key`` has in ``segments`` (folders of the store ``root``), oldest first.

        ``verified``: the files (paths in the store) verified at open; the parts check the others
        block by block as they are read (None: every file trusted)."""
        def unchecked(sg: dict) -> frozenset[str] | None:
            if verified is None:
                return None
            return frozenset(rel for rel in sg["parts"][key] if f"{sg['name']}/{rel}" not in verified)
        return [Part(sg["name"], root / sg["name"], sg["parts"][key], unchecked(sg))
                for sg in segments if key in sg["parts"]]

    def _read_documents(self, root: Path, segments: list[dict], verified: set[str] | None = None
                        ) -> dict[str, DocEntry]:
        """The document entries: every segment's, oldest first (a later entry or tombstone wins)."""
        documents: dict[str, DocEntry] = {}
        for part in self._parts_of(DOCS, root, segments, verified):
            p = part.folder / DOCS_DELETED
            try:
                if part.has(DOCS_DELETED):
                    part.check_whole(DOCS_DELETED, " (documents)")
                    for d in json.loads(p.read_text(encoding="utf-8")):
                        documents.pop(str(d), None)
                if part.has(DOCS_FILE):
                    p = part.folder / DOCS_FILE
                    part.check_whole(DOCS_FILE, " (documents)")
                    with open(p, encoding="utf-8") as f:
                        for line in f:
                            e = DocEntry.from_dict(json.loads(line))
                            documents[e.doc_id] = e
            except FileNotFoundError:
                raise
            except (OSError, ValueError, KeyError, TypeError) as exc:
                raise StoreCorruptedError(f"store {self.path} is corrupted ({p}): {exc}", p) from None
        return documents

    def _track(self) -> None:
        """Make every document's metadata tell the store when it changes."""
        for e in self.documents.values():
            self._track_entry(e)

    def _track_entry(self, e: DocEntry) -> None:
        if not isinstance(e.metadata, TrackedMeta):
            did, dirty = e.doc_id, self._docs_dirty
            e.metadata = TrackedMeta(e.metadata, lambda: dirty.add(did))

    # ------------------------------------------------------------------ locking

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
        if self._lease is not None:
            self._lease.release()
            self._lease = None
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):  # pragma: no cover - best effort
        try:
            self.close()
        except Exception:
            pass

    # ------------------------------------------------------------------ documents and chunks

    @property
    def n_chunks(self) -> int:
        """Number of live chunks."""
        return len(self.chunks)

    @property
    def n_slots(self) -> int:
        """Number of chunk ids ever given (live and deleted)."""
        return self.chunks.n_slots

    def __len__(self) -> int:
        return len(self.documents)

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self.documents

    def chunk(self, chunk_id: int) -> Chunk:
        """The :class:`Chunk` with store id ``chunk_id`` (KeyError when it is not live)."""
        return self.chunks.get(chunk_id)

    def chunk_ids_of(self, doc_ids: Iterable[str] | str) -> list[int]:
        """The chunk ids of these documents, ascending; InputError naming unknown ids."""
        if isinstance(doc_ids, str):
            doc_ids = [doc_ids]
        doc_ids = list(doc_ids)
        unknown = [d for d in doc_ids if d not in self.documents]
        if unknown:
            raise InputError(f"unknown document id(s) in filter: {', '.join(map(repr, unknown[:5]))}")
        return sorted({c for d in doc_ids for c in self.documents[d].chunk_ids})

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
        to follow the store's; returns the doc ids added. The next save writes it as one segment."""
        return apply_delta(self, delta)

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

    # ------------------------------------------------------------------ artifacts


    # ------------------------------------------------------------------ save

    @property
    def dirty(self) -> bool:
        """True when there are changes not yet saved."""
        return self._dirty or self._has_delta()

    def _has_delta(self) -> bool:
        """True when a save would write a segment (documents, rows or tombstones changed)."""
        return bool(self._docs_dirty or self._docs_deleted) or any(a.has_delta() for a in self._all())

    def mark_dirty(self) -> None:
        """Record a change made outside the store's methods (e.g. document metadata), for :attr:`dirty`."""
        self.ensure_writable()
        self._dirty = True

    def _all(self) -> list[Artifact]:
        return [self.chunks] + [a for kind in KINDS for a in self._artifacts[kind].values()]

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
                        parts[art.key] = {rel: file_record(sdir / rel) for rel in rels}
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

    def _write_documents(self, folder: Path, ids: Iterable[str], deleted: Iterable[str]) -> list[str]:
        """The document entries ``ids`` (those present) and tombstones ``deleted`` into a segment folder."""
        files = []
        docs = sorted((self.documents[d] for d in set(ids) if d in self.documents),
                      key=lambda e: (e.chunk_ids[0] if e.chunk_ids else -1, e.doc_id))
        if docs:
            write_file(folder / DOCS_FILE, jsonl(e.to_dict() for e in docs))
            files.append(DOCS_FILE)
        gone = sorted(set(deleted) - {e.doc_id for e in docs})
        if gone:
            write_file(folder / DOCS_DELETED, json.dumps(gone, ensure_ascii=False).encode("utf-8"))
            files.append(DOCS_DELETED)
        return files

    def _merge_policy(self, root: Path, background: bool) -> None:
        """Start the merge the policy asks for in the background (unless one runs: the next is chosen after
        it is committed), or run its merges here, each a commit of its own, while it asks for one."""
        while not self._merger.busy:
            run = next_merge(self.segments, self.merge_factor)
            if run is None:
                return
            job = self._merge_job(root, *run)
            if background:
                self._merger.start(job)
                return
            job.run()
            self._commit_merge(job)

    def _merge_job(self, root: Path, first: int, stop: int) -> MergeJob:
        """A merge of the current segments ``first..stop`` into a new segment (not started)."""
        return MergeJob(root, self.manifest, first, stop, self._next_segment(root), type(self)._snapshot,
                        clean=first == 0 and stop == len(self.segments))

    @classmethod
    def _snapshot(cls, root: Path, manifest: dict) -> Store:
        """A read-only store of the segments ``manifest`` names (no lock, no lease: the caller leases)."""
        store = cls(root, manifest)
        store._load(manifest)
        return store

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

    def _write_merge(self, folder: Path, name: str, first: int, stop: int) -> dict:
        """Write segments ``first..stop`` of this store as loaded (a snapshot nobody changes) merged into
        ``folder``, as segment ``name``: the current state of everything they held. Returns its entry."""
        root = self.path
        run = self.segments[first:stop]
        parts: dict[str, dict] = {}
        lo, hi = run[0].get("base", 0), run[-1].get("end", 0)
        ids, gone = self._run_documents(root, run)
        files = self._write_documents(folder, ids, gone)
        if files:
            parts[DOCS] = {rel: file_record(folder / rel) for rel in files}
        for art in self._all():
            mine = self._parts_of(art.key, root, run)
            if mine:
                rels = art.write_merged(folder, mine, lo, hi)
                if rels:
                    parts[art.key] = {rel: file_record(folder / rel) for rel in rels}
        return {"name": name, "level": max(sg.get("level", 0) for sg in run) + 1, "base": lo, "end": hi,
                "parts": parts}

    def _run_documents(self, root: Path, run: list[dict]) -> tuple[set[str], set[str]]:
        """The document ids a run of segments wrote entries or tombstones for."""
        ids: set[str] = set()
        gone: set[str] = set()
        for part in self._parts_of(DOCS, root, run):
            if part.has(DOCS_FILE):
                with open(part.path(DOCS_FILE, verify=True), encoding="utf-8") as f:
                    ids.update(json.loads(line)["doc_id"] for line in f)
            if part.has(DOCS_DELETED):
                gone.update(json.loads(part.path(DOCS_DELETED, verify=True).read_text(encoding="utf-8")))
        return ids, {d for d in ids | gone if d not in self.documents}

    def _manifest_for(self, gen: int, name: str, segments: list) -> dict:
        """The manifest naming generation ``name`` and its ``segments`` (with its checksum)."""
        manifest = {k: v for k, v in self.manifest.items() if k not in ("embedder", "bm25", "vector_dtype")}
        manifest.setdefault("pipeline", {})
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
