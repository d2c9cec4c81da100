"""BM25 views: a native :class:`~momoka.store.bm25.BM25` index whose document ids are chunk ids.

Files of a view in a segment: ``bm25/NAME.bin``, a native index of the slots the
view gained in that commit (their ids counted from the first of them), and
``bm25/NAME.deleted.npy``, the ids of older slots deleted then (tombstones). On
first use the segments' indexes are appended into one in memory
(:meth:`~momoka.store.bm25.BM25.append`): its postings, lengths and liveness are
those of one index given every text in order, so corpus statistics (N, average
length, document frequencies) are global and a store of many segments ranks
exactly as the same store merged into one.

The native index gives ids 0, 1, 2, ... in the order texts are added, so a
view is filled in ascending chunk id order: slots of chunks it is not given
are added empty and deleted at once (a tombstone of a few bytes), keeping
BM25 id == chunk id.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..errors import ConfigError, InputError, StoreCorruptedError
from .artifact import Artifact, Part, SpannedParts, write_tombstones
from .bm25 import BM25, TOKENIZER_VERSION

#: Default BM25 settings of a new view: Okapi (rank_bm25's idf), Porter stemming, English stopwords, CJK
#: characters and character bigrams (tokeniser rule 2).
DEFAULT_BM25 = {"k1": 1.5, "b": 0.75, "epsilon": 0.25, "idf": "okapi", "stem": True, "stopwords": "english",
                "tokenizer_version": TOKENIZER_VERSION}
#: The tokeniser rule of a view whose stored parameters name none (written before rules had versions).
LEGACY_TOKENIZER_VERSION = 1


def stored_params(params: dict | None) -> dict:
    """A view's parameters as read from a store: over :data:`DEFAULT_BM25`, and without a
    ``tokenizer_version`` the rule of the stores that predate it (1: CJK characters one token each)."""
    params = dict(params or {})
    params.setdefault("tokenizer_version", LEGACY_TOKENIZER_VERSION)
    return dict(DEFAULT_BM25, **params)


def make_bm25(params: dict) -> BM25:
    """A fresh :class:`BM25` from view parameters (ConfigError for bad ones)."""
    try:
        return BM25(**params)
    except TypeError as exc:
        raise ConfigError(f"bad BM25 parameters {params!r}: {exc}") from None


class BM25View(SpannedParts, Artifact):
    """A BM25 index over some text of every chunk (``source`` says which, e.g. ``{"text": "chunk"}``)."""

    kind = "bm25"

    def __init__(self, store, name: str, *, params: dict | None = None, source: dict | None = None):
        """A view read from a store: ``params`` as stored (see :func:`stored_params`); new views come from
        :meth:`create`."""
        super().__init__(store, name, source)
        self.params = stored_params(params)
        self._bm25: BM25 | None = None
        self._saved = 0  # slots saved in segments
        self._pending: dict[int, str] = {}  # the texts added since the last save, by chunk id
        self._all_unsaved = True  # nothing saved yet: write the whole index
        self._deleted: set[int] = set()  # saved slots deleted since the last save
        self._spans: dict[str, tuple[int, int]] = {}  # segment -> the slots its piece holds
        self._new_span: tuple[int, int] | None = None  # those of the piece written last

    @classmethod
    def create(cls, store, name: str, *, params: dict | None = None, source: dict | None = None) -> BM25View:
        """A new, empty view (``params`` over :data:`DEFAULT_BM25`; checked now)."""
        v = cls(store, name, params=dict(DEFAULT_BM25, **(params or {})), source=source)
        v._bm25 = make_bm25(v.params)
        return v

    @classmethod
    def from_index(cls, store, name: str, bm25: BM25, *, params: dict, source: dict | None = None) -> BM25View:
        """A view around an index already read (older store formats); all of it is unsaved."""
        v = cls(store, name, params=params, source=source)
        v._bm25 = bm25
        return v

    def _files(self) -> tuple[str, str]:
        return f"bm25/{self.name}.bin", f"bm25/{self.name}.deleted.npy"

    def load_parts(self, parts: list[Part]) -> None:
        """Remember the segments' pieces; they are read and appended on first use."""
        self.set_parts(parts)
        self._bm25, self._all_unsaved, self._pending, self._deleted = None, False, {}, set()

    def loaded(self) -> bool:
        return self._bm25 is not None

    def _load(self) -> BM25:
        f_bin, f_del = self._files()
        ix = make_bm25(self.params)
        spans = {}
        for part in self.parts:
            try:
                if part.has(f_del):
                    d = np.load(self._read(part, f_del), allow_pickle=False).astype(np.int64).tolist()
                    bad = [c for c in d if not ix.is_alive(c)]
                    if bad:
                        raise ValueError(f"tombstones of slots that are not live: {bad[:5]}")
                    ix.delete(d)
                if part.has(f_bin):
                    piece = BM25.load(self._read(part, f_bin))
                    first = ix.n_slots
                    if first == 0 and piece.params == ix.params:
                        ix = piece  # the first piece is the index so far (appending it would only copy it)
                    else:
                        ix.append(piece)
                    spans[part.segment] = (first, ix.n_slots)
            except (ConfigError, InputError, ValueError) as exc:
                raise StoreCorruptedError(f"store {part.folder}: BM25 view {self.name!r} is corrupted: {exc}") from None
        self._spans = spans
        self._saved = ix.n_slots
        return ix

    @property
    def index(self) -> BM25:
        """The native index (read from disk on first use)."""
        if self._bm25 is None:
            self._bm25 = self._load()
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

    def unsaved_texts(self) -> dict[int, str]:
        """The texts added since the last save and still in the view, by chunk id (a native index cannot give
        its texts back; a batch's :class:`~momoka.store.delta.Delta` carries these)."""
        ix = self.index
        return {c: t for c, t in self._pending.items() if ix.is_alive(c)}

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
        self._pending.update(zip(ids, texts))

    def delete(self, ids: Sequence[int]) -> int:
        """Remove these chunks from the view (ids not in it are ignored); returns how many."""
        ix = self.index
        ids = sorted({int(c) for c in ids if ix.is_alive(int(c))})
        if not ids:
            return 0
        self._changing()
        ix.delete(ids)
        self._deleted.update(c for c in ids if c < self._saved)
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

    def has_delta(self) -> bool:
        if self._bm25 is None:
            return False
        return self._bm25.n_slots > self._saved or bool(self._deleted) or (self._all_unsaved and self._bm25.n_slots > 0)

    def _piece(self, lo: int, hi: int, texts: dict[int, str]) -> BM25:
        """A native index of slots ``lo..hi`` (ids from 0) holding ``texts``; the other slots deleted placeholders."""
        ix = self.index
        piece = make_bm25(self.params)
        piece.add([texts.get(c, "") for c in range(lo, hi)])
        dead = [c - lo for c in range(lo, hi) if not ix.is_alive(c)]
        if dead:
            piece.delete(dead)
        return piece

    def _write(self, folder: Path, piece: BM25 | None, deleted) -> list[str]:
        f_bin, f_del = self._files()
        files = []
        if piece is not None and piece.n_slots:
            p = Path(folder) / f_bin
            p.parent.mkdir(parents=True, exist_ok=True)
            piece.save(p)
            files.append(f_bin)
        return files + write_tombstones(folder, f_del, deleted)

    def write_delta(self, folder: Path) -> list[str]:
        ix = self.index
        lo = 0 if self._all_unsaved else self._saved
        self._new_span = (lo, ix.n_slots) if ix.n_slots > lo else None
        if self._all_unsaved:
            return self._write(folder, ix, ())
        return self._write(folder, self._piece(self._saved, ix.n_slots, self._pending), self._deleted)

    def write_merged(self, folder: Path, parts: list[Part], lo: int, hi: int) -> list[str]:
        f_bin, f_del = self._files()
        ix = self.index
        merged = make_bm25(self.params)
        for part in parts:
            if part.has(f_bin):
                merged.append(BM25.load(self._read(part, f_bin)))
        spans = [self._spans[p.segment] for p in parts if p.segment in self._spans]
        first = spans[0][0] if spans else 0
        dead = [c for c in range(merged.n_slots) if merged.is_alive(c) and not ix.is_alive(first + c)]
        if dead:
            merged.delete(dead)
        self._new_span = (first, first + merged.n_slots) if merged.n_slots else None
        older: set[int] = set()
        for part in parts:  # tombstones of older segments' slots stay
            if part.has(f_del):
                older.update(int(c) for c in np.load(self._read(part, f_del), allow_pickle=False) if c < first)
        return self._write(folder, merged, older)

    def committed(self) -> None:
        if self._bm25 is not None:
            self._saved = self._bm25.n_slots
        self._all_unsaved, self._pending, self._deleted = False, {}, set()

    def set_parts(self, parts: list[Part]) -> None:
        """After a save or merge: point at the new segments (the index in memory stays)."""
        super().set_parts(parts)
        if self._bm25 is None:
            return  # read with its spans on first use
        f_bin = self._files()[0]
        spans = {}
        for part in parts:
            if part.has(f_bin):
                span = self._spans.get(part.segment) or self._new_span
                if span is None:  # pragma: no cover - a piece this view did not write or read
                    raise RuntimeError(f"internal error: BM25 view {self.name!r} does not know segment {part.segment}")
                spans[part.segment] = span
        self._spans, self._new_span = spans, None

    def unsave(self) -> None:
        self.index  # noqa: B018 - read it all: it is written whole
        self._all_unsaved, self._pending, self._deleted, self._saved = True, {}, set(), 0

    def describe(self) -> dict:
        d = {"params": dict(self.params)}
        if self._bm25 is not None:
            d["rows"] = self._bm25.n_docs
            d["slots"] = self._bm25.n_slots
        return d
