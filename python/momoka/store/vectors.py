"""Dense vector views: vectors by chunk id, saved per segment, each part with its own HNSW graph.

Files of a view in a segment::

    vectors/NAME.ids.npy      int64: the chunk ids this segment gives a vector (any ids, any order)
    vectors/NAME.npy          (rows, dim) float32 or float16, aligned with the ids
    vectors/NAME.deleted.npy  ids of older segments' vectors deleted in this commit (tombstones)
    hnsw/NAME.bin             hnswlib graph of the part (inner-product space, labels = chunk ids),
                              written when the part has at least GRAPH_ROWS vectors

A search asks every part for its top ``k`` (exactly for a part without a graph, or
when it holds at most ``2k`` live rows; through its graph otherwise) and keeps the
best ``k`` overall, ties by chunk id. Rows are memory-mapped on open; graphs are read
on first search. A delete marks the vector deleted in its part's graph; merging the
part drops it.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from .._validate import check_int
from ..errors import ConfigError, InputError, StoreCorruptedError, StoreError
from ._blocks import BlockCheck, file_record
from ._io import check_native_write, fsync_file, write_npy
from .artifact import Artifact, Part, StoreWarning, write_tombstones

#: HNSW construction and search parameters.
DEFAULT_HNSW = {"M": 32, "ef_construction": 200, "ef_search": 128}
DTYPES = {"float32": np.float32, "float16": np.float16}
#: Graphs of at most this many rows are built on one thread (deterministic); larger ones in parallel.
DETERMINISTIC_ROWS = 20_000
#: Rows handed to hnswlib's ``add_items`` per call when a graph is built: each call inserts its
#: block on every core, and only one block is copied to float32 at a time.
INSERT_BLOCK = 65_536
#: A part with at least this many vectors gets an HNSW graph; smaller parts are searched exactly.
GRAPH_ROWS = 1024


#: Exact searches over at least this many rows take their product on one BLAS thread (below it BLAS uses one).
ONE_THREAD_ROWS = 512
_blas: list = []  # the threadpoolctl controller, made on first use ([None] without threadpoolctl)


def _scores(rows: np.ndarray, q: np.ndarray) -> np.ndarray:
    """``rows @ q`` on one BLAS thread: a query's product is small, and waking BLAS's other threads costs more
    than it saves when the cores are busy (4.5 ms against 0.66 ms for 3,200 x 384 rows at load 5 on 2 cores).
    A score can differ in its last float32 bit from a product split over threads, as such products already
    differed between machines with different numbers of cores; on one thread it no longer depends on them."""
    if len(rows) < ONE_THREAD_ROWS:
        return rows @ q
    if not _blas:
        try:
            from threadpoolctl import ThreadpoolController  # start-up: threadpoolctl, on the first large product

            _blas.append(ThreadpoolController())
        except Exception:  # threadpoolctl absent or unusable: BLAS as it is (the same results)
            _blas.append(None)
    if _blas[0] is None:
        return rows @ q
    with _blas[0].limit(limits=1, user_api="blas"):
        return rows @ q


_pool: list = []  # the threads the parts' graphs are searched on, made on first use ([None] on one core)


def _part_pool():
    """The thread pool that searches a view's graphs side by side (hnswlib releases the GIL while it searches;
    each part's search is what it is alone, and the parts' hits are merged in part order, so the results are
    those of searching them one after another); None on a single core. One thread per core (at most 32), so
    that a server's concurrent queries are not held to fewer searches at a time than it has cores."""
    if not _pool:
        n = min(32, os.cpu_count() or 1)
        _pool.append(ThreadPoolExecutor(n, thread_name_prefix="momoka-hnsw") if n > 1 else None)
    return _pool[0]


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
    dim = check_int(dim, "embedder dim", minimum=1)
    return {"model_id": str(embedder["model_id"]), "checksum": str(embedder["checksum"]), "dim": dim}


#: A part's graph is searched with ``ef`` = ``PART_EF_SHARE`` x ``ef_search`` x its share of the view's vectors,
#: at most ``ef_search``, at least 2k (recall@10 against brute force at least that of one graph: tested).
PART_EF_SHARE = 2.0
#: A view with several graph parts asks each first for ``PART_EF_SHARE`` x k x its share of the rows, at least
#: this many (:meth:`VectorView._graphs_top`), and for k when they may not be all it holds of the top k.
PART_K_MIN = 10


def part_k(k: int, n: int, total: int) -> int:
    """The hits a graph part of ``n`` of a view's ``total`` rows is first asked for, for the view's top ``k``."""
    return min(k, max(PART_K_MIN, int(np.ceil(PART_EF_SHARE * k * n / max(total, 1)))))


def _mark_deleted(graph, label: int) -> None:
    """Mark ``label`` deleted in an hnswlib graph (already deleted: nothing to do)."""
    try:
        graph.mark_deleted(label)
    except RuntimeError:
        pass


class _VPart:
    """The vectors of one segment (``part`` set) or the unsaved ones (``part`` None)."""

    __slots__ = ("ids", "rows", "n", "graph", "part", "check")

    def __init__(self, ids: np.ndarray, rows: np.ndarray, part: Part | None = None, check: BlockCheck | None = None):
        self.ids, self.rows, self.n = ids, rows, len(ids)
        self.graph = None  # hnswlib.Index once read or built
        self.part = part
        self.check = check  # the rows file's block check while it is not verified (memory-mapped rows)

    def verify(self, rows: np.ndarray | None = None) -> None:
        """Verify the blocks of the rows file holding ``rows`` (indices; every row when None) before they are read."""
        if self.check is None:
            return
        if rows is None:
            self.check.whole()
        else:
            self.check.rows(rows, int(getattr(self.rows, "offset", 0)), int(self.rows.strides[0]))

    def append(self, ids: np.ndarray, rows: np.ndarray) -> None:
        """Add rows to an in-memory part (capacity doubles, so many small adds stay linear)."""
        need = self.n + len(ids)
        if need > len(self.ids):
            cap = max(need, 2 * len(self.ids), 64)
            self.ids = np.concatenate([self.ids[: self.n], np.zeros(cap - self.n, np.int64)])
            grow = np.zeros((cap - self.n, self.rows.shape[1]), dtype=self.rows.dtype)
            self.rows = np.concatenate([self.rows[: self.n], grow])
        self.ids[self.n : need] = ids
        self.rows[self.n : need] = rows
        self.n = need


class _Staged:
    """A part of a view written by another process, waiting in ``folder`` for the next save."""

    __slots__ = ("folder", "ids", "records")

    def __init__(self, folder: Path, ids: np.ndarray, records: dict[str, dict]):
        self.folder, self.ids, self.records = folder, ids, records


class VectorView(Artifact):
    """A dense view: vectors by chunk id, in one part per segment plus the unsaved ones.

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
        self._parts: list[_VPart] = []  # saved parts, oldest first, then the unsaved one (part None)
        self._where_p = np.zeros(0, dtype=np.int32)  # per chunk id: index of the part holding its vector, or -1
        self._where_r = np.zeros(0, dtype=np.int64)  # ... and its row there
        self._deleted: set[int] = set()  # vectors of saved parts deleted since the last save
        self._n = 0
        self._staged: _Staged | None = None  # a part written by another process, adopted by the next save
        self._moved: dict[str, dict] = {}  # records of the staged files the last write_delta moved in

    @property
    def info(self) -> dict:
        """``{"embedder": {...}, "source": {...}}``."""
        return {"embedder": dict(self.embedder), "source": dict(self.source)}

    # -- loading -------------------------------------------------------------

    def _files(self) -> tuple[str, str, str, str]:
        n = self.name
        return f"vectors/{n}.ids.npy", f"vectors/{n}.npy", f"vectors/{n}.deleted.npy", f"hnsw/{n}.bin"

    def load_parts(self, parts: list[Part]) -> None:
        """Read every segment's ids and tombstones; rows are memory-mapped, graphs read on first search."""
        graphs = {p.part.segment: p.graph for p in self._parts if p.part is not None and p.graph is not None}
        Artifact.set_parts(self, parts)
        self._parts, self._where_p, self._where_r, self._n = [], np.zeros(0, np.int32), np.zeros(0, np.int64), 0
        self._deleted = set()
        for part in parts:
            self._load_part(part, graphs.get(part.segment))

    def _load_part(self, part: Part, graph=None) -> None:
        """Apply one segment's tombstones and place its rows (memory-mapped) as the newest part."""
        f_ids, f_rows, f_del, _ = self._files()
        try:
            if part.has(f_del):
                part.check_whole(f_del, self._what())
                self._drop(np.load(part.folder / f_del, allow_pickle=False).astype(np.int64))
            if part.has(f_ids):
                part.check_whole(f_ids, self._what())
                ids = np.load(part.folder / f_ids, allow_pickle=False).astype(np.int64)
                rows = np.load(part.folder / f_rows, mmap_mode="r", allow_pickle=False)
                srt = np.sort(ids)  # (np.unique would import numpy.ma: 20 ms of every CLI query)
                if (rows.ndim != 2 or rows.shape != (len(ids), self.dim) or rows.dtype != DTYPES[self.dtype]
                        or (len(ids) and srt[0] < 0) or bool((srt[1:] == srt[:-1]).any())):
                    raise ValueError(f"rows {rows.shape} {rows.dtype} for {len(ids)} ids, dim {self.dim} {self.dtype}")
                vp = _VPart(ids, rows, part, part.check(f_rows, self._what()))
                vp.graph = graph
                self._place(vp)
        except FileNotFoundError:
            raise
        except (OSError, ValueError) as exc:
            raise StoreCorruptedError(f"store {part.folder}: vector view {self.name!r} is corrupted: {exc}") from None

    def _ensure(self, n: int) -> None:
        if n > len(self._where_p):
            cap = max(n, 2 * len(self._where_p), 64)
            self._where_p = np.concatenate([self._where_p, np.full(cap - len(self._where_p), -1, np.int32)])
            self._where_r = np.concatenate([self._where_r, np.zeros(cap - len(self._where_r), np.int64)])

    def _place(self, vp: _VPart) -> None:
        """Add a saved part (its rows win over older parts' rows of the same ids)."""
        pi = len(self._parts)
        self._parts.append(vp)
        ids = vp.ids[: vp.n]
        if len(ids):
            self._ensure(int(ids.max()) + 1)
            self._n += int(np.count_nonzero(self._where_p[ids] < 0))
            self._where_p[ids] = pi
            self._where_r[ids] = np.arange(len(ids))

    def _drop(self, ids: np.ndarray) -> np.ndarray:
        """Forget the vectors of ``ids`` (those without one are ignored); returns the ids dropped."""
        ids = np.unique(ids[(ids >= 0) & (ids < len(self._where_p))])
        ids = ids[self._where_p[ids] >= 0]
        for pi in np.unique(self._where_p[ids]).tolist():
            g = self._parts[pi].graph
            if g is not None:
                for c in ids[self._where_p[ids] == pi].tolist():
                    _mark_deleted(g, c)
        self._where_p[ids] = -1
        self._n -= len(ids)
        return ids

    @classmethod
    def from_rows(cls, store, name: str, *, embedder: dict, rows: np.ndarray, has: np.ndarray,
                  source: dict | None = None, hnsw: dict | None = None, graph=None) -> VectorView:
        """A view from rows by chunk id (older store formats); all of it is unsaved. ``graph`` is not kept."""
        dtype = "float16" if rows.dtype == np.float16 else "float32"
        v = cls(store, name, embedder=embedder, dtype=dtype, source=source, hnsw=hnsw)
        ids = np.flatnonzero(np.asarray(has, dtype=bool)).astype(np.int64)
        v._tail().append(ids, np.asarray(rows[ids], dtype=DTYPES[dtype]))
        v._ensure(int(ids.max()) + 1 if len(ids) else 0)
        v._where_p[ids], v._where_r[ids], v._n = 0, np.arange(len(ids)), len(ids)
        return v

    def loaded(self) -> bool:
        return all(p.graph is not None or p.part is None or not p.part.has(self._files()[3]) for p in self._parts)

    def _new_graph(self, capacity: int):
        import hnswlib  # start-up: hnswlib

        ix = hnswlib.Index(space="ip", dim=self.dim)
        ix.init_index(max_elements=max(capacity, 16), M=self.hnsw_params["M"],
                      ef_construction=self.hnsw_params["ef_construction"], random_seed=100)
        return ix

    def _build_graph(self, vp: _VPart, live: np.ndarray):
        """A graph of the part's live rows (one thread up to DETERMINISTIC_ROWS: the same rows, the same graph)."""
        ix = self._new_graph(len(live))
        vp.verify()
        rows, ids = vp.rows[: vp.n], vp.ids[: vp.n]
        if len(live) != vp.n:
            rows, ids = rows[live], ids[live]
        threads = insert_threads(len(ids))
        for a in range(0, len(ids), INSERT_BLOCK):
            ix.add_items(np.ascontiguousarray(rows[a : a + INSERT_BLOCK], dtype=np.float32),
                         ids[a : a + INSERT_BLOCK], num_threads=threads)
        return ix

    def _graph(self, pi: int):
        """The graph of part ``pi`` (read from disk on first use, built for the unsaved part)."""
        vp = self._parts[pi]
        if vp.graph is None:
            live = self._live(pi)
            rel = self._files()[3]
            if vp.part is not None and vp.part.has(rel):
                vp.graph = self._read_graph(vp, rel)
            if vp.graph is None:
                vp.graph = self._build_graph(vp, np.flatnonzero(live))
            else:
                for c in vp.ids[: vp.n][~live].tolist():
                    _mark_deleted(vp.graph, c)
        return vp.graph

    def _read_graph(self, vp: _VPart, rel: str):
        """The saved graph of a part, validated (sha256, then its row count); None (and a warning) when damaged."""
        import hnswlib  # start-up: hnswlib

        try:
            p = vp.part.path(rel, verify=True, what=self._what())
            ix = hnswlib.Index(space="ip", dim=self.dim)
            try:
                ix.load_index(str(p), max_elements=max(vp.n, 16))
            except RuntimeError as exc:
                raise StoreCorruptedError(f"store file {p} (HNSW of view {self.name!r}) is corrupted: {exc}",
                                          p) from None
            if ix.get_current_count() != vp.n:
                raise StoreCorruptedError(f"store file {p} is corrupted: HNSW holds {ix.get_current_count()} rows, "
                                          f"the part {vp.n}", p)
            return ix
        except StoreCorruptedError as exc:
            warnings.warn(f"{exc}; rebuilding the graph from the vectors (merging the segment writes it anew)",
                          StoreWarning, stacklevel=4)
            return None

    def graph(self):
        """The hnswlib graph of a view held in one part (read or built on first use).

        Each segment's part has its own graph: a view spread over several parts
        raises :class:`~momoka.errors.StoreError` (merge the store first).
        """
        held = [pi for pi, vp in enumerate(self._parts) if vp.n]
        if len(held) > 1:
            raise StoreError(f"vector view {self.name!r} is held in {len(held)} segments, each with its own graph; "
                             "merge the store (Store.merge()) for one graph")
        if not held:
            return self._new_graph(0)
        return self._graph(held[0])

    def graph_parts(self) -> int:
        """How many parts are searched through an HNSW graph (the others exactly)."""
        rel = self._files()[3]
        return sum(1 for p in self._parts if p.part is not None and p.part.has(rel))

    # -- reading -------------------------------------------------------------

    def _live(self, pi: int) -> np.ndarray:
        """Bool per row of part ``pi``: the vector is still the live one of its id."""
        vp = self._parts[pi]
        return self._where_p[vp.ids[: vp.n]] == pi

    @property
    def n_rows(self) -> int:
        """Number of chunks that have a vector."""
        return self._n

    def __len__(self) -> int:
        return self.n_rows

    def ids(self) -> np.ndarray:
        """Chunk ids that have a vector, ascending (int64)."""
        return np.flatnonzero(self._where_p >= 0).astype(np.int64)

    def has(self, ids: Sequence[int]) -> np.ndarray:
        """Bool per id: the chunk has a vector in this view."""
        ids = np.asarray(ids, dtype=np.int64).reshape(-1)
        ok = (ids >= 0) & (ids < len(self._where_p))
        out = np.zeros(len(ids), dtype=bool)
        out[ok] = self._where_p[ids[ok]] >= 0
        return out

    def get(self, ids: Sequence[int]) -> np.ndarray:
        """Float32 vectors of the given chunks (InputError for a chunk without one)."""
        ids = np.asarray(ids, dtype=np.int64).reshape(-1)
        if not self.has(ids).all():
            bad = ids[~self.has(ids)][:10].tolist()
            raise InputError(f"vector view {self.name!r} has no vector for chunk id(s) {bad}")
        out = np.empty((len(ids), self.dim), dtype=np.float32)
        wp, wr = self._where_p[ids], self._where_r[ids]
        for pi in np.unique(wp).tolist():
            m = wp == pi
            vp = self._parts[pi]
            vp.verify(wr[m])
            out[m] = vp.rows[wr[m]]
        return out

    def _exact(self, q: np.ndarray, cand: np.ndarray, k: int) -> list[tuple[int, float]]:
        if len(cand) == 0:
            return []
        sims = _scores(self.get(cand), q)
        top = np.lexsort((cand, -sims))[:k]
        return [(int(cand[i]), float(sims[i])) for i in top]

    def search(self, qvec: np.ndarray, k: int, allowed: Sequence[int] | None = None) -> list[tuple[int, float]]:
        """Top-``k`` ``(chunk_id, cosine)``, best first, ties by chunk id.

        Exact over ``allowed`` (chunk ids; those without a vector are skipped)
        when given, or over every row when the view holds at most ``2k``;
        otherwise each part gives its top ``k`` (exactly, or through its HNSW
        graph when it has one and more than ``2k`` live rows, falling back to
        exact when the graph cannot fill k) and the best ``k`` of them are kept.
        With several graph parts, each is first asked for its share of ``k``
        and asked again for ``k`` only when its hits may not be all it holds of
        the top ``k`` (:meth:`_graphs_top`).
        """
        q = np.asarray(qvec, dtype=np.float32).reshape(-1)
        if q.shape[0] != self.dim:
            raise InputError(f"query vector has dimension {q.shape[0]}, the view {self.name!r} {self.dim}")
        k = check_int(k, "k", minimum=1)
        if allowed is not None or self.n_rows <= 2 * k:
            if allowed is not None:
                cand = np.unique(np.asarray(list(allowed), dtype=np.int64))
                cand = cand[self.has(cand)]
            else:
                cand = self.ids()
            return self._exact(q, cand, k)
        rel = self._files()[3]
        out: list[tuple[int, float]] = []
        graphed = []
        for pi, vp in enumerate(self._parts):
            if vp.n and ((vp.part is not None and vp.part.has(rel)) or (vp.part is None and vp.n >= GRAPH_ROWS)):
                graphed.append(pi)
        small = [pi for pi, vp in enumerate(self._parts) if vp.n and pi not in graphed]
        if small:
            out += self._exact_stack(q, small, k)
        if len(graphed) == 1:
            out += self._graph_top(q, graphed[0], k, self.n_rows)
        elif graphed:
            out += self._graphs_top(q, graphed, k, out)
        # Equal scores come back in hnswlib's heap order; order them by chunk id, as the exact path does.
        return sorted(out, key=lambda t: (-t[1], t[0]))[:k]

    def _exact_stack(self, q: np.ndarray, parts: list[int], k: int) -> list[tuple[int, float]]:
        """Exact top-``k`` over the parts without a graph, in one product with their rows stacked.

        The stack of saved parts is built once per set of parts (the unsaved part is searched apart).
        """
        saved = tuple((pi, self._parts[pi].part.segment) for pi in parts if self._parts[pi].part is not None)
        if getattr(self, "_stacked", (None,))[0] != saved:
            vps = [self._parts[pi] for pi, _ in saved]
            for vp in vps:
                vp.verify()
            ids = np.concatenate([vp.ids[: vp.n] for vp in vps] or [np.zeros(0, np.int64)])
            owner = np.concatenate([np.full(vp.n, pi, np.int32) for (pi, _), vp in zip(saved, vps)]
                                   or [np.zeros(0, np.int32)])
            rows = np.concatenate([np.asarray(vp.rows[: vp.n], dtype=np.float32) for vp in vps]
                                  or [np.zeros((0, self.dim), np.float32)])
            self._stacked = (saved, ids, owner, rows)
        _, ids, owner, rows = self._stacked
        tail = [pi for pi in parts if self._parts[pi].part is None]
        for pi in tail:  # the unsaved part: its rows as they are
            vp = self._parts[pi]
            ids = np.concatenate([ids, vp.ids[: vp.n]])
            owner = np.concatenate([owner, np.full(vp.n, pi, np.int32)])
            rows = np.concatenate([rows, np.asarray(vp.rows[: vp.n], dtype=np.float32)])
        live = self._where_p[ids] == owner
        if not live.all():
            ids, rows = ids[live], rows[live]
        if len(ids) == 0:
            return []
        sims = _scores(rows, q)
        if len(sims) > k:
            top = np.argpartition(-sims, k - 1)[:k]
            cut = sims[top].min()
            top = np.flatnonzero(sims >= cut)  # every tie of the k-th score, ordered by id below
        else:
            top = np.arange(len(sims))
        order = top[np.lexsort((ids[top], -sims[top]))][:k]
        return [(int(ids[i]), float(sims[i])) for i in order]

    def _graphs_top(self, q: np.ndarray, graphed: list[int], k: int, exact: list[tuple[int, float]]
                    ) -> list[tuple[int, float]]:
        """The hits of the graph parts ``graphed`` for the view's top ``k`` (``exact``: the other parts' hits).

        Each part is first asked for its share of ``k`` (:func:`part_k`: ``PART_EF_SHARE`` x ``k`` x its share of
        the rows, at least :data:`PART_K_MIN`), through the breadth that asks for; a part whose last hit still
        reaches the ``k``-th best of all the hits so far may hold more of the top ``k`` (a newly added
        document's part does) and is asked again for ``k``, as every part was before. So each part's hits
        that can be in the top ``k`` are there, at a fraction of the breadth when ``k`` is deep (the hybrid
        retriever reads 4x the budget's depth): the breadth of a graph search grows with the hits asked for.
        """
        total = self.n_rows
        pool = _part_pool()
        want = {pi: part_k(k, self._parts[pi].n, total) for pi in graphed}

        def run(jobs: list[tuple[int, int]]) -> list[list[tuple[int, float]]]:
            return list(pool.map(lambda j: self._graph_top(q, j[0], j[1], total), jobs) if pool is not None
                        else (self._graph_top(q, pi, kk, total) for pi, kk in jobs))

        tops = dict(zip(graphed, run([(pi, want[pi]) for pi in graphed])))
        scores = sorted((s for top in tops.values() for _, s in top), reverse=True)
        scores += sorted((s for _, s in exact), reverse=True)
        scores.sort(reverse=True)
        tau = scores[k - 1] if len(scores) >= k else -np.inf
        again = [pi for pi in graphed
                 if want[pi] < k and len(tops[pi]) >= want[pi] and tops[pi] and tops[pi][-1][1] >= tau]
        if again:
            tops.update(zip(again, run([(pi, k) for pi in again])))
        return [h for pi in graphed for h in tops[pi]]

    def _graph_top(self, q: np.ndarray, pi: int, k: int, total: int) -> list[tuple[int, float]]:
        """Top-``k`` of part ``pi`` through its graph (exactly when it has at most 2k live rows or the graph
        cannot fill k).

        The search breadth (hnswlib's ``ef``) is ``ef_search`` scaled by :data:`PART_EF_SHARE` times the
        part's share of the view's vectors, at most ``ef_search`` and at least ``2k``: a part holding a tenth of the vectors holds
        about a tenth of the best ones, which sit near the top of its own ranking.
        """
        vp = self._parts[pi]
        live = self._live(pi)
        n = int(np.count_nonzero(live))
        if n > 2 * k:
            g = self._graph(pi)
            ef = self.hnsw_params.get("ef_search", 128)
            g.set_ef(max(2 * k, min(ef, int(np.ceil(PART_EF_SHARE * ef * n / max(total, 1))))))
            try:
                labels, dist = g.knn_query(q[None, :], k=min(k, n), num_threads=1)
                return [(int(l), float(1.0 - d)) for l, d in zip(labels[0], dist[0])]
            except RuntimeError:  # the graph could not fill k (heavily deleted): exact search
                pass
        return self._exact(q, vp.ids[: vp.n][live], k)

    # -- changes -------------------------------------------------------------

    def _tail(self) -> _VPart:
        """The unsaved part (created on first use)."""
        if not self._parts or self._parts[-1].part is not None:
            self._parts.append(_VPart(np.zeros(0, np.int64), np.zeros((0, self.dim), DTYPES[self.dtype])))
        return self._parts[-1]

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
        elif len(ids) and ids.min() < 0:
            raise InputError(f"vector view {self.name!r}: negative chunk ids")
        if self.has(ids).any():
            raise InputError(f"vector view {self.name!r} already has vectors for chunk id(s) "
                             f"{ids[self.has(ids)][:10].tolist()}")
        if not np.isfinite(vecs).all():
            raise InputError(f"vector view {self.name!r}: vectors must be finite")
        if len(ids) == 0:
            return
        if self._staged is not None:
            raise StoreError(f"vector view {self.name!r} has a part written by another process waiting for the "
                             "next save; save before adding vectors")
        self._changing()
        tail = self._tail()
        pi = len(self._parts) - 1
        start = tail.n
        tail.append(ids, vecs.astype(DTYPES[self.dtype]))
        self._ensure(int(ids.max()) + 1)
        self._where_p[ids], self._where_r[ids] = pi, np.arange(start, start + len(ids))
        self._n += len(ids)
        if tail.graph is not None:
            g = tail.graph
            if g.get_current_count() + len(ids) > g.get_max_elements():
                g.resize_index(max(g.get_current_count() + len(ids), 2 * g.get_max_elements()))
            g.add_items(vecs, ids, num_threads=insert_threads(tail.n))

    def delete(self, ids: Sequence[int]) -> int:
        """Drop the vectors of these chunk ids (those without one are ignored); returns how many."""
        ids = np.asarray(ids, dtype=np.int64).reshape(-1)
        ids = np.unique(ids[self.has(ids)])
        if len(ids) == 0:
            return 0
        self._changing()
        saved = [int(c) for c in ids if self._parts[int(self._where_p[c])].part is not None]
        self._drop(ids)
        self._deleted.update(saved)
        return len(ids)

    # -- saving --------------------------------------------------------------

    def has_delta(self) -> bool:
        return (bool(self._deleted) or bool(self._parts and self._parts[-1].part is None and self._parts[-1].n)
                or self._staged is not None)

    def stage(self, folder: str | os.PathLike, ids: Sequence[int], records: dict[str, dict]) -> None:
        """Adopt a part another process wrote (:func:`write_part`, e.g. a Ray worker): the files ``records``
        names (``{rel: {"bytes", "sha256", "blocks"}}``) in ``folder``, holding the vectors of chunk ``ids``
        (already numbered as this store numbers them). The next save moves the files into its segment (no row
        is read) and records them; until then the ids have no vector here. ``folder`` must be on the store's
        file system. Refused when the view has unsaved rows or another staged part (a segment holds one part of
        a view), for ids that are not live chunks or already have a vector, and for files whose size differs
        from their record."""
        self._changing()
        ids = np.asarray(ids, dtype=np.int64).reshape(-1)
        if self._staged is not None or (self._parts and self._parts[-1].part is None and self._parts[-1].n):
            raise StoreError(f"vector view {self.name!r} has unsaved vectors; save before adopting a written part")
        if len(np.unique(ids)) != len(ids):
            raise InputError("duplicate chunk ids in a staged part")
        if self._store is not None:
            dead = [int(c) for c in ids if int(c) not in self._store.chunks]
            if dead:
                raise InputError(f"vector view {self.name!r}: no live chunk with id(s) {dead[:10]}")
        if self.has(ids).any():
            raise InputError(f"vector view {self.name!r} already has vectors for chunk id(s) "
                             f"{ids[self.has(ids)][:10].tolist()}")
        folder = Path(folder)
        f_ids, f_rows, _, f_graph = self._files()
        if len(ids) and not {f_ids, f_rows} <= set(records):
            raise StoreError(f"vector view {self.name!r}: a staged part needs {f_ids} and {f_rows}")
        for rel, rec in records.items():
            if rel not in (f_ids, f_rows, f_graph):
                raise StoreError(f"vector view {self.name!r}: {rel} is not a file of its parts")
            p = folder / rel
            if not p.is_file() or p.stat().st_size != int(rec.get("bytes", -1)):
                raise StoreError(f"vector view {self.name!r}: staged file {p} is missing or not as written")
        if not len(ids):
            return
        self._staged = _Staged(folder, ids, {rel: dict(rec) for rel, rec in records.items()})

    def written_records(self) -> dict[str, dict]:
        """The records of the files the last :meth:`write_delta` moved in from a staged part (not read again)."""
        return dict(self._moved)

    def _write_part(self, folder: Path, ids: np.ndarray, rows: np.ndarray, deleted, graph=None) -> list[str]:
        f_ids, f_rows, f_del, f_graph = self._files()
        files = []
        if len(ids):
            write_npy(Path(folder) / f_ids, np.asarray(ids, dtype=np.int64))
            write_npy(Path(folder) / f_rows, np.asarray(rows, dtype=DTYPES[self.dtype]))
            files += [f_ids, f_rows]
            if len(ids) >= GRAPH_ROWS:
                if graph is None or graph.get_current_count() != len(ids):
                    graph = self._build_graph(_VPart(np.asarray(ids), np.asarray(rows)), np.arange(len(ids)))
                p = Path(folder) / f_graph
                p.parent.mkdir(parents=True, exist_ok=True)
                graph.save_index(str(p))  # hnswlib does not report a short write:
                check_native_write(p)  # a full disk is an OSError (ENOSPC)
                fsync_file(p)
                files.append(f_graph)
        return files + write_tombstones(folder, f_del, deleted)

    def write_delta(self, folder: Path) -> list[str]:
        self._moved = {}
        if self._staged is not None:  # a part another process wrote: its files move into the segment
            st = self._staged
            for rel, rec in st.records.items():
                dst = Path(folder) / rel
                dst.parent.mkdir(parents=True, exist_ok=True)
                os.replace(st.folder / rel, dst)
                self._moved[rel] = rec
            return list(st.records) + write_tombstones(folder, self._files()[2], self._deleted)
        ids, rows, graph = np.zeros(0, np.int64), None, None
        if self._parts and self._parts[-1].part is None:
            pi = len(self._parts) - 1
            tail = self._parts[pi]
            live = self._live(pi)
            ids, rows = tail.ids[: tail.n][live], tail.rows[: tail.n][live]
            graph = tail.graph if live.all() else None
        return self._write_part(folder, ids, rows, self._deleted, graph)

    def write_merged(self, folder: Path, parts: list[Part], lo: int, hi: int) -> list[str]:
        names = {p.segment for p in parts}
        mine = [pi for pi, vp in enumerate(self._parts) if vp.part is not None and vp.part.segment in names]
        ids = np.concatenate([self._parts[pi].ids[: self._parts[pi].n][self._live(pi)] for pi in mine]
                             or [np.zeros(0, np.int64)])
        ids = np.sort(ids)
        gone: set[int] = set()
        everything = set(np.concatenate([self._parts[pi].ids[: self._parts[pi].n] for pi in mine]
                                        or [np.zeros(0, np.int64)]).tolist())
        f_del = self._files()[2]
        for part in parts:  # tombstones of older segments' vectors stay
            if part.has(f_del):
                d = np.load(part.path(f_del, verify=True, what=self._what()), allow_pickle=False)
                gone.update(int(c) for c in d if int(c) not in everything)
        return self._write_part(folder, ids, self.get(ids) if len(ids) else None, gone)

    def committed(self) -> None:
        """The unsaved part was written: it becomes a saved part (the store points it at its files)."""
        self._deleted.clear()

    def set_parts(self, parts: list[Part]) -> None:
        """After a save or merge: point at the saved parts.

        A save that only added a segment turns the unsaved part into it (nothing is read back); after a
        merge the parts are read again (graphs of unchanged segments are kept).
        """
        f_ids = self._files()[0]
        held = [p for p in parts if p.has(f_ids)]
        saved = [vp for vp in self._parts if vp.part is not None]
        if self._staged is not None:  # the staged part was saved: read its ids, memory-map its rows
            self._staged = None
            if [p.segment for p in held[:-1]] == [vp.part.segment for vp in saved] and held:
                Artifact.set_parts(self, parts)
                for vp, p in zip(saved, held):
                    vp.part = p
                self._load_part(held[-1])
            else:
                self.load_parts(parts)
            return
        tail = self._parts[-1] if self._parts and self._parts[-1].part is None else None
        old = [vp.part.segment for vp in saved]
        names = [p.segment for p in held]
        grew = len(names) == len(old) + 1 and tail is not None and tail.n > 0
        if names[: len(old)] != old or not (len(names) == len(old) or grew):
            self.load_parts(parts)
            return
        Artifact.set_parts(self, parts)
        for vp, p in zip(saved, held):
            vp.part = p
        if tail is not None:
            pi = len(self._parts) - 1
            if grew:  # the unsaved part was written as it is now (its live rows): it becomes the new part
                live = self._live(pi)
                ids, rows = tail.ids[: tail.n][live].copy(), tail.rows[: tail.n][live].copy()
                self._parts[pi] = _VPart(ids, rows, held[-1])
                self._where_r[ids] = np.arange(len(ids))
            else:  # nothing of it was written (it is empty)
                self._parts.pop()

    def unsave(self) -> None:
        if any(vp.part is not None for vp in self._parts):
            ids = self.ids()
            rows = np.asarray(self.get(ids), dtype=DTYPES[self.dtype])
            self._parts, self._where_p, self._where_r, self._n = [], np.zeros(0, np.int32), np.zeros(0, np.int64), 0
            tail = self._tail()
            tail.append(ids, rows)
            self._ensure(int(ids.max()) + 1 if len(ids) else 0)
            self._where_p[ids], self._where_r[ids], self._n = 0, np.arange(len(ids)), len(ids)
        self._deleted.clear()

    def describe(self) -> dict:
        return {"embedder": dict(self.embedder), "dim": self.dim, "dtype": self.dtype, "rows": self.n_rows}


def write_part(folder: str | os.PathLike, name: str, info: dict, ids: Sequence[int], rows: np.ndarray,
               hnsw: dict | None = None) -> dict[str, dict]:
    """Write the part of vector view ``name`` holding ``rows`` for chunk ``ids`` into ``folder``, as a save writes
    it (ids, rows, and the HNSW graph of a part of at least :data:`GRAPH_ROWS` vectors, labels = ``ids``), for a
    store that adopts it with :meth:`VectorView.stage`; returns ``{rel: record}`` of the files (fsynced).

    ``info``: the view's ``{"embedder", "dtype", "source"}`` (a :class:`~momoka.store.delta.Delta`'s entry).
    Another process (a Ray worker) writes it: ``ids`` must already be numbered as the adopting store numbers
    its chunks.
    """
    view = VectorView(None, name, embedder=info["embedder"], dtype=info.get("dtype", "float32"),
                      source=info.get("source"), hnsw=hnsw)
    ids = np.asarray(ids, dtype=np.int64).reshape(-1)
    if len(ids) and (rows is None or np.asarray(rows).shape != (len(ids), view.dim)):
        raise InputError(f"vector view {name!r}: rows must have shape ({len(ids)}, {view.dim})")
    rels = view._write_part(Path(folder), ids, np.asarray(rows) if len(ids) else None, ())
    return {rel: file_record(Path(folder) / rel) for rel in rels}
