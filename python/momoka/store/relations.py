"""Relations: sparse graphs over chunk ids (a Momoka path per chunk, an entity graph ...).

Files of a relation in a segment: ``relations/NAME.npz``, the rows set in that
commit as CSR arrays ``sources`` (ascending), ``indptr``, ``indices`` (targets)
and, for a weighted relation, ``weights`` (a later segment's row wins); and
``relations/NAME.deleted.npy``, the chunk ids deleted then (their rows go and,
when targets are chunks, so do edges to them). Read on first use.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..errors import InputError, StoreCorruptedError
from ._io import fsync_file
from .artifact import Artifact, Part, write_tombstones


class Relation(Artifact):
    """Rows of targets per source chunk id.

    ``ordered``: the order of a row's targets means something (a path) and is
    kept as given. ``weighted``: each edge has a float weight.
    ``target_table``: None when targets are chunk ids, else the name of the
    node table the targets index.
    """

    kind = "relation"

    def __init__(self, store, name: str, *, ordered: bool = True, weighted: bool = False,
                 target_table: str | None = None, source: dict | None = None):
        super().__init__(store, name, source)
        self.ordered = bool(ordered)
        self.weighted = bool(weighted)
        self.target_table = target_table
        self._rows: dict[int, np.ndarray] | None = {}
        self._weights: dict[int, np.ndarray] = {}
        self._dirty_rows: set[int] = set()  # sources whose row was set since the last save
        self._deleted: set[int] = set()  # chunk ids deleted since the last save

    def _files(self) -> tuple[str, str]:
        return f"relations/{self.name}.npz", f"relations/{self.name}.deleted.npy"

    def load_parts(self, parts: list[Part]) -> None:
        """Remember the segments' parts; they are read on first use."""
        self.set_parts(parts)
        self._rows, self._weights, self._dirty_rows, self._deleted = None, {}, set(), set()

    def loaded(self) -> bool:
        return self._rows is not None

    def _read_npz(self, part: Part) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
        p = self._read(part, self._files()[0])
        try:
            with np.load(p, allow_pickle=False) as z:
                src, indptr, ind = z["sources"], z["indptr"], z["indices"]
                w = z["weights"] if self.weighted else None
        except (OSError, ValueError, KeyError) as exc:
            raise StoreCorruptedError(f"store file {p} (relation {self.name!r}) is corrupted: {exc}") from None
        if len(indptr) != len(src) + 1 or int(indptr[-1]) != len(ind) or (w is not None and len(w) != len(ind)):
            raise StoreCorruptedError(f"store file {p} (relation {self.name!r}) is corrupted: CSR sizes disagree")
        return src, indptr, ind, w

    def _data(self) -> dict[int, np.ndarray]:
        if self._rows is None:
            f_rows, f_del = self._files()
            rows: dict[int, np.ndarray] = {}
            weights: dict[int, np.ndarray] = {}
            dead: set[int] = set()
            for part in self.parts:
                if part.has(f_del):
                    gone = np.load(self._read(part, f_del), allow_pickle=False).astype(np.int64).tolist()
                    dead.update(gone)
                    for c in gone:
                        rows.pop(c, None)
                        weights.pop(c, None)
                if part.has(f_rows):
                    src, indptr, ind, w = self._read_npz(part)
                    for i, s in enumerate(src.tolist()):
                        a, b = int(indptr[i]), int(indptr[i + 1])
                        rows[s] = ind[a:b].astype(np.int64)
                        if w is not None:
                            weights[s] = w[a:b].astype(np.float32)
            if dead and self.target_table is None:  # edges to deleted chunks go
                g = np.fromiter(dead, dtype=np.int64)
                for s, t in list(rows.items()):
                    keep = ~np.isin(t, g)
                    if not keep.all():
                        rows[s] = t[keep]
                        if self.weighted:
                            weights[s] = weights[s][keep]
            self._rows, self._weights = rows, weights
        return self._rows

    # -- reading -------------------------------------------------------------

    def get(self, cid: int) -> np.ndarray:
        """The targets of source ``cid`` (int64; empty when it has no row)."""
        r = self._data().get(int(cid))
        return r.copy() if r is not None else np.zeros(0, dtype=np.int64)

    def weights(self, cid: int) -> np.ndarray:
        """The edge weights of source ``cid`` (float32, aligned with :meth:`get`); ones when unweighted."""
        c = int(cid)
        r = self._data().get(c)
        if r is None:
            return np.zeros(0, dtype=np.float32)
        return self._weights[c].copy() if self.weighted else np.ones(len(r), dtype=np.float32)

    def rows(self) -> list[int]:
        """The source ids that have a row, ascending."""
        return sorted(self._data())

    def __contains__(self, cid: object) -> bool:
        return isinstance(cid, (int, np.integer)) and int(cid) in self._data()

    def __len__(self) -> int:
        return len(self._data())

    # -- changes -------------------------------------------------------------

    def set(self, cid: int, targets: Sequence[int], weights: Sequence[float] | None = None) -> None:
        """Replace the row of source ``cid`` (a live chunk id) with ``targets``."""
        c = int(cid)
        t = np.asarray(targets, dtype=np.int64).reshape(-1)
        if self._store is not None and c not in self._store.chunks:
            raise InputError(f"relation {self.name!r}: no live chunk with id {c}")
        if self.target_table is None and self._store is not None:
            dead = [int(x) for x in t if int(x) not in self._store.chunks]
            if dead:
                raise InputError(f"relation {self.name!r}: targets are not live chunk ids: {dead[:10]}")
        elif len(t) and t.min() < 0:
            raise InputError(f"relation {self.name!r}: negative target ids")
        if self.weighted:
            if weights is None:
                raise InputError(f"relation {self.name!r} is weighted: give one weight per target")
            w = np.asarray(weights, dtype=np.float32).reshape(-1)
            if len(w) != len(t):
                raise InputError(f"relation {self.name!r}: {len(w)} weights for {len(t)} targets")
        elif weights is not None:
            raise InputError(f"relation {self.name!r} is not weighted: weights are not stored")
        rows = self._data()
        self._changing()
        if not self.ordered:
            order = np.argsort(t, kind="stable")
            t = t[order]
            if self.weighted:
                w = w[order]
        rows[c] = t
        if self.weighted:
            self._weights[c] = w
        self._dirty_rows.add(c)

    def delete(self, ids: Sequence[int]) -> int:
        """Drop the rows of these sources and, when targets are chunks, edges pointing at them.

        Returns the number of rows dropped.
        """
        gone = {int(c) for c in ids}
        if not gone:
            return 0
        rows = self._data()
        dropped = [c for c in gone if c in rows]
        changed: dict[int, np.ndarray] = {}
        if self.target_table is None:
            g = np.fromiter(gone, dtype=np.int64)
            for s, t in rows.items():
                if s not in gone and len(t):
                    keep = ~np.isin(t, g)
                    if not keep.all():
                        changed[s] = keep
        if not dropped and not changed:
            return 0
        self._changing()
        self._deleted.update(gone)
        self._dirty_rows.difference_update(gone)
        for c in dropped:
            rows.pop(c)
            self._weights.pop(c, None)
        for s, keep in changed.items():
            rows[s] = rows[s][keep]
            if self.weighted:
                self._weights[s] = self._weights[s][keep]
        return len(dropped)

    # -- saving --------------------------------------------------------------

    def has_delta(self) -> bool:
        return bool(self._dirty_rows) or bool(self._deleted)

    def _write(self, folder: Path, sources, deleted) -> list[str]:
        rows = self._data()
        f_rows, f_del = self._files()
        files = []
        src = np.array(sorted(c for c in set(sources) if c in rows), dtype=np.int64)
        if len(src):
            lens = np.array([len(rows[s]) for s in src.tolist()], dtype=np.int64)
            indptr = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
            ind = np.concatenate([rows[s] for s in src.tolist()])
            arrays = {"sources": src, "indptr": indptr, "indices": ind.astype(np.int64)}
            if self.weighted:
                arrays["weights"] = np.concatenate([self._weights[s] for s in src.tolist()]).astype(np.float32)
            p = Path(folder) / f_rows
            p.parent.mkdir(parents=True, exist_ok=True)
            with open(p, "wb") as f:
                np.savez(f, **arrays)
            fsync_file(p)
            files.append(f_rows)
        return files + write_tombstones(folder, f_del, deleted)

    def write_delta(self, folder: Path) -> list[str]:
        return self._write(folder, self._dirty_rows, self._deleted)

    def write_merged(self, folder: Path, parts: list[Part], lo: int, hi: int) -> list[str]:
        f_rows, f_del = self._files()
        sources: set[int] = set()
        deleted: set[int] = set()
        for part in parts:
            if part.has(f_rows):
                sources.update(self._read_npz(part)[0].tolist())
            if part.has(f_del):
                deleted.update(np.load(self._read(part, f_del), allow_pickle=False).astype(np.int64).tolist())
        return self._write(folder, sources, deleted)

    def committed(self) -> None:
        self._dirty_rows, self._deleted = set(), set()

    def unsave(self) -> None:
        self._dirty_rows, self._deleted = set(self._data()), set()

    def describe(self) -> dict:
        d = {"ordered": self.ordered, "weighted": self.weighted, "target_table": self.target_table}
        if self._rows is not None:
            d["rows"] = len(self._rows)
        return d
