"""The chunk table of a store: one row (slot) per chunk id, columnar.

Saved under ``chunks/`` in a generation::

    doc.npy start.npy end.npy index.npy paragraph.npy sentence.npy section.npy live.npy
    text.bin text_offsets.npy   chunk texts: UTF-8 blob, n_slots + 1 byte offsets
    docs.json                   the document ids ``doc.npy`` indexes
    sections.json               the distinct section paths ``section.npy`` indexes
    meta.jsonl                  per-chunk metadata dicts, only chunks that have any

Columns and the text blob are memory-mapped on open and copied into memory
on the first change; metadata is read on first use. A deleted chunk keeps its
row with ``live = False`` (ids are never reused); its text is dropped from the
blob at the next save.
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
from .artifact import Artifact

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


class ChunkTable(Artifact):
    """Chunks by id: spans, positions, sections, texts and sparse metadata.

    Iterating gives the live chunk ids ascending; ``len`` counts live chunks;
    :attr:`n_slots` counts every id ever given.
    """

    kind = "chunks"

    def __init__(self, store=None):
        super().__init__(store, "chunks", {})
        self._cols: dict[str, np.ndarray] = {k: np.zeros(0, dtype=t) for k, t in COLUMNS.items()}
        self._offsets = np.zeros(1, dtype=np.int64)
        self._blob: Any = bytearray()
        self._docs: list[str] = []
        self._doc_index: dict[str, int] = {}
        self._sections: list[tuple[str, ...]] = [()]
        self._section_index: dict[tuple[str, ...], int] = {(): 0}
        self._meta: dict[int, dict] | None = {}
        self._owned = True  # arrays are private copies (not memory maps)
        self._n_live = 0

    # -- loading -------------------------------------------------------------

    @classmethod
    def load(cls, store, gen_dir: Path, files: dict[str, dict]) -> ChunkTable:
        """Open the table saved in ``gen_dir/chunks`` (columns memory-mapped, metadata lazy)."""
        t = cls(store)
        t.attach(gen_dir, files)
        base = Path(gen_dir) / "chunks"
        try:
            cols = {k: np.load(base / f"{k}.npy", mmap_mode="r", allow_pickle=False) for k in COLUMNS}
            offsets = np.load(base / "text_offsets.npy", mmap_mode="r", allow_pickle=False)
            docs = json.loads((base / "docs.json").read_text(encoding="utf-8"))
            sections = [tuple(s) for s in json.loads((base / "sections.json").read_text(encoding="utf-8"))]
            size = (base / "text.bin").stat().st_size
        except FileNotFoundError:
            raise
        except (OSError, ValueError) as exc:
            raise StoreCorruptedError(f"store {gen_dir} has a corrupted chunk table: {exc}") from None
        n = len(cols["live"])
        if any(len(c) != n for c in cols.values()) or len(offsets) != n + 1 or (n and int(offsets[-1]) != size):
            raise StoreCorruptedError(f"store {gen_dir} has a corrupted chunk table: columns of different lengths")
        t._cols, t._offsets, t._docs, t._sections = cols, offsets, list(docs), sections or [()]
        t._blob = np.memmap(base / "text.bin", dtype=np.uint8, mode="r") if size else bytearray()
        t._doc_index = {d: i for i, d in enumerate(t._docs)}
        t._section_index = {s: i for i, s in enumerate(t._sections)}
        t._meta = None if "chunks/meta.jsonl" in files and files["chunks/meta.jsonl"]["bytes"] else {}
        t._owned = False
        t._n_live = int(np.count_nonzero(cols["live"]))
        return t

    @classmethod
    def from_records(cls, store, records: Iterable[dict], n_slots: int | None = None) -> ChunkTable:
        """A table from chunk dicts with ``id`` (format version 1's chunks.jsonl); missing ids are dead."""
        recs = sorted(records, key=lambda r: int(r["id"]))
        t = cls(store)
        n = int(recs[-1]["id"]) + 1 if recs else 0
        n = max(n, int(n_slots or 0))
        t._grow(n)
        for r in recs:
            cid = int(r["id"])
            t._set_row(cid, str(r["doc_id"]), Chunk(r["text"], r["start"], r["end"], r["doc_id"], r["index"],
                                                    r["paragraph"], r["sentence"], tuple(r.get("section") or ()),
                                                    dict(r.get("metadata") or {})))
        t._pack_texts({int(r["id"]): r["text"] for r in recs}, n)
        return t

    def _load_meta(self) -> dict[int, dict]:
        if self._meta is None:
            meta: dict[int, dict] = {}
            p = self.path_of("chunks/meta.jsonl", verify=True)
            try:
                with open(p, encoding="utf-8") as f:
                    for line in f:
                        r = json.loads(line)
                        meta[int(r["id"])] = dict(r["metadata"])
            except (OSError, ValueError, KeyError) as exc:
                raise StoreCorruptedError(f"store file {p} is corrupted: {exc}") from None
            self._meta = meta
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

    def text(self, cid: int) -> str:
        """The text of chunk ``cid``."""
        c = self._check(cid)
        return bytes(self._blob[int(self._offsets[c]) : int(self._offsets[c + 1])]).decode("utf-8")

    def texts(self, ids: Sequence[int]) -> list[str]:
        """The texts of the given chunks, in order."""
        return [self.text(int(c)) for c in ids]

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
        text = bytes(self._blob[int(self._offsets[c]) : int(self._offsets[c + 1])]).decode("utf-8")
        return (self._docs[int(cols["doc"][c])], int(cols["start"][c]), int(cols["end"][c]), text,
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
        return Chunk(self.text(c), int(cols["start"][c]), int(cols["end"][c]), self._docs[int(cols["doc"][c])],
                     int(cols["index"][c]), int(cols["paragraph"][c]), int(cols["sentence"][c]),
                     self._sections[int(cols["section"][c])], self.metadata(c))

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

    def _own(self) -> None:
        """Copy memory-mapped columns into memory before the first change."""
        if not self._owned:
            self._cols = {k: np.array(v) for k, v in self._cols.items()}
            self._offsets = np.array(self._offsets)
            self._blob = bytearray(bytes(self._blob))
            self._owned = True

    def _grow(self, n: int) -> None:
        for k, t in COLUMNS.items():
            self._cols[k] = np.concatenate([self._cols[k], np.zeros(n, dtype=t)])

    def _set_row(self, cid: int, doc_id: str, c: Chunk) -> None:
        di = self._doc_index.get(doc_id)
        if di is None:
            di = self._doc_index[doc_id] = len(self._docs)
            self._docs.append(doc_id)
        sec = tuple(c.section or ())
        si = self._section_index.get(sec)
        if si is None:
            si = self._section_index[sec] = len(self._sections)
            self._sections.append(sec)
        cols = self._cols
        cols["doc"][cid], cols["start"][cid], cols["end"][cid] = di, c.start, c.end
        cols["index"][cid], cols["paragraph"][cid], cols["sentence"][cid] = c.index, c.paragraph, c.sentence
        cols["section"][cid], cols["live"][cid] = si, True
        self._n_live += 1
        if c.metadata:
            self._load_meta()[cid] = dict(c.metadata)

    def _pack_texts(self, texts: dict[int, str], n: int) -> None:
        blob = bytearray()
        offsets = np.zeros(n + 1, dtype=np.int64)
        for i in range(n):
            t = texts.get(i)
            if t:
                blob += t.encode("utf-8")
            offsets[i + 1] = len(blob)
        self._blob, self._offsets = blob, offsets

    def append(self, rows: Sequence[tuple[str, Chunk]]) -> list[int]:
        """Add ``(doc_id, chunk)`` rows; returns their new ids (consecutive from :attr:`n_slots`)."""
        for i, (did, c) in enumerate(rows):
            if not isinstance(c, Chunk):
                raise InputError(f"chunk {i} of {did!r} must be a Chunk, got {type(c).__name__}")
            if not isinstance(c.text, str):
                raise InputError(f"chunk {i} of {did!r}: text must be str")
        self._changing()
        self._own()
        start = self.n_slots
        self._grow(len(rows))
        enc = [c.text.encode("utf-8") for _, c in rows]
        base = int(self._offsets[-1])
        self._offsets = np.concatenate([self._offsets, base + np.cumsum([len(b) for b in enc], dtype=np.int64)])
        self._blob += b"".join(enc)
        for j, (did, c) in enumerate(rows):
            self._set_row(start + j, did, c)
        return list(range(start, start + len(rows)))

    def delete(self, ids: Iterable[int]) -> None:
        """Mark chunks dead (their rows stay; ids are never reused)."""
        ids = [self._check(int(c)) for c in ids]
        if not ids:
            return
        self._changing()
        self._own()
        self._cols["live"][ids] = False
        self._n_live -= len(set(ids))
        meta = self._load_meta()
        for c in ids:
            meta.pop(c, None)

    def set_metadata(self, cid: int, key: str, value: Any) -> None:
        """Set one metadata entry of chunk ``cid`` (JSON-serialisable value)."""
        c = self._check(cid)
        if not isinstance(key, str):
            raise InputError(f"metadata key must be str, got {type(key).__name__}")
        check_json(value, f"metadata value for {key!r}")
        meta = self._load_meta()
        self._changing()
        meta.setdefault(c, {})[key] = value

    # -- saving --------------------------------------------------------------

    def write(self, folder: Path) -> list[str]:
        base = Path(folder) / "chunks"
        base.mkdir(parents=True, exist_ok=True)
        live = np.asarray(self._cols["live"])
        lengths = np.diff(np.asarray(self._offsets))
        if np.any(lengths[~live] > 0):  # drop the texts of dead chunks
            texts = {int(c): self.text(int(c)) for c in np.flatnonzero(live)}
            self._own()
            self._pack_texts(texts, self.n_slots)
        for k in COLUMNS:
            write_npy(base / f"{k}.npy", np.asarray(self._cols[k], dtype=COLUMNS[k]))
        write_npy(base / "text_offsets.npy", np.asarray(self._offsets, dtype=np.int64))
        write_file(base / "text.bin", bytes(self._blob))
        write_file(base / "docs.json", json.dumps(self._docs, ensure_ascii=False).encode("utf-8"))
        write_file(base / "sections.json",
                   json.dumps([list(s) for s in self._sections], ensure_ascii=False).encode("utf-8"))
        meta = self._load_meta()
        write_file(base / "meta.jsonl", jsonl({"id": c, "metadata": meta[c]} for c in sorted(meta) if meta[c]))
        names = [*COLUMNS, "text_offsets"]
        return [f"chunks/{k}.npy" for k in names] + [f"chunks/{f}" for f in
                                                     ("text.bin", "docs.json", "sections.json", "meta.jsonl")]

    def describe(self) -> dict:
        return {"rows": self.n_slots, "live": len(self)}
