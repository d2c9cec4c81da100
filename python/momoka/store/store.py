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

Writes are atomic and append-only: :meth:`StoreWriter.save <momoka.store.writer.StoreWriter.save>` writes one new segment
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

Readers and the writer are apart (as tantivy's ``IndexReader`` and ``IndexWriter``):
``Store.open(path)`` returns a :class:`~momoka.store.snapshot.Snapshot`, one leased generation with
the read API only (asked to write, it raises :class:`~momoka.errors.ReadOnlyError`; its
``refresh()`` returns a new snapshot of the newest commit); ``Store.create`` and
``Store.open(path, writable=True)`` return the :class:`~momoka.store.writer.StoreWriter`, which
holds the lock (one writer at a time: a second gets :class:`~momoka.errors.StoreLockedError`; the
kernel drops the lock when its process dies, so the lock of a killed writer is never stale),
applies changes, commits and merges. Readers take no writer lock, only a shared lease on their
generation. :class:`Store` is what both share: the loaded generation and the read API.
"""

from __future__ import annotations

import datetime as _dt
import errno
import json
import os
import re
from collections.abc import Iterable
from pathlib import Path

from .._version import __version__
from ..errors import InputError, ReadOnlyError, StoreCorruptedError, StoreError
from ..text.model import Chunk
from ._blocks import file_record
from ._io import jsonl, write_file
from .artifact import Part
from .documents import TrackedMeta
from .segments import DOCS, DOCS_DELETED, DOCS_FILE, STAGING
from .spec import PipelineSpec
from ._lease import Lease
from ._manifest import (FORMAT_NAME, RAW_VIEW, FORMAT_VERSION, LOCK, MANIFEST, check_embedder, embedder_of,
                        read_manifest)
from ._kinds import KINDS, ArtifactRegistry
from ._v1 import load_v1
from ._v2 import load_v2
from ._verify import check_on_open, missing
from .artifact import Artifact
from .bm25_view import DEFAULT_BM25, BM25View
from .chunk_table import ChunkTable
from .documents import DocEntry
from .node_table import NodeTable
from .relations import Relation
from .vectors import DEFAULT_HNSW, VectorView

__all__ = ["DEFAULT_BM25", "DEFAULT_HNSW", "FORMAT_NAME", "FORMAT_VERSION", "MANIFEST", "RAW_VIEW", "DocEntry", "Store", "check_embedder", "embedder_of", "read_manifest"]



def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()


def _momoka_version() -> str:
    return __version__


#: Tries to open a store while writers keep committing before it fails.
_ATTEMPTS = 8


def _leftover(name: str) -> bool:
    """Files a writer leaves in a store directory before its first manifest: the lock, generations, segments,
    staged parts."""
    return name in (LOCK, STAGING) or ".tmp-" in name or bool(re.fullmatch(r"(gen|seg)-\d{6}", name))


#: The classes :meth:`Store.create` and :meth:`Store.open` return: ``"reader"`` (:class:`~momoka.store.snapshot.Snapshot`)
#: and ``"writer"`` (:class:`~momoka.store.writer.StoreWriter`); both subclass :class:`Store` (and the package
#: imports both), so this module needs neither.
_ROLES: dict[str, type] = {}


def _manifest_bytes(manifest: dict) -> bytes:
    return (json.dumps(manifest, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


class Store(ArtifactRegistry):
    """A momoka store directory: documents, the chunk table and named artifacts, as one generation loaded.

    ``Store.create(...)`` makes a new store and ``Store.open(path, writable=True)`` opens one for
    writing: both return the :class:`~momoka.store.writer.StoreWriter`. ``Store.open(path)`` opens it
    for reading: a :class:`~momoka.store.snapshot.Snapshot`, which refuses every change
    (:class:`~momoka.errors.ReadOnlyError`). This class holds what both share: the loaded generation
    (documents, chunk table, artifacts, segments, the lease) and the read API.
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
        self._lease: Lease | None = None  # on the generation this store loaded (see refresh)
        # Files (paths in the store) verified when the loaded generation was opened, and the segments it
        # held; files of other segments were written by this object. None: nothing was read from disk.
        self._verified: set[str] | None = None
        self._opened: set[str] = set()
        self._pipeline: PipelineSpec | None = None  # read from the manifest on first use

    @property
    def pipeline(self) -> PipelineSpec:
        """The pipeline that fills this store (:class:`~momoka.store.spec.PipelineSpec`), as its manifest
        records it; a writer's next commit writes it back (the one place that writes the manifest's pipeline)."""
        if self._pipeline is None:
            self._pipeline = PipelineSpec.from_dict(self.manifest.get("pipeline"))
        return self._pipeline

    @pipeline.setter
    def pipeline(self, spec: PipelineSpec) -> None:
        self.ensure_writable()
        self._pipeline = spec

    # ------------------------------------------------------------------ create / open

    def __init_subclass__(cls, role: str | None = None, **kwargs):
        super().__init_subclass__(**kwargs)
        if role is not None:  # the reader and the writer register themselves (they import this module)
            _ROLES[role] = cls

    @classmethod
    def create(cls, path: str | os.PathLike | None, *, chunker: dict | None = None, hnsw: dict | None = None,
               overwrite: bool = False, extra: dict | None = None) -> Store:
        """A new, empty store and its writer (see :meth:`StoreWriter.create
        <momoka.store.writer.StoreWriter.create>`; ``path=None``: in memory only)."""
        return _ROLES["writer"].create(path, chunker=chunker, hnsw=hnsw, overwrite=overwrite, extra=extra)

    @classmethod
    def open(cls, path: str | os.PathLike, *, writable: bool = False) -> Store:
        """Open the store at ``path`` (format version 3, or 2 or 1): for reading, a
        :class:`~momoka.store.snapshot.Snapshot` of its newest commit; ``writable=True``: its
        :class:`~momoka.store.writer.StoreWriter` (taking the writer lock now)."""
        return _ROLES["writer" if writable else "reader"].open(path)

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
            self._pipeline = None  # (that of the manifest loaded)
            return
        raise StoreError(f"store {root}: a writer committed during each of {_ATTEMPTS} attempts to open it; try again")

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
        did, changed = e.doc_id, self._meta_changed
        if isinstance(e.metadata, TrackedMeta):
            e.metadata._changed = lambda: changed(did)
        else:
            e.metadata = TrackedMeta(e.metadata, lambda: changed(did))

    def _meta_changed(self, doc_id: str) -> None:
        """Called before a document's metadata changes: only a writer allows it."""
        raise self._read_only("change document metadata")

    # ------------------------------------------------------------------ reading, not writing

    @property
    def writable(self) -> bool:
        """True when this object may change the store (a writer holding the lock, or an in-memory store)."""
        return False

    def _read_only(self, what: str) -> ReadOnlyError:
        where = f"store {self.path}" if self.path is not None else "this store"
        return ReadOnlyError(f"cannot {what}: {where} is open for reading (a snapshot); open it for writing "
                             "(Store.open(path, writable=True), Index.open(path, writable=True)) to change it")

    def ensure_writable(self) -> None:
        """Refuse (:class:`~momoka.errors.ReadOnlyError`): this object only reads (a writer takes its lock here)."""
        raise self._read_only("change it")

    @property
    def dirty(self) -> bool:
        """True when there are changes not yet saved (never, for a reader)."""
        return False

    def close(self) -> None:
        """Release the lease on the loaded generation (and a writer's lock)."""
        self._release()

    def _release(self) -> None:
        if self._lease is not None:
            self._lease.release()
            self._lease = None

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


    def _has_delta(self) -> bool:
        """True when a save would write a segment (documents, rows or tombstones changed)."""
        return bool(self._docs_dirty or self._docs_deleted) or any(a.has_delta() for a in self._all())

    def _all(self) -> list[Artifact]:
        return [self.chunks] + [a for kind in KINDS for a in self._artifacts[kind].values()]


    # ------------------------------------------------------------------ writing a merged segment

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


