"""The chunk table of a store: one row (slot) per chunk id, columnar, saved per segment.

Each segment that added chunks holds their rows under ``chunks/``::

    doc.npy start.npy end.npy index.npy paragraph.npy sentence.npy section.npy live.npy
    text.bin text_offsets.npy   chunk texts: UTF-8 blob, rows + 1 byte offsets (from 0)
    docs.json                   the document ids ``doc.npy`` indexes (this segment's own list)
    sections.json               the distinct section paths ``section.npy`` indexes (its own list)
    tail.npy tails.json         each chunk's tail (the whitespace between its end and the next
                                chunk's start in its document): an index into the segment's
                                distinct tails, -1 where unknown (segments written before tails
                                were kept have neither file: every tail unknown)

and any segment may hold ``chunks/meta.jsonl`` (metadata of chunks set or changed in
that commit; a later segment's line wins) and ``chunks/deleted.npy`` (the ids of
older chunks deleted in that commit: the tombstones). The rows of the segments,
oldest first, are the slots ``0, 1, 2, ...``: chunk ids are global and never reused.

On open the columns of every segment are read into memory (about 45 bytes per
chunk); the texts stay memory-mapped per segment; metadata is read on first use.
A deleted chunk keeps its row with ``live = False``; its text leaves the store when
its segment is merged.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InputError, StoreCorruptedError
from ..text.model import Chunk
from ._io import check_json, jsonl, write_file, write_npy
from ._blocks import BlockCheck
from .artifact import Artifact, Part, write_tombstones

#: Column name -> dtype.
COLUMNS: dict[str, Any] = {
    "doc": np.int32,
    "start": np.int64,
    "end": np.int64,
    "index": np.int32,
    "paragraph": np.int32,
    "sentence": np.int32,
    "section": np.int32,
    "live": np.bool_,
}
#: The tail column: an index into :attr:`ChunkTable._tails`, -1 where the tail is unknown (optional per segment).
TAIL_FILE = "chunks/tail.npy"
TAILS_FILE = "chunks/tails.json"
#: The file of a segment that holds new rows (one of the columns).
ROWS_FILE = "chunks/live.npy"
META_FILE = "chunks/meta.jsonl"
DELETED_FILE = "chunks/deleted.npy"


def _intern(values: list, index: dict, value: Any) -> int:
    """The position of ``value`` in the distinct ``values`` (``index``: value -> position), appended when new."""
    i = index.get(value)
    if i is None:
        i = index[value] = len(values)
        values.append(value)
    return i


class _Texts:
    """The texts of a run of rows: a UTF-8 blob (bytes, bytearray or memory map) and rows + 1 offsets.

    ``check``: the blob's block check when it is read from a store file not verified at open
    (each block is verified the first time a text in it is read)."""

    __slots__ = ("base", "offsets", "blob", "check")

    def __init__(self, base: int, offsets, blob, check: BlockCheck | None = None):
        self.base, self.offsets, self.blob, self.check = base, offsets, blob, check

    def get(self, cid: int) -> str:
        i = cid - self.base
        lo, hi = int(self.offsets[i]), int(self.offsets[i + 1])
        if self.check is not None:
            self.check.span(lo, hi)
        return _decode(bytes(self.blob[lo:hi]), self.check)

    def verify(self) -> None:
        """Verify the whole blob (it is about to be read whole)."""
        if self.check is not None:
            self.check.whole()


def _decode(raw: bytes, check: BlockCheck | None) -> str:
    """A stored text; undecodable bytes are a StoreCorruptedError, never a traceback."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        where = f"store file {check.path}" if check is not None else "a store's chunk texts"
        raise StoreCorruptedError(f"{where} is corrupted: a chunk text is not valid UTF-8 ({exc.reason}); rebuild the "
                                  "store (momoka index ... --overwrite) or restore it from a backup") from None


class ChunkTable(Artifact):
    """Chunks by id: spans, positions, sections, texts and sparse metadata.

    Iterating gives the live chunk ids ascending; ``len`` counts live chunks;
    :attr:`n_slots` counts every id ever given.
    """

    kind = "chunks"

    def __init__(self, store=None):
        super().__init__(store, "chunks", {})
        self._cols: dict[str, np.ndarray] = {k: np.zeros(0, dtype=t) for k, t in COLUMNS.items()}
        self._texts: list[_Texts] = []  # by base, ascending; the last may be the unsaved tail
        self._bases = np.zeros(0, dtype=np.int64)
        self._docs: list[str] = []
        self._doc_index: dict[str, int] = {}
        self._sections: list[tuple[str, ...]] = [()]
        self._section_index: dict[tuple[str, ...], int] = {(): 0}
        self._tail_col = np.zeros(0, dtype=np.int32)  # by slot: index into _tails, -1 unknown
        self._tails: list[str] = []
        self._tail_index: dict[str, int] = {}
        self._meta: dict[int, dict] | None = {}
        self._meta_parts: list[Part] = []  # meta files not read yet
        self._n_live = 0
        # the delta: rows from _saved on, metadata changed, older rows deleted since the last save
        self._saved = 0
        self._meta_dirty: set[int] = set()
        self._deleted: set[int] = set()

    # -- loading -------------------------------------------------------------

    def load_parts(self, parts: list[Part]) -> None:
        """Read the rows and tombstones of every segment (oldest first); metadata is read on first use."""
        self.set_parts(parts)
        cols: dict[str, list[np.ndarray]] = {k: [] for k in COLUMNS}
        tails: list[np.ndarray] = []
        n = 0
        deleted: list[np.ndarray] = []
        for part in parts:
            base = part.folder
            try:
                if part.has(ROWS_FILE):
                    what = self._what()
                    for rel in [f"chunks/{k}.npy" for k in COLUMNS] + ["chunks/text_offsets.npy", "chunks/docs.json",
                                                                         "chunks/sections.json", TAIL_FILE, TAILS_FILE]:
                        part.check_whole(rel, what)
                    got = {k: np.load(base / f"chunks/{k}.npy", allow_pickle=False) for k in COLUMNS}
                    offsets = np.load(base / "chunks/text_offsets.npy", mmap_mode="r", allow_pickle=False)
                    docs = json.loads((base / "chunks/docs.json").read_text(encoding="utf-8"))
                    sections = [tuple(s) for s in json.loads((base / "chunks/sections.json").read_text(encoding="utf-8"))]
                    size = (base / "chunks/text.bin").stat().st_size
                    rows = len(got["live"])
                    if (any(len(c) != rows for c in got.values()) or len(offsets) != rows + 1
                            or int(offsets[-1]) != size or (rows and (got["doc"].min() < 0 or got["doc"].max() >= len(docs)
                                                                      or got["section"].max() >= len(sections)))):
                        raise ValueError("columns of different lengths")
                    dmap = np.array([self._doc_slot(str(d)) for d in docs] or [0], dtype=np.int32)
                    smap = np.array([self._section_slot(tuple(s)) for s in sections] or [0], dtype=np.int32)
                    got["doc"] = dmap[got["doc"]] if rows else got["doc"]
                    got["section"] = smap[got["section"]] if rows else got["section"]
                    for k in COLUMNS:
                        cols[k].append(np.asarray(got[k], dtype=COLUMNS[k]))
                    tails.append(self._load_tails(part, rows))
                    blob = np.memmap(base / "chunks/text.bin", dtype=np.uint8, mode="r") if size else b""
                    self._texts.append(_Texts(n, offsets, blob, part.check("chunks/text.bin", what)))
                    n += rows
                if part.has(DELETED_FILE):
                    part.check_whole(DELETED_FILE, self._what())
                    d = np.load(base / DELETED_FILE, allow_pickle=False).astype(np.int64)
                    if len(d) and (d.min() < 0 or d.max() >= n):
                        raise ValueError("tombstones of chunks that do not exist")
                    deleted.append(d)
            except FileNotFoundError:
                raise
            except (OSError, ValueError, TypeError, IndexError) as exc:
                raise StoreCorruptedError(f"store {part.folder} has a corrupted chunk table: {exc}") from None
        self._cols = {k: (np.concatenate(v) if v else np.zeros(0, dtype=COLUMNS[k])) for k, v in cols.items()}
        self._tail_col = np.concatenate(tails) if tails else np.zeros(0, dtype=np.int32)
        for d in deleted:
            self._cols["live"][d] = False
        self._bases = np.array([t.base for t in self._texts], dtype=np.int64)
        self._meta_parts = [p for p in parts if p.has(META_FILE) and p.files[META_FILE].get("bytes")]
        self._meta = None if self._meta_parts else {}
        self._n_live = int(np.count_nonzero(self._cols["live"]))
        self._saved = self.n_slots

    def _load_tails(self, part: Part, rows: int) -> np.ndarray:
        """The tail column of a segment's ``rows`` new rows, as indices into :attr:`_tails` (-1 when unknown)."""
        if not part.has(TAIL_FILE):
            return np.full(rows, -1, dtype=np.int32)
        col = np.load(part.folder / TAIL_FILE, allow_pickle=False).astype(np.int32)
        known = json.loads((part.folder / TAILS_FILE).read_text(encoding="utf-8"))
        if (len(col) != rows or not isinstance(known, list) or not all(isinstance(t, str) for t in known)
                or (rows and (col.min() < -1 or col.max() >= len(known)))):
            raise ValueError("a tail column that does not match its rows")
        tmap = np.array([self._tail_slot(t) for t in known] + [-1], dtype=np.int32)
        return tmap[col]  # -1 indexes the appended -1

    @classmethod
    def from_arrays(cls, store, cols: dict[str, np.ndarray], docs: list[str], sections: list, offsets, blob,
                    meta: dict[int, dict]) -> ChunkTable:
        """A table from whole columns (older store formats); all of it is unsaved."""
        t = cls(store)
        t._docs = list(docs)
        t._doc_index = {d: i for i, d in enumerate(t._docs)}
        t._sections = [tuple(s) for s in sections] or [()]
        t._section_index = {s: i for i, s in enumerate(t._sections)}
        t._cols = {k: np.array(cols[k], dtype=COLUMNS[k]) for k in COLUMNS}
        t._tail_col = np.full(t.n_slots, -1, dtype=np.int32)
        t._texts = [_Texts(0, np.array(offsets, dtype=np.int64), bytearray(bytes(blob)))]
        t._bases = np.zeros(1, dtype=np.int64)
        t._meta = {int(k): dict(v) for k, v in meta.items()}
        t._n_live = int(np.count_nonzero(t._cols["live"]))
        t.unsave()
        return t

    @classmethod
    def from_records(cls, store, records: Iterable[dict], n_slots: int | None = None) -> ChunkTable:
        """A table from chunk dicts with ``id`` (format version 1's chunks.jsonl); missing ids are dead."""
        recs = sorted(records, key=lambda r: int(r["id"]))
        t = cls(store)
        n = int(recs[-1]["id"]) + 1 if recs else 0
        n = max(n, int(n_slots or 0))
        texts = {int(r["id"]): r["text"] for r in recs}
        chunks = {int(r["id"]): Chunk(r["text"], r["start"], r["end"], r["doc_id"], r["index"], r["paragraph"],
                                      r["sentence"], tuple(r.get("section") or ()), dict(r.get("metadata") or {}))
                  for r in recs}
        blob = bytearray()
        offsets = np.zeros(n + 1, dtype=np.int64)
        for i in range(n):
            blob += texts.get(i, "").encode("utf-8")
            offsets[i + 1] = len(blob)
        t._grow(n)
        t._texts = [_Texts(0, offsets, blob)]
        t._bases = np.zeros(1, dtype=np.int64)
        for cid, c in chunks.items():
            t._set_row(cid, str(c.doc_id), c)
        t.unsave()
        return t

    def _load_meta(self) -> dict[int, dict]:
        if self._meta is None:
            meta: dict[int, dict] = {}
            for part in self._meta_parts:
                p = self._read(part, META_FILE)
                try:
                    with open(p, encoding="utf-8") as f:
                        for line in f:
                            r = json.loads(line)
                            if r["metadata"]:
                                meta[int(r["id"])] = dict(r["metadata"])
                            else:
                                meta.pop(int(r["id"]), None)
                except (OSError, ValueError, KeyError, TypeError) as exc:
                    raise StoreCorruptedError(f"store file {p} is corrupted: {exc}") from None
            self._meta = meta
            self._meta_parts = []
        return self._meta

    def loaded(self) -> bool:
        return self._meta is not None

    # -- reading -------------------------------------------------------------

    @property
    def n_slots(self) -> int:
        """Number of chunk ids ever given (live and deleted)."""
        return len(self._cols["live"])

    def __len__(self) -> int:
        return self._n_live

    def live_count(self, lo: int, hi: int) -> int:
        """How many of the chunk ids ``lo..hi`` are live."""
        return int(np.count_nonzero(self._cols["live"][lo:hi]))

    def ids(self) -> np.ndarray:
        """The live chunk ids, ascending (int64)."""
        return np.flatnonzero(self._cols["live"]).astype(np.int64)

    def __iter__(self) -> Iterator[int]:
        return iter(self.ids().tolist())

    def __contains__(self, cid: object) -> bool:
        if isinstance(cid, (bool, np.bool_)) or not isinstance(cid, (int, np.integer)):
            return False
        return 0 <= int(cid) < self.n_slots and bool(self._cols["live"][int(cid)])

    def _check(self, cid: int) -> int:
        if cid not in self:
            raise KeyError(f"no live chunk with id {cid!r}")
        return int(cid)

    def _text(self, c: int) -> str:
        return self._texts[int(np.searchsorted(self._bases, c, side="right")) - 1].get(c)

    def text(self, cid: int) -> str:
        """The text of chunk ``cid``."""
        return self._text(self._check(cid))

    def texts(self, ids: Sequence[int]) -> list[str]:
        """The texts of the given chunks, in order."""
        return [self.text(int(c)) for c in ids]

    def scan(self) -> Iterator[tuple[int, str, str, dict]]:
        """Every live chunk, ascending, as ``(id, doc id, text, metadata)``, read in one pass over the stored
        texts (what a per-id loop over :meth:`doc_id`, :meth:`text` and :meth:`metadata` gives, without their
        per-call checks). The metadata dicts are the table's own: read them, do not change them."""
        live = self._cols["live"].tolist()
        doc = self._cols["doc"].tolist()
        meta = self._load_meta()
        empty: dict = {}
        for t in self._texts:
            t.verify()
            offs = t.offsets.tolist() if isinstance(t.offsets, np.ndarray) else list(t.offsets)
            blob = t.blob
            for i in range(len(offs) - 1):
                c = t.base + i
                if c < len(live) and live[c]:
                    yield (c, self._docs[doc[c]], _decode(bytes(blob[offs[i]:offs[i + 1]]), t.check),
                           meta.get(c, empty))

    def doc_id(self, cid: int) -> str:
        """The id of the document chunk ``cid`` belongs to."""
        return self._docs[int(self._cols["doc"][self._check(cid)])]

    def span(self, cid: int) -> tuple[str, int, int]:
        """``(doc_id, start, end)`` of chunk ``cid``."""
        c = self._check(cid)
        return (self._docs[int(self._cols["doc"][c])], int(self._cols["start"][c]), int(self._cols["end"][c]))

    def row(self, cid: int) -> tuple[str, int, int, str, tuple[str, ...]]:
        """``(doc_id, start, end, text, section)`` of chunk ``cid`` in one look-up (what a result member needs)."""
        c = self._check(cid)
        cols = self._cols
        return (self._docs[int(cols["doc"][c])], int(cols["start"][c]), int(cols["end"][c]), self._text(c),
                self._sections[int(cols["section"][c])])

    def section(self, cid: int) -> tuple[str, ...]:
        """The section path of chunk ``cid``."""
        return self._sections[int(self._cols["section"][self._check(cid)])]

    def metadata(self, cid: int) -> dict:
        """The metadata dict of chunk ``cid`` (empty when it has none); changes go through :meth:`set_metadata`."""
        c = self._check(cid)
        return dict(self._load_meta().get(c, {}))

    def get(self, cid: int) -> Chunk:
        """Chunk ``cid`` as a :class:`~momoka.text.model.Chunk` (KeyError when it is not live)."""
        c = self._check(cid)
        cols = self._cols
        return Chunk(self._text(c), int(cols["start"][c]), int(cols["end"][c]), self._docs[int(cols["doc"][c])],
                     int(cols["index"][c]), int(cols["paragraph"][c]), int(cols["sentence"][c]),
                     self._sections[int(cols["section"][c])], self.metadata(c), self.tail(c))

    def tail(self, cid: int) -> str | None:
        """The tail of chunk ``cid``: the text between its end and the next chunk's start in its document
        (:attr:`momoka.text.model.Chunk.tail`), None when unknown (the last chunk of a document, stores built
        before tails were kept)."""
        t = int(self._tail_col[self._check(cid)])
        return None if t < 0 else self._tails[t]

    def tail_column(self) -> tuple[np.ndarray, list[str]]:
        """By slot, the index of each chunk's tail into the returned list of distinct tails (-1: unknown);
        read-only."""
        v = self._tail_col.view()
        v.flags.writeable = False
        return v, list(self._tails)

    def column(self, name: str) -> np.ndarray:
        """A column by slot (read-only): start, end, index, paragraph, sentence, section, doc or live."""
        if name not in COLUMNS:
            raise KeyError(f"no chunk column {name!r}; columns: {', '.join(COLUMNS)}")
        v = self._cols[name].view()
        v.flags.writeable = False
        return v

    @property
    def doc_list(self) -> list[str]:
        """The document ids the ``doc`` column indexes (deleted documents included)."""
        return list(self._docs)

    # -- changes -------------------------------------------------------------

    def _doc_slot(self, doc_id: str) -> int:
        return _intern(self._docs, self._doc_index, doc_id)

    def _section_slot(self, sec: tuple) -> int:
        return _intern(self._sections, self._section_index, sec)

    def _tail_slot(self, tail: str) -> int:
        return _intern(self._tails, self._tail_index, tail)

    def _grow(self, n: int) -> None:
        for k, t in COLUMNS.items():
            self._cols[k] = np.concatenate([self._cols[k], np.zeros(n, dtype=t)])
        self._tail_col = np.concatenate([self._tail_col, np.full(n, -1, dtype=np.int32)])

    def _set_row(self, cid: int, doc_id: str, c: Chunk) -> None:
        di = self._doc_slot(doc_id)
        si = self._section_slot(tuple(c.section or ()))
        cols = self._cols
        cols["doc"][cid], cols["start"][cid], cols["end"][cid] = di, c.start, c.end
        cols["index"][cid], cols["paragraph"][cid], cols["sentence"][cid] = c.index, c.paragraph, c.sentence
        cols["section"][cid], cols["live"][cid] = si, True
        self._tail_col[cid] = -1 if c.tail is None else self._tail_slot(c.tail)
        self._n_live += 1
        if c.metadata:
            self._load_meta()[cid] = dict(c.metadata)
            self._meta_dirty.add(cid)

    def _tail(self) -> _Texts:
        """The texts of the rows not saved yet (a new, in-memory run)."""
        if not self._texts or self._texts[-1].base < self._saved or isinstance(self._texts[-1].blob, np.memmap):
            self._texts.append(_Texts(self.n_slots, [0], bytearray()))
            self._bases = np.append(self._bases, self.n_slots)
        t = self._texts[-1]
        if not isinstance(t.offsets, list):
            t.offsets = [int(x) for x in t.offsets]
        if not isinstance(t.blob, bytearray):
            t.blob = bytearray(bytes(t.blob))
        return t

    def append(self, rows: Sequence[tuple[str, Chunk]]) -> list[int]:
        """Add ``(doc_id, chunk)`` rows; returns their new ids (consecutive from :attr:`n_slots`)."""
        for i, (did, c) in enumerate(rows):
            if not isinstance(c, Chunk):
                raise InputError(f"chunk {i} of {did!r} must be a Chunk, got {type(c).__name__}")
            if not isinstance(c.text, str):
                raise InputError(f"chunk {i} of {did!r}: text must be str")
        self._changing()
        if not rows:
            return []
        tail = self._tail()
        start = self.n_slots
        self._grow(len(rows))
        for _, c in rows:
            tail.blob += c.text.encode("utf-8")
            tail.offsets.append(len(tail.blob))
        for j, (did, c) in enumerate(rows):
            self._set_row(start + j, did, c)
        return list(range(start, start + len(rows)))

    def delete(self, ids: Iterable[int]) -> None:
        """Mark chunks dead (their rows stay; ids are never reused)."""
        ids = sorted({self._check(int(c)) for c in ids})
        if not ids:
            return
        self._changing()
        self._cols["live"][ids] = False
        self._n_live -= len(ids)
        self._deleted.update(c for c in ids if c < self._saved)
        meta = self._load_meta()
        for c in ids:
            meta.pop(c, None)
            self._meta_dirty.discard(c)

    def set_metadata(self, cid: int, key: str, value: Any) -> None:
        """Set one metadata entry of chunk ``cid`` (JSON-serialisable value)."""
        c = self._check(cid)
        if not isinstance(key, str):
            raise InputError(f"metadata key must be str, got {type(key).__name__}")
        check_json(value, f"metadata value for {key!r}")
        meta = self._load_meta()
        self._changing()
        meta.setdefault(c, {})[key] = value
        self._meta_dirty.add(c)

    # -- saving --------------------------------------------------------------

    def has_delta(self) -> bool:
        return self._saved < self.n_slots or bool(self._meta_dirty) or bool(self._deleted)

    def _write_rows(self, base: Path, lo: int, hi: int, live_texts_only: bool) -> list[str]:
        """Columns and texts of rows ``lo..hi`` with their own doc and section lists."""
        cols = {k: np.asarray(self._cols[k][lo:hi]) for k in COLUMNS}
        docs, dinv = np.unique(cols["doc"], return_inverse=True)
        secs, sinv = np.unique(cols["section"], return_inverse=True)
        cols["doc"], cols["section"] = dinv.astype(np.int32), sinv.astype(np.int32)
        for k in COLUMNS:
            write_npy(base / f"chunks/{k}.npy", cols[k].astype(COLUMNS[k]))
        enc = [(self._text(c).encode("utf-8") if (cols["live"][c - lo] or not live_texts_only) else b"")
               for c in range(lo, hi)]
        offsets = np.zeros(hi - lo + 1, dtype=np.int64)
        if enc:
            offsets[1:] = np.cumsum([len(b) for b in enc])
        write_npy(base / "chunks/text_offsets.npy", offsets)
        write_file(base / "chunks/text.bin", b"".join(enc))
        write_file(base / "chunks/docs.json", json.dumps([self._docs[int(i)] for i in docs],
                                                         ensure_ascii=False).encode("utf-8"))
        write_file(base / "chunks/sections.json", json.dumps([list(self._sections[int(i)]) for i in secs],
                                                             ensure_ascii=False).encode("utf-8"))
        tail = np.asarray(self._tail_col[lo:hi])
        known, tinv = np.unique(tail[tail >= 0], return_inverse=True)
        local = np.full(len(tail), -1, dtype=np.int32)
        local[tail >= 0] = tinv
        write_npy(base / TAIL_FILE, local)
        write_file(base / TAILS_FILE, json.dumps([self._tails[int(i)] for i in known]).encode("utf-8"))
        return [f"chunks/{k}.npy" for k in [*COLUMNS, "text_offsets"]] + [
            f"chunks/{f}" for f in ("text.bin", "docs.json", "sections.json")] + [TAIL_FILE, TAILS_FILE]

    def _write_meta(self, base: Path, ids: Iterable[int]) -> list[str]:
        meta = self._load_meta()
        rows = [{"id": c, "metadata": meta.get(c, {})} for c in sorted(set(ids))]
        if not rows:
            return []
        write_file(base / META_FILE, jsonl(rows))
        return [META_FILE]


    def write_delta(self, folder: Path) -> list[str]:
        base = Path(folder)
        n = self.n_slots
        files = self._write_rows(base, self._saved, n, False) if self._saved < n else []
        files += self._write_meta(base, self._meta_dirty)
        return files + write_tombstones(base, DELETED_FILE, self._deleted)

    def write_merged(self, folder: Path, parts: list[Part], lo: int, hi: int) -> list[str]:
        base = Path(folder)
        files = self._write_rows(base, lo, hi, True) if hi > lo else []
        meta = self._load_meta()
        older_meta: set[int] = set()
        older_dead: set[int] = set()
        for part in parts:  # what the run changed in older segments still holds
            if part.has(META_FILE):
                with open(self._read(part, META_FILE), encoding="utf-8") as f:
                    older_meta.update(c for c in (int(json.loads(line)["id"]) for line in f) if c < lo)
            if part.has(DELETED_FILE):
                d = np.load(part.path(DELETED_FILE, verify=True, what=self._what()), allow_pickle=False)
                older_dead.update(int(c) for c in d if c < lo)
        files += self._write_meta(base, older_meta | {c for c in meta if lo <= c < hi})
        return files + write_tombstones(base, DELETED_FILE, older_dead)

    def committed(self) -> None:
        self._saved = self.n_slots
        self._meta_dirty.clear()
        self._deleted.clear()

    def unsave(self) -> None:
        self._saved = 0
        self._meta_dirty = set(self._load_meta())
        self._deleted.clear()

    def describe(self) -> dict:
        return {"rows": self.n_slots, "live": len(self)}
