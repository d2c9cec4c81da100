"""BM25 views: a native :class:`~momoka.index.bm25.BM25` index whose document ids are chunk ids.

File in a generation: ``bm25/NAME.bin`` (the native index), read on first use.
The native index gives ids 0, 1, 2, ... in the order texts are added, so a
view is filled in ascending chunk id order: slots of chunks it is not given
are added empty and deleted at once (a tombstone of a few bytes), keeping
BM25 id == chunk id.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..errors import ConfigError, InputError
from .artifact import Artifact
from .bm25 import BM25

#: Default BM25 settings: Okapi (rank_bm25's idf), Porter stemming, English stopwords.
DEFAULT_BM25 = {"k1": 1.5, "b": 0.75, "epsilon": 0.25, "idf": "okapi", "stem": True, "stopwords": "english"}


def make_bm25(params: dict) -> BM25:
    """A fresh :class:`BM25` from view parameters (ConfigError for bad ones)."""
    try:
        return BM25(**params)
    except TypeError as exc:
        raise ConfigError(f"bad BM25 parameters {params!r}: {exc}") from None


class BM25View(Artifact):
    """A BM25 index over some text of every chunk (``source`` says which, e.g. ``{"text": "chunk"}``)."""

    kind = "bm25"

    def __init__(self, store, name: str, *, params: dict | None = None, source: dict | None = None):
        super().__init__(store, name, source)
        self.params = dict(DEFAULT_BM25, **(params or {}))
        self._bm25: BM25 | None = None
        self._on_disk = False

    @classmethod
    def create(cls, store, name: str, *, params: dict | None = None, source: dict | None = None) -> BM25View:
        """A new, empty view (the parameters are checked now)."""
        v = cls(store, name, params=params, source=source)
        v._bm25 = make_bm25(v.params)
        return v

    @classmethod
    def load(cls, store, gen_dir: Path, entry: dict) -> BM25View:
        """A saved view; the index file is read on first use."""
        v = cls(store, entry["name"], params=entry.get("params"), source=entry.get("source"))
        v.attach(gen_dir, entry["files"])
        v._on_disk = True
        return v

    @classmethod
    def from_index(cls, store, name: str, bm25: BM25, *, params: dict, source: dict | None = None) -> BM25View:
        """A view around an index already read (format version 1 migration)."""
        v = cls(store, name, params=params, source=source)
        v._bm25 = bm25
        return v

    def loaded(self) -> bool:
        return self._bm25 is not None

    @property
    def index(self) -> BM25:
        """The native index (read from disk on first use)."""
        if self._bm25 is None:
            self._bm25 = BM25.load(self.path_of(f"bm25/{self.name}.bin", verify=True))
            self._on_disk = False
        return self._bm25

    def __len__(self) -> int:
        return self.index.n_docs

    @property
    def n_slots(self) -> int:
        """Ids given by the native index (live, deleted and placeholders)."""
        return self.index.n_slots

    def has(self, cid: int) -> bool:
        """True when chunk ``cid`` is in the view."""
        return self.index.is_alive(int(cid))

    # -- changes -------------------------------------------------------------

    def add(self, ids: Sequence[int], texts: Sequence[str]) -> None:
        """Index ``texts[i]`` as chunk ``ids[i]``.

        Ids must be live chunk ids above every id already in the view (views
        are filled in id order); given in any order, they are sorted.
        """
        ids = [int(i) for i in ids]
        texts = list(texts)
        if len(ids) != len(texts):
            raise InputError(f"{len(ids)} ids and {len(texts)} texts")
        for i, t in enumerate(texts):
            if not isinstance(t, str):
                raise InputError(f"text {i} must be str, got {type(t).__name__}")
        if not ids:
            return
        if len(set(ids)) != len(ids):
            raise InputError("duplicate chunk ids in add")
        if self._store is not None:
            dead = [c for c in ids if c not in self._store.chunks]
            if dead:
                raise InputError(f"BM25 view {self.name!r}: no live chunk with id(s) {dead[:10]}")
        ix = self.index
        order = sorted(range(len(ids)), key=ids.__getitem__)
        ids = [ids[i] for i in order]
        texts = [texts[i] for i in order]
        if ids[0] < ix.n_slots:
            raise InputError(f"BM25 view {self.name!r} already covers chunk ids below {ix.n_slots}; "
                             f"cannot add id {ids[0]} (rebuild the view to re-index chunks)")
        self._changing()
        # Build the full run of slots from n_slots to the last id; gaps become deleted placeholders.
        run: list[str] = []
        gaps: list[int] = []
        nxt = ix.n_slots
        for cid, t in zip(ids, texts):
            while nxt < cid:
                run.append("")
                gaps.append(nxt)
                nxt += 1
            run.append(t)
            nxt += 1
        first = ix.n_slots
        got = ix.add(run)
        if got.tolist() != list(range(first, ids[-1] + 1)):
            raise RuntimeError("internal error: BM25 ids out of step with chunk ids")  # pragma: no cover
        if gaps:
            ix.delete(gaps)

    def delete(self, ids: Sequence[int]) -> int:
        """Remove these chunks from the view (ids not in it are ignored); returns how many."""
        ix = self.index
        ids = sorted({int(c) for c in ids if ix.is_alive(int(c))})
        if not ids:
            return 0
        self._changing()
        ix.delete(ids)
        return len(ids)

    # -- queries -------------------------------------------------------------

    def search(self, query: str, k: int, allowed: Sequence[int] | None = None) -> list[tuple[int, float]]:
        """Top-``k`` ``(chunk_id, score)``; only chunks sharing a token with the query.

        ``allowed`` (chunk ids) restricts the candidates.
        """
        ix = self.index
        mask = None
        if allowed is not None:
            mask = np.zeros(ix.n_slots, dtype=bool)
            a = np.asarray(list(allowed), dtype=np.int64)
            mask[a[(a >= 0) & (a < ix.n_slots)]] = True
        ids, scores = ix.search(query, k, mask=mask)
        return list(zip(ids.tolist(), scores.tolist()))

    # -- saving --------------------------------------------------------------

    def write(self, folder: Path) -> list[str]:
        rel = f"bm25/{self.name}.bin"
        p = Path(folder) / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        self.index.save(p)
        return [rel]

    def describe(self) -> dict:
        d = {"params": dict(self.params)}
        if self._bm25 is not None:
            d["rows"] = self._bm25.n_docs
        return d
