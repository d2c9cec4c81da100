"""Dense vector views: one row per chunk id, with an HNSW graph for approximate search.

Files in a generation::

    vectors/NAME.npy       (rows, dim) float32 or float16; row i belongs to chunk id i
                           (zeros where a chunk has no vector or was deleted)
    vectors/NAME.has.npy   bool per row: the chunk has a vector in this view
    hnsw/NAME.bin          hnswlib graph (inner-product space, labels = chunk ids);
                           absent while the view is empty

The rows are memory-mapped on open; the graph is read on first search. A
delete zeroes rows and marks them deleted in the graph, which is rebuilt from
the live rows (compaction) at the next save.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..errors import ConfigError, InputError, StoreCorruptedError
from ._io import check_native_write, fsync_file, write_npy
from .artifact import Artifact, StoreWarning

#: HNSW construction and search parameters.
DEFAULT_HNSW = {"M": 32, "ef_construction": 200, "ef_search": 128}
DTYPES = {"float32": np.float32, "float16": np.float16}
#: Graphs of at most this many rows are built on one thread (deterministic); larger ones in parallel.
DETERMINISTIC_ROWS = 20_000
#: Rows handed to hnswlib's ``add_items`` per call when a graph is built: each call inserts its
#: block on every core, and only one block is copied to float32 at a time.
INSERT_BLOCK = 65_536


def insert_threads(total_rows: int) -> int:
    """hnswlib ``num_threads`` for a graph of ``total_rows``: 1 up to DETERMINISTIC_ROWS, else all cores."""
    return 1 if total_rows <= DETERMINISTIC_ROWS else -1


def bulk_insert(index, rows: np.ndarray, ids: np.ndarray, total_rows: int) -> None:
    """Insert ``rows[ids]`` (labels ``ids``) into an hnswlib ``index`` in blocks of INSERT_BLOCK.

    Threads as :func:`insert_threads` says for ``total_rows``; on one thread the
    blocks go in in order, so the graph is the one a single ``add_items`` call
    would build.
    """
    threads = insert_threads(total_rows)
    whole = ids.size == len(rows) and (ids.size == 0 or (ids[0] == 0 and ids[-1] == ids.size - 1))
    for a in range(0, ids.size, INSERT_BLOCK):
        blk = ids[a : a + INSERT_BLOCK]
        # every row live: a slice of the (possibly memory-mapped) rows, no gather
        src = rows[a : a + blk.size] if whole else rows[blk]
        index.add_items(np.ascontiguousarray(src, dtype=np.float32), blk, num_threads=threads)


def check_embedder_info(embedder: object) -> dict:
    """``{"model_id", "checksum", "dim"}`` from an embedder info dict (ConfigError if incomplete)."""
    if not isinstance(embedder, dict) or not {"model_id", "checksum", "dim"} <= set(embedder):
        raise ConfigError("embedder info needs model_id, checksum and dim")
    dim = embedder["dim"]
    if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)) or dim < 1:
        raise ConfigError(f"embedder dim must be a positive integer, not {dim!r}")
    return {"model_id": str(embedder["model_id"]), "checksum": str(embedder["checksum"]), "dim": int(dim)}


class VectorView(Artifact):
    """A dense view: vectors by chunk id plus an HNSW graph over them.

    ``info`` is ``{"embedder": {model_id, checksum, dim}, "source": {...}}``,
    where ``source`` says what text was embedded (e.g. ``{"text": "chunk"}``).
    """

    kind = "vectors"

    def __init__(self, store, name: str, *, embedder: dict, dtype: str = "float32", source: dict | None = None,
                 hnsw: dict | None = None):
        super().__init__(store, name, source)
        if dtype not in DTYPES:
            raise ConfigError(f"vector dtype must be 'float32' or 'float16', not {dtype!r}")
        self.embedder = check_embedder_info(embedder)
        self.dim = self.embedder["dim"]
        self.dtype = dtype
        self.hnsw_params = dict(DEFAULT_HNSW, **(hnsw or {}))
        self._rows = np.zeros((0, self.dim), dtype=DTYPES[dtype])
        self._has = np.zeros(0, dtype=bool)
        self._owned = True
        self._graph: object | None = None  # hnswlib.Index, loaded lazily
        self._graph_on_disk = False  # an hnsw file is waiting to be read
        self._pending: set[int] = set()  # deleted while the graph was not loaded
        self._n_deleted = 0  # deletions since the last save (the graph needs compaction)

    @property
    def info(self) -> dict:
        """``{"embedder": {...}, "source": {...}}``."""
        return {"embedder": dict(self.embedder), "source": dict(self.source)}

    # -- loading -------------------------------------------------------------

    @classmethod
    def load(cls, store, gen_dir: Path, entry: dict, hnsw: dict | None = None) -> VectorView:
        """Open a saved view: rows memory-mapped, the graph left for the first search."""
        v = cls(store, entry["name"], embedder=entry["embedder"], dtype=entry.get("dtype", "float32"),
                source=entry.get("source"), hnsw=hnsw)
        v.attach(gen_dir, entry["files"])
        name = entry["name"]
        try:
            rows = np.load(Path(gen_dir) / f"vectors/{name}.npy", mmap_mode="r", allow_pickle=False)
            has = np.load(Path(gen_dir) / f"vectors/{name}.has.npy", allow_pickle=False)
        except FileNotFoundError:
            raise
        except (OSError, ValueError) as exc:
            raise StoreCorruptedError(f"store {gen_dir}: vector view {name!r} is corrupted: {exc}") from None
        if rows.ndim != 2 or rows.shape[1] != v.dim or len(has) != len(rows) or rows.dtype != DTYPES[v.dtype]:
            raise StoreCorruptedError(f"store {gen_dir}: vector view {name!r} is corrupted: rows {rows.shape} {rows.dtype}, "
                             f"dim {v.dim} {v.dtype}, {len(has)} flags")
        v._rows, v._has, v._owned = rows, np.asarray(has, dtype=bool), False
        v._graph_on_disk = f"hnsw/{name}.bin" in entry["files"]
        return v

    @classmethod
    def from_rows(cls, store, name: str, *, embedder: dict, rows: np.ndarray, has: np.ndarray,
                  source: dict | None = None, hnsw: dict | None = None, graph=None) -> VectorView:
        """A view from rows by chunk id (format version 1 migration); ``graph`` an hnswlib index or None."""
        dtype = "float16" if rows.dtype == np.float16 else "float32"
        v = cls(store, name, embedder=embedder, dtype=dtype, source=source, hnsw=hnsw)
        v._rows, v._has = np.asarray(rows, dtype=DTYPES[dtype]), np.asarray(has, dtype=bool)
        v._graph = graph
        return v

    def loaded(self) -> bool:
        return not self._graph_on_disk

    def _new_graph(self, capacity: int):
        import hnswlib

        ix = hnswlib.Index(space="ip", dim=self.dim)
        ix.init_index(max_elements=max(capacity, 16), M=self.hnsw_params["M"],
                      ef_construction=self.hnsw_params["ef_construction"], random_seed=100)
        return ix

    def graph(self):
        """The hnswlib index (read from disk on first use)."""
        if self._graph is None:
            n = self.n_rows
            if self._graph_on_disk:
                ix = self._read_graph(n)
                self._graph_on_disk = False
                self._pending.clear()
                if ix is not None:
                    self._graph = ix
                    return ix
                n = self.n_rows
            if self._graph is None:
                ix = self._new_graph(n)
                if n:
                    # One thread up to DETERMINISTIC_ROWS: the same rows always give the same graph (a
                    # rebuilt graph answers like the saved one); every core above it, for speed.
                    bulk_insert(ix, self._rows, self.ids(), n)
                self._graph = ix
        return self._graph

    def _read_graph(self, n: int):
        """The saved graph, validated (sha256, then its row count) before and after hnswlib reads it.

        A damaged graph is not read: it is rebuilt from the vectors (with a
        warning; the next save writes the rebuilt graph) and None is returned.
        """
        import hnswlib

        rel = f"hnsw/{self.name}.bin"
        try:
            p = self.path_of(rel, verify=True)
            ix = hnswlib.Index(space="ip", dim=self.dim)
            try:
                ix.load_index(str(p), max_elements=max(n + len(self._pending), 16))
            except RuntimeError as exc:
                raise StoreCorruptedError(f"store file {p} (HNSW of view {self.name!r}) is corrupted: {exc}",
                                          p) from None
            for c in self._pending:
                ix.mark_deleted(c)
            if ix.get_current_count() - len(self._pending) != n:
                raise StoreCorruptedError(f"store file {p} is corrupted: HNSW holds {ix.get_current_count()} rows, "
                                          f"the view {n + len(self._pending)}", p)
            return ix
        except StoreCorruptedError as exc:
            warnings.warn(f"{exc}; rebuilding the graph from the vectors (the next save writes it anew)",
                          StoreWarning, stacklevel=3)
            self._n_deleted += 1  # the next save writes a new graph
            self.dirty = True
            return None

    # -- reading -------------------------------------------------------------

    @property
    def n_rows(self) -> int:
        """Number of chunks that have a vector."""
        return int(np.count_nonzero(self._has))

    def __len__(self) -> int:
        return self.n_rows

    def ids(self) -> np.ndarray:
        """Chunk ids that have a vector, ascending (int64)."""
        return np.flatnonzero(self._has).astype(np.int64)

    def has(self, ids: Sequence[int]) -> np.ndarray:
        """Bool per id: the chunk has a vector in this view."""
        ids = np.asarray(ids, dtype=np.int64).reshape(-1)
        ok = (ids >= 0) & (ids < len(self._has))
        out = np.zeros(len(ids), dtype=bool)
        out[ok] = self._has[ids[ok]]
        return out

    def get(self, ids: Sequence[int]) -> np.ndarray:
        """Float32 vectors of the given chunks (InputError for a chunk without one)."""
        ids = np.asarray(ids, dtype=np.int64).reshape(-1)
        if not self.has(ids).all():
            bad = ids[~self.has(ids)][:10].tolist()
            raise InputError(f"vector view {self.name!r} has no vector for chunk id(s) {bad}")
        return np.asarray(self._rows[ids], dtype=np.float32)

    def _exact(self, q: np.ndarray, cand: Sequence[int], k: int) -> list[tuple[int, float]]:
        cand = np.asarray(cand, dtype=np.int64)
        if len(cand) == 0:
            return []
        sims = np.asarray(self._rows[cand], dtype=np.float32) @ q
        top = np.argsort(-sims, kind="stable")[:k]
        return [(int(cand[i]), float(sims[i])) for i in top]

    def search(self, qvec: np.ndarray, k: int, allowed: Sequence[int] | None = None) -> list[tuple[int, float]]:
        """Top-``k`` ``(chunk_id, cosine)``, best first, ties by chunk id.

        Exact over ``allowed`` (chunk ids; those without a vector are skipped)
        when given, or over every row when the view holds at most ``2k``;
        HNSW otherwise, falling back to exact when the graph cannot fill k.
        """
        q = np.asarray(qvec, dtype=np.float32).reshape(-1)
        if q.shape[0] != self.dim:
            raise InputError(f"query vector has dimension {q.shape[0]}, the view {self.name!r} {self.dim}")
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
            raise ConfigError(f"k must be a positive integer, got {k!r}")
        n = self.n_rows
        if allowed is not None or n <= 2 * k:
            if allowed is not None:
                cand = np.unique(np.asarray(list(allowed), dtype=np.int64))
                cand = cand[self.has(cand)]
            else:
                cand = self.ids()
            return self._exact(q, cand, k)
        kk = min(k, n)
        g = self.graph()
        g.set_ef(max(self.hnsw_params.get("ef_search", 128), 2 * kk))
        try:
            labels, dist = g.knn_query(q[None, :], k=kk)
        except RuntimeError:  # hnswlib could not fill k results (tiny or heavily deleted graph): exact search
            return self._exact(q, self.ids(), k)
        # Equal scores come back in hnswlib's heap order; order them by chunk id, as the exact path does.
        return sorted(((int(l), float(1.0 - d)) for l, d in zip(labels[0], dist[0])), key=lambda t: (-t[1], t[0]))

    # -- changes -------------------------------------------------------------

    def _own(self) -> None:
        if not self._owned:
            self._rows = np.array(self._rows)
            self._has = np.array(self._has)
            self._owned = True

    def add(self, ids: Sequence[int], vectors: np.ndarray) -> None:
        """Add one vector per chunk id; ids must be live chunks without a vector in this view."""
        ids = np.asarray(ids, dtype=np.int64).reshape(-1)
        vecs = np.asarray(vectors, dtype=np.float32)
        if vecs.ndim != 2 or vecs.shape != (len(ids), self.dim):
            raise InputError(f"vectors must have shape ({len(ids)}, {self.dim}), got {vecs.shape}")
        if len(np.unique(ids)) != len(ids):
            raise InputError("duplicate chunk ids in add")
        if self._store is not None:
            dead = [int(c) for c in ids if int(c) not in self._store.chunks]
            if dead:
                raise InputError(f"vector view {self.name!r}: no live chunk with id(s) {dead[:10]}")
        if self.has(ids).any():
            raise InputError(f"vector view {self.name!r} already has vectors for chunk id(s) "
                             f"{ids[self.has(ids)][:10].tolist()}")
        if not np.isfinite(vecs).all():
            raise InputError(f"vector view {self.name!r}: vectors must be finite")
        if len(ids) == 0:
            return
        g = self.graph() if (self._graph is not None or self._graph_on_disk) else None
        self._changing()
        self._own()
        need = int(ids.max()) + 1
        if need > len(self._has):
            self._rows = np.concatenate([self._rows, np.zeros((need - len(self._has), self.dim), self._rows.dtype)])
            self._has = np.concatenate([self._has, np.zeros(need - len(self._has), dtype=bool)])
        self._rows[ids] = vecs.astype(self._rows.dtype)
        self._has[ids] = True
        if g is None and self._graph is None:
            return  # built from the rows on first search (or at save)
        g = self._graph
        cnt = g.get_current_count() + len(ids)
        if cnt > g.get_max_elements():
            g.resize_index(max(cnt, 2 * g.get_max_elements()))
        g.add_items(vecs, ids, num_threads=insert_threads(cnt))

    def delete(self, ids: Sequence[int]) -> int:
        """Drop the vectors of these chunk ids (those without one are ignored); returns how many."""
        ids = np.asarray(ids, dtype=np.int64).reshape(-1)
        ids = np.unique(ids[self.has(ids)])
        if len(ids) == 0:
            return 0
        self._changing()
        self._own()
        self._rows[ids] = 0
        self._has[ids] = False
        if self._graph is not None:
            for c in ids.tolist():
                self._graph.mark_deleted(c)
        elif self._graph_on_disk:
            self._pending.update(ids.tolist())
        self._n_deleted += len(ids)
        return len(ids)

    # -- saving --------------------------------------------------------------

    def write(self, folder: Path) -> list[str]:
        files = [f"vectors/{self.name}.npy", f"vectors/{self.name}.has.npy"]
        write_npy(Path(folder) / files[0], np.asarray(self._rows))
        write_npy(Path(folder) / files[1], np.asarray(self._has))
        if self.n_rows:
            if self._n_deleted or (self._graph is None and not self._graph_on_disk):
                # Compaction (or first build): a graph of the live rows only.
                self._graph, self._graph_on_disk, self._pending = None, False, set()
            g = self.graph()
            p = Path(folder) / f"hnsw/{self.name}.bin"
            p.parent.mkdir(parents=True, exist_ok=True)
            g.save_index(str(p))  # hnswlib does not report a short write:
            check_native_write(p)  # a full disk is an OSError (ENOSPC)
            fsync_file(p)
            files.append(f"hnsw/{self.name}.bin")
        self._n_deleted = 0
        return files

    def describe(self) -> dict:
        return {"embedder": dict(self.embedder), "dim": self.dim, "dtype": self.dtype, "rows": self.n_rows}
