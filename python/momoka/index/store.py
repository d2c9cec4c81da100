"""The persistent store: a directory holding chunks, vectors, the HNSW graph and the BM25 index.

Layout::

    STORE/
      manifest.json          format, version, generation, models, chunker, parameters, counts
      gen-000007/            the files of one generation (written whole, then renamed)
        documents.jsonl      one line per document: doc_id, title, source, length, chunk ids
        chunks.jsonl         one line per chunk: id, doc_id, index, start, end, paragraph,
                             sentence, section, text, metadata
        vectors.npy          (n_chunks, dim) float32 or float16, rows in chunks.jsonl order
        hnsw.bin             hnswlib index (inner-product space, labels = chunk ids)
        bm25.bin             native BM25 index (document ids = chunk ids)
      .lock                  writer lock (flock; holds the writer's pid)

Writes are atomic: :meth:`Store.save` writes a new generation into a
temporary folder, fsyncs it, renames it to ``gen-N``, then replaces
``manifest.json`` (temporary file + rename). The manifest is written last and
names its generation, so a crash or kill at any point leaves the store at its
last saved state; leftovers are cleaned by the next writer. The previous
generation is kept (a reader that read the old manifest can still load it).

Chunk ids are global, dense and never reused: the BM25 index gives the same
ids in the same order, deleted chunks leave tombstones there (a few bytes
each) and are marked deleted in the HNSW graph, which is rebuilt without them
(compaction) at the next save.

One writer at a time: opening for writing takes an exclusive ``flock`` on
``.lock``; a second writer gets :class:`~momoka.errors.StoreLockedError`. The
kernel drops the lock when its process dies, so the lock of a killed writer
is never stale. Readers take no lock.
"""

from __future__ import annotations

import datetime as _dt
import errno
import json
import os
import shutil
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import (
    ConfigError,
    InputError,
    StoreError,
    StoreLockedError,
    StoreMismatchError,
    StoreVersionError,
)
from ..text.model import Chunk
from .bm25 import BM25

try:  # fcntl is POSIX-only
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]

#: Version of the store layout written by this momoka. Stores with a higher
#: version are refused (:class:`StoreVersionError`).
FORMAT_VERSION = 1
FORMAT_NAME = "momoka-store"
MANIFEST = "manifest.json"
LOCK = ".lock"

#: Default BM25 settings of a store: Okapi (rank_bm25's idf), Porter stemming, English stopwords.
DEFAULT_BM25 = {"k1": 1.5, "b": 0.75, "epsilon": 0.25, "idf": "okapi", "stem": True, "stopwords": "english"}
#: HNSW construction and search parameters.
DEFAULT_HNSW = {"M": 32, "ef_construction": 200, "ef_search": 128}
#: Reciprocal rank fusion constant.
RRF_K = 60


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


def _write_file(path: Path, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def _jsonl(rows: Iterable[dict]) -> bytes:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode("utf-8")


@dataclass
class DocEntry:
    """A document of the store: its metadata and the ids of its chunks."""

    doc_id: str
    title: str | None = None
    source: str | None = None
    length: int = 0
    chunk_ids: list[int] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict:
        d = {"doc_id": self.doc_id, "title": self.title, "source": self.source, "length": self.length,
             "chunk_ids": self.chunk_ids}
        if self.metadata:
            d["metadata"] = self.metadata
        return d


@dataclass(frozen=True)
class Hit:
    """One retrieved chunk: the :class:`~momoka.text.Chunk`, its score and rank.

    ``score`` is the cosine similarity (dense), the BM25 score (bm25) or the
    reciprocal-rank-fusion score (hybrid). ``chunk_id`` is the store's id.
    """

    chunk: Chunk
    score: float
    rank: int
    chunk_id: int
    method: str
    title: str | None = None

    @property
    def doc_id(self) -> str | None:
        return self.chunk.doc_id

    @property
    def start(self) -> int:
        return self.chunk.start

    @property
    def end(self) -> int:
        return self.chunk.end

    @property
    def text(self) -> str:
        return self.chunk.text

    @property
    def section(self) -> tuple[str, ...]:
        return self.chunk.section

    @property
    def span(self) -> tuple[str | None, int, int]:
        """``(doc_id, start, end)``, the form retrieval metrics take."""
        return (self.chunk.doc_id, self.chunk.start, self.chunk.end)

    def to_dict(self) -> dict:
        """A JSON-serialisable view (chunk fields plus score, rank, method, title)."""
        d = self.chunk.to_dict()
        d.update({"rank": self.rank, "score": self.score, "chunk_id": self.chunk_id, "method": self.method,
                  "title": self.title})
        return d


class _Lock:
    """An exclusive, non-blocking ``flock`` on ``STORE/.lock`` holding our pid."""

    def __init__(self, path: Path):
        self.path = path
        self.fd: int | None = None

    def acquire(self) -> None:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            if fcntl is not None:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                holder = ""
                try:
                    holder = self.path.read_text().strip()
                except OSError:
                    pass
                who = f"process {holder}" if holder else "another process"
                raise StoreLockedError(
                    f"store {self.path.parent} is open for writing by {who}; "
                    "close it first (readers need no lock)"
                ) from None
            raise
        # We hold the lock: any pid left in the file belonged to a dead writer.
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self.fd = fd

    def release(self) -> None:
        if self.fd is None:
            return
        try:
            os.ftruncate(self.fd, 0)
            if fcntl is not None:
                fcntl.flock(self.fd, fcntl.LOCK_UN)
        finally:
            os.close(self.fd)
            self.fd = None


def read_manifest(path: str | os.PathLike) -> dict:
    """Read and validate ``STORE/manifest.json``.

    Raises :class:`StoreError` when ``path`` is not a store,
    :class:`StoreVersionError` when it was written by a newer format.
    """
    root = Path(path)
    if not root.exists():
        raise StoreError(f"no store at {root} (the directory does not exist)")
    if not root.is_dir():
        raise StoreError(f"{root} is not a store (not a directory)")
    mf = root / MANIFEST
    if not mf.is_file():
        raise StoreError(f"{root} is not a momoka store (no {MANIFEST}); build one with `momoka index`")
    try:
        manifest = json.loads(mf.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise StoreError(f"{mf} is unreadable or not JSON: {exc}") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT_NAME:
        raise StoreError(f"{root} is not a momoka store ({MANIFEST} has no format '{FORMAT_NAME}')")
    version = manifest.get("version")
    if not isinstance(version, int):
        raise StoreError(f"{mf}: missing or invalid format version")
    if version > FORMAT_VERSION:
        raise StoreVersionError(
            f"store {root} has format version {version}, newer than this momoka supports ({FORMAT_VERSION}); "
            "upgrade momoka"
        )
    if version < 1:
        raise StoreVersionError(f"store {root} has unknown format version {version}")
    return manifest


class Store:
    """A momoka store directory, loaded in memory.

    Use :meth:`create` for a new store and :meth:`open` for an existing one.
    Changes (:meth:`add`, :meth:`delete`) apply in memory and are persisted
    by :meth:`save`. A store opened read-only becomes a writer on its first
    change (taking the lock then, and refusing if someone saved since).
    """

    def __init__(self, path: str | os.PathLike | None, manifest: dict):
        self.path = Path(path) if path is not None else None
        self.manifest = manifest
        self.documents: dict[str, DocEntry] = {}
        self.chunks: dict[int, dict] = {}
        self.n_slots = 0
        self.dim: int | None = manifest.get("embedder", {}).get("dim") if manifest.get("embedder") else None
        self._vectors: np.ndarray | None = None  # rows by chunk id (n_slots x dim), float32 or float16
        self._hnsw = None
        self._hnsw_deleted = 0  # marked-deleted elements in the graph
        self.bm25: BM25 | None = None
        self._lock: _Lock | None = None
        self._dirty = False

    # ------------------------------------------------------------------ create / open

    @classmethod
    def create(
        cls,
        path: str | os.PathLike | None,
        *,
        embedder: dict | None,
        chunker: dict | None = None,
        bm25: dict | None = None,
        vector_dtype: str = "float32",
        hnsw: dict | None = None,
        overwrite: bool = False,
        extra: dict | None = None,
    ) -> Store:
        """A new, empty store (``path=None``: in memory only, :meth:`save` needs a path).

        ``embedder``: ``{"model_id", "checksum", "dim"}`` or None for a BM25-only
        store. ``chunker``: ``{"name", "params"}``. ``bm25``: :class:`BM25`
        parameters (default :data:`DEFAULT_BM25`). Refuses a non-empty directory
        that is not a store, and an existing store unless ``overwrite``.
        """
        if vector_dtype not in ("float32", "float16"):
            raise ConfigError(f"vector_dtype must be 'float32' or 'float16', not {vector_dtype!r}")
        if embedder is not None:
            if not {"model_id", "checksum", "dim"} <= set(embedder):
                raise ConfigError("embedder info needs model_id, checksum and dim")
        bm25_params = dict(DEFAULT_BM25, **(bm25 or {}))
        hnsw_params = dict(DEFAULT_HNSW, **(hnsw or {}))
        manifest = {
            "format": FORMAT_NAME,
            "version": FORMAT_VERSION,
            "generation": 0,
            "dir": None,
            "created": _now(),
            "updated": None,
            "embedder": embedder,
            "chunker": chunker,
            "bm25": bm25_params,
            "hnsw": hnsw_params,
            "vector_dtype": vector_dtype,
            "counts": {"documents": 0, "chunks": 0, "slots": 0},
        }
        if extra:
            manifest["extra"] = extra
        store = cls(path, manifest)
        try:
            store.bm25 = BM25(**{k: v for k, v in bm25_params.items()})
        except TypeError as exc:
            raise ConfigError(f"bad BM25 parameters {bm25!r}: {exc}") from None
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
                elif any(p.name != LOCK for p in root.iterdir()):
                    raise StoreError(f"{root} is a non-empty directory that is not a momoka store; refusing to use it")
            root.mkdir(parents=True, exist_ok=True)
            store._acquire()
            store._dirty = True
        return store

    @classmethod
    def open(cls, path: str | os.PathLike, *, writable: bool = False, embedder: dict | None = None) -> Store:
        """Load the store at ``path``.

        ``writable=True`` takes the writer lock now (else on the first change).
        ``embedder`` (``{"model_id", "checksum"}``), when given, must match the
        store's: :class:`StoreMismatchError` otherwise.
        """
        root = Path(path)
        manifest = read_manifest(root)
        if embedder is not None:
            check_embedder(manifest, embedder, root)
        store = cls(root, manifest)
        if writable:
            store._acquire()
            manifest = read_manifest(root)  # re-read under the lock
            store.manifest = manifest
        for attempt in range(3):
            try:
                store._load(manifest)
                break
            except FileNotFoundError:
                # A writer replaced the generation between our reads: retry with the new manifest.
                if attempt == 2:
                    raise StoreError(f"store {root}: generation files are missing") from None
                manifest = read_manifest(root)
                store.manifest = manifest
        return store

    def _load(self, manifest: dict) -> None:
        root = self.path
        assert root is not None
        self.dim = manifest["embedder"]["dim"] if manifest.get("embedder") else None
        gen = manifest.get("dir")
        if gen is None:  # created, never saved with content
            self.bm25 = BM25(**manifest.get("bm25", DEFAULT_BM25))
            return
        gdir = root / gen
        if not gdir.is_dir():
            raise FileNotFoundError(gdir)
        try:
            documents: dict[str, DocEntry] = {}
            with open(gdir / "documents.jsonl", encoding="utf-8") as f:
                for line in f:
                    r = json.loads(line)
                    documents[r["doc_id"]] = DocEntry(r["doc_id"], r.get("title"), r.get("source"),
                                                      r.get("length", 0), list(r["chunk_ids"]),
                                                      r.get("metadata") or {})
            chunks: dict[int, dict] = {}
            with open(gdir / "chunks.jsonl", encoding="utf-8") as f:
                for line in f:
                    r = json.loads(line)
                    chunks[int(r["id"])] = r
            bm25 = BM25.load(gdir / "bm25.bin")
        except FileNotFoundError:
            raise
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise StoreError(f"store {root} is corrupted ({gen}): {exc}") from None
        n_slots = int(manifest["counts"]["slots"])
        if bm25.n_slots != n_slots or bm25.n_docs != len(chunks):
            raise StoreError(f"store {root} is corrupted: BM25 index and chunks disagree")
        self.documents, self.chunks, self.bm25, self.n_slots = documents, chunks, bm25, n_slots
        if self.dim is not None:
            try:
                vecs = np.load(gdir / "vectors.npy", allow_pickle=False)
            except FileNotFoundError:
                raise
            except (OSError, ValueError) as exc:
                raise StoreError(f"store {root} is corrupted (vectors): {exc}") from None
            if vecs.shape != (len(chunks), self.dim):
                raise StoreError(f"store {root} is corrupted: vectors {vecs.shape} for {len(chunks)} chunks")
            full = np.zeros((n_slots, self.dim), dtype=vecs.dtype)
            full[list(chunks)] = vecs
            self._vectors = full
            self._hnsw = self._load_hnsw(gdir / "hnsw.bin", len(chunks))

    def _load_hnsw(self, path: Path, n: int):
        import hnswlib

        ix = hnswlib.Index(space="ip", dim=self.dim)
        if n == 0:
            ix.init_index(max_elements=16, M=self.manifest["hnsw"]["M"],
                          ef_construction=self.manifest["hnsw"]["ef_construction"])
            return ix
        if not path.is_file():
            raise FileNotFoundError(path)
        try:
            ix.load_index(str(path), max_elements=max(n, 16))
        except RuntimeError as exc:
            raise StoreError(f"store {self.path} is corrupted (HNSW index): {exc}") from None
        if ix.get_current_count() != n:
            raise StoreError(f"store {self.path} is corrupted: HNSW holds {ix.get_current_count()} of {n} chunks")
        return ix

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
        """Release the writer lock (unsaved changes stay in memory only)."""
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

    # ------------------------------------------------------------------ contents

    @property
    def embedder_info(self) -> dict | None:
        """``{"model_id", "checksum", "dim"}`` of the store's embedder, or None (BM25 only)."""
        return self.manifest.get("embedder")

    @property
    def n_chunks(self) -> int:
        return len(self.chunks)

    def __len__(self) -> int:
        return len(self.documents)

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self.documents

    def chunk(self, chunk_id: int) -> Chunk:
        """The :class:`Chunk` with store id ``chunk_id``."""
        r = self.chunks[chunk_id]
        return Chunk(r["text"], r["start"], r["end"], r["doc_id"], r["index"], r["paragraph"], r["sentence"],
                     tuple(r.get("section") or ()), dict(r.get("metadata") or {}))

    def vectors(self, chunk_ids: Sequence[int]) -> np.ndarray:
        """Float32 vectors of the given chunks."""
        if self._vectors is None:
            raise StoreError("this store has no vectors (built without an embedder)")
        return self._vectors[np.asarray(chunk_ids, dtype=np.int64)].astype(np.float32)

    # ------------------------------------------------------------------ changes

    def add(self, documents: Sequence[dict], chunks: Sequence[Sequence[Chunk]],
            vectors: Sequence[np.ndarray | None] | None = None) -> list[int]:
        """Add documents with their chunks (and, with an embedder, one vector row per chunk).

        ``documents[i]`` is ``{"doc_id", "title", "source", "length", "metadata"}``,
        ``chunks[i]`` its chunks, ``vectors[i]`` a ``(len(chunks[i]), dim)`` array.
        Returns the new chunk ids. Raises :class:`InputError` for a doc_id
        already in the store (or given twice): nothing is added then.
        """
        self.ensure_writable()
        if len(chunks) != len(documents):
            raise InputError("one list of chunks per document is needed")
        seen: set[str] = set()
        for d in documents:
            did = d.get("doc_id")
            if not isinstance(did, str) or not did:
                raise InputError(f"document id must be a non-empty str, got {did!r}")
            if did in self.documents or did in seen:
                raise InputError(f"document {did!r} is already in the store; delete it first to replace it")
            seen.add(did)
        if self.dim is not None:
            if vectors is None or len(vectors) != len(documents):
                raise InputError("this store has an embedder: one vector array per document is needed")
            for d, cs, v in zip(documents, chunks, vectors):
                if v is None or np.asarray(v).shape != (len(cs), self.dim):
                    raise InputError(f"document {d['doc_id']!r}: vectors must have shape ({len(cs)}, {self.dim})")
        flat = [c for cs in chunks for c in cs]
        start = self.n_slots
        ids = list(range(start, start + len(flat)))
        # BM25 first: it is the only step that can fail on its own input.
        got = self.bm25.add([c.text for c in flat]) if flat else np.zeros(0, np.int64)
        if got.tolist() != ids:  # pragma: no cover - invariant
            raise StoreError("internal error: BM25 ids out of step with chunk ids")
        if self.dim is not None and flat:
            vecs = np.concatenate([np.asarray(v, dtype=np.float32) for v in vectors], axis=0)  # type: ignore[union-attr]
            dtype = np.float16 if self.manifest["vector_dtype"] == "float16" else np.float32
            old = self._vectors if self._vectors is not None else np.zeros((0, self.dim), dtype)
            self._vectors = np.concatenate([old, vecs.astype(dtype)], axis=0)
            self._hnsw_add(vecs, np.asarray(ids, dtype=np.int64))
        it = iter(ids)
        for d, cs in zip(documents, chunks):
            entry = DocEntry(d["doc_id"], d.get("title"), d.get("source"), int(d.get("length") or 0), [],
                             dict(d.get("metadata") or {}))
            for c in cs:
                cid = next(it)
                rec = c.to_dict()
                rec["id"] = cid
                rec["doc_id"] = d["doc_id"]
                rec.setdefault("metadata", {})
                self.chunks[cid] = rec
                entry.chunk_ids.append(cid)
            self.documents[entry.doc_id] = entry
        self.n_slots = start + len(flat)
        self._dirty = True
        return ids

    def _new_hnsw(self, capacity: int):
        import hnswlib

        h = self.manifest["hnsw"]
        ix = hnswlib.Index(space="ip", dim=self.dim)
        ix.init_index(max_elements=max(capacity, 16), M=h["M"], ef_construction=h["ef_construction"], random_seed=100)
        return ix

    def _hnsw_add(self, vecs: np.ndarray, ids: np.ndarray) -> None:
        if self._hnsw is None:
            self._hnsw = self._new_hnsw(len(ids))
        need = self._hnsw.get_current_count() + len(ids)
        if need > self._hnsw.get_max_elements():
            self._hnsw.resize_index(max(need, 2 * self._hnsw.get_max_elements()))
        self._hnsw.add_items(vecs, ids)

    def delete(self, doc_ids: Iterable[str]) -> int:
        """Delete documents (and their chunks); returns the number of chunks removed.

        Raises :class:`InputError` for an unknown doc_id (nothing is deleted then).
        """
        self.ensure_writable()
        doc_ids = list(doc_ids)
        unknown = [d for d in doc_ids if d not in self.documents]
        if unknown:
            raise InputError(f"unknown document id(s): {', '.join(map(repr, unknown[:5]))}")
        removed: list[int] = []
        for did in dict.fromkeys(doc_ids):
            entry = self.documents.pop(did)
            removed.extend(entry.chunk_ids)
        if removed:
            self.bm25.delete(removed)
            for cid in removed:
                del self.chunks[cid]
                if self._hnsw is not None:
                    self._hnsw.mark_deleted(cid)
                    self._hnsw_deleted += 1
        self._dirty = True
        return len(removed)

    # ------------------------------------------------------------------ save

    def save(self, path: str | os.PathLike | None = None) -> Path:
        """Persist the store atomically (a new generation, then the manifest).

        ``path`` saves an in-memory store to a new directory (which becomes its
        path). Compacts the HNSW graph when chunks were deleted.
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
        self._clean_leftovers()
        gen = int(self.manifest.get("generation") or 0) + 1
        name = f"gen-{gen:06d}"
        tmp = root / f"{name}.tmp-{os.getpid()}"
        if tmp.exists():
            shutil.rmtree(tmp)
        tmp.mkdir()
        ids = sorted(self.chunks)
        docs = sorted(self.documents.values(), key=lambda e: e.chunk_ids[0] if e.chunk_ids else -1)
        _write_file(tmp / "documents.jsonl", _jsonl(e.to_dict() for e in docs))
        _write_file(tmp / "chunks.jsonl", _jsonl(self.chunks[i] for i in ids))
        self.bm25.save(tmp / "bm25.bin")
        if self.dim is not None:
            vecs = self._vectors[ids] if self._vectors is not None else np.zeros((0, self.dim), np.float32)
            with open(tmp / "vectors.npy", "wb") as f:
                np.save(f, vecs, allow_pickle=False)
                f.flush()
                os.fsync(f.fileno())
            if self._hnsw_deleted and ids:
                # Compaction: rebuild the graph from the live vectors only.
                fresh = self._new_hnsw(len(ids))
                fresh.add_items(self._vectors[ids].astype(np.float32), np.asarray(ids, dtype=np.int64))
                self._hnsw = fresh
                self._hnsw_deleted = 0
            if ids:
                self._hnsw.save_index(str(tmp / "hnsw.bin"))
                with open(tmp / "hnsw.bin", "rb+") as f:
                    os.fsync(f.fileno())
        _fsync_dir(tmp)
        final = root / name
        if final.exists():  # a leftover of a crashed save that never reached the manifest
            shutil.rmtree(final)
        os.rename(tmp, final)
        _fsync_dir(root)
        previous = self.manifest.get("dir")
        manifest = dict(self.manifest)
        manifest.update({
            "generation": gen,
            "dir": name,
            "previous": previous,
            "updated": _now(),
            "momoka_version": _momoka_version(),
            "counts": {"documents": len(self.documents), "chunks": len(self.chunks), "slots": self.n_slots},
        })
        mtmp = root / f"{MANIFEST}.tmp-{os.getpid()}"
        _write_file(mtmp, (json.dumps(manifest, indent=2, ensure_ascii=False) + "\n").encode("utf-8"))
        os.replace(mtmp, root / MANIFEST)
        _fsync_dir(root)
        self.manifest = manifest
        self._dirty = False
        self._clean_old(keep={name, previous})
        return root

    def _clean_leftovers(self) -> None:
        """Remove temporary files of crashed saves (we hold the lock, so none is in progress)."""
        for p in self.path.iterdir():
            if ".tmp-" in p.name:
                shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink(missing_ok=True)

    def _clean_old(self, keep: set) -> None:
        for p in self.path.iterdir():
            if p.is_dir() and p.name.startswith("gen-") and ".tmp-" not in p.name and p.name not in keep:
                shutil.rmtree(p, ignore_errors=True)

    @property
    def dirty(self) -> bool:
        """True when there are changes not yet saved."""
        return self._dirty

    # ------------------------------------------------------------------ retrieval

    def _allowed(self, doc_ids: Iterable[str] | None) -> list[int] | None:
        if doc_ids is None:
            return None
        if isinstance(doc_ids, str):
            doc_ids = [doc_ids]
        doc_ids = list(doc_ids)
        unknown = [d for d in doc_ids if d not in self.documents]
        if unknown:
            raise InputError(f"unknown document id(s) in filter: {', '.join(map(repr, unknown[:5]))}")
        return sorted(c for d in doc_ids for c in self.documents[d].chunk_ids)

    def search_bm25(self, query: str, k: int, doc_ids: Iterable[str] | None = None) -> list[tuple[int, float]]:
        """Top-k ``(chunk_id, bm25 score)``; only chunks sharing a token with the query."""
        allowed = self._allowed(doc_ids)
        mask = None
        if allowed is not None:
            mask = np.zeros(self.n_slots, dtype=bool)
            mask[allowed] = True
        ids, scores = self.bm25.search(query, k, mask=mask)
        return list(zip(ids.tolist(), scores.tolist()))

    def search_dense(self, qvec: np.ndarray, k: int, doc_ids: Iterable[str] | None = None) -> list[tuple[int, float]]:
        """Top-k ``(chunk_id, cosine)`` for a query vector: HNSW, or exact over the filtered chunks."""
        if self.dim is None:
            raise StoreError("this store was built without an embedder: use method='bm25'")
        q = np.asarray(qvec, dtype=np.float32).reshape(-1)
        if q.shape[0] != self.dim:
            raise InputError(f"query vector has dimension {q.shape[0]}, the store {self.dim}")
        allowed = self._allowed(doc_ids)
        if allowed is not None or len(self.chunks) <= 2 * k:
            cand = allowed if allowed is not None else sorted(self.chunks)
            if not cand:
                return []
            sims = self._vectors[cand].astype(np.float32) @ q
            top = np.argsort(-sims, kind="stable")[:k]
            return [(int(cand[i]), float(sims[i])) for i in top]
        kk = min(k, len(self.chunks))
        self._hnsw.set_ef(max(self.manifest["hnsw"].get("ef_search", 128), 2 * kk))
        try:
            labels, dist = self._hnsw.knn_query(q[None, :], k=kk)
        except RuntimeError:  # hnswlib could not fill k results (tiny or heavily deleted graph): exact search
            cand = sorted(self.chunks)
            sims = self._vectors[cand].astype(np.float32) @ q
            top = np.argsort(-sims, kind="stable")[:k]
            return [(int(cand[i]), float(sims[i])) for i in top]
        # Equal scores come back in hnswlib's heap order; order them by chunk id, as the exact path does.
        return sorted(((int(l), float(1.0 - d)) for l, d in zip(labels[0], dist[0])), key=lambda t: (-t[1], t[0]))

    @staticmethod
    def fuse(rankings: Sequence[Sequence[tuple[int, float]]], k: int, rrf_k: int = RRF_K) -> list[tuple[int, float]]:
        """Reciprocal rank fusion: ``score(c) = sum over rankings of 1 / (rrf_k + rank)`` (rank from 1)."""
        score: dict[int, float] = {}
        first: dict[int, tuple[int, int]] = {}
        for r, ranking in enumerate(rankings):
            for rank, (cid, _) in enumerate(ranking, start=1):
                score[cid] = score.get(cid, 0.0) + 1.0 / (rrf_k + rank)
                first.setdefault(cid, (rank, r))
        order = sorted(score, key=lambda c: (-score[c], first[c]))
        return [(c, score[c]) for c in order[:k]]

    def hits(self, ranked: Sequence[tuple[int, float]], method: str) -> list[Hit]:
        """:class:`Hit` objects for ranked ``(chunk_id, score)`` pairs."""
        out = []
        for rank, (cid, s) in enumerate(ranked, start=1):
            c = self.chunk(cid)
            d = self.documents.get(c.doc_id)
            out.append(Hit(c, float(s), rank, cid, method, d.title if d else None))
        return out


def check_embedder(manifest: dict, embedder: dict, root: Path | str = "") -> None:
    """Raise :class:`StoreMismatchError` unless ``embedder`` is the store's embedder."""
    have = manifest.get("embedder")
    if have is None:
        return
    if embedder.get("model_id") != have.get("model_id") or embedder.get("checksum") != have.get("checksum"):
        raise StoreMismatchError(
            f"store {root} was built with embedder {have.get('model_id')} (sha256 {str(have.get('checksum'))[:12]}), "
            f"not {embedder.get('model_id')} (sha256 {str(embedder.get('checksum'))[:12]}); "
            "rebuild the store or use the same model"
        )


def _momoka_version() -> str:
    from .. import __version__

    return __version__
