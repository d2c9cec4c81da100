"""Block checksums of store files: every byte read is verified, however large the store.

Each file a segment lists carries, beside its size and sha256, the CRC-32 of each
:data:`BLOCK`-byte block (the last one shorter): ``"blocks"`` in its manifest
record, the little-endian ``uint32`` values base64-encoded. The manifest's own
sha256 covers them. What the open-time check (:mod:`momoka.store._verify`) did not
verify eagerly is verified when it is read:

- a file read whole (chunk columns, offsets, document entries, vector ids) when it is
  loaded, all of its blocks (:meth:`BlockCheck.whole`);
- memory-mapped data (chunk texts, vector rows) one block at a time, the first time a
  read touches it (:meth:`BlockCheck.span`, :meth:`BlockCheck.rows`); a block is
  verified once per open file, so a warm reader pays nothing more.

Lucene does the same in spirit: a checksum footer on every file, checked when a file is
read whole and by ``CheckIndex``. A mismatch is a :class:`~momoka.errors.StoreCorruptedError`
naming the file and the damaged bytes. A file written before block checksums were
recorded is verified whole by its sha256 on first read instead.
"""

from __future__ import annotations

import base64
import hashlib
import threading
import zlib
from pathlib import Path

import numpy as np

from ..errors import StoreCorruptedError

#: Bytes per checksummed block (64 KiB: about 25 microseconds of CRC-32 on first read).
BLOCK = 1 << 16
_READ = 1 << 20  # bytes read at a time when a file is checksummed whole


def file_record(path: Path) -> dict:
    """``{"bytes", "sha256", "blocks"}`` of a written file, as the manifest lists it (one pass over it)."""
    h = hashlib.sha256()
    crcs: list[int] = []
    size = 0
    with open(path, "rb") as f:
        for buf in iter(lambda: f.read(_READ), b""):
            h.update(buf)
            mv = memoryview(buf)
            crcs.extend(zlib.crc32(mv[i:i + BLOCK]) for i in range(0, len(buf), BLOCK))
            size += len(buf)
    return {"bytes": size, "sha256": h.hexdigest(), "blocks": encode(crcs)}


def encode(crcs) -> str:
    """The manifest form of a list of block CRC-32s."""
    return base64.b64encode(np.asarray(crcs, dtype="<u4").tobytes()).decode("ascii")


def decode(text: str) -> np.ndarray:
    """The block CRC-32s of a manifest record's ``"blocks"`` (ValueError when malformed)."""
    raw = base64.b64decode(text.encode("ascii"), validate=True)
    if len(raw) % 4:
        raise ValueError("block checksums of a length not a multiple of 4")
    return np.frombuffer(raw, dtype="<u4")


class BlockCheck:
    """Verifies one file of a store against its manifest record, each block the first time it is read.

    ``path``: the file; ``rec``: its manifest record; ``what``: how messages name it
    (``" of chunk table 'chunks'"``). Safe to call from several threads (a block may
    then be verified twice, never skipped).
    """

    __slots__ = ("path", "what", "size", "_crcs", "_sha", "_done", "_all", "_map", "_lock")

    def __init__(self, path: Path, rec: dict, what: str = ""):
        self.path = Path(path)
        self.what = what
        self.size = int(rec.get("bytes") or 0)
        self._sha = rec.get("sha256")
        self._crcs = None
        self._all = False
        self._map = None
        self._lock = threading.Lock()
        blocks = rec.get("blocks")
        if blocks is not None:
            try:
                self._crcs = decode(blocks)
            except (ValueError, TypeError, AttributeError):
                raise self._error("has malformed block checksums in the manifest") from None
            if len(self._crcs) != -(-self.size // BLOCK):
                raise self._error(f"has {len(self._crcs)} block checksums for {self.size} bytes in the manifest")
        elif not self._sha:
            self._all = True  # nothing recorded to check against
        self._done = bytearray(len(self._crcs) if self._crcs is not None else 0)

    def _error(self, why: str) -> StoreCorruptedError:
        return StoreCorruptedError(
            f"store file {self.path}{self.what} is corrupted: {why}; rebuild the store "
            "(momoka index ... --overwrite) or restore it from a backup", self.path)

    def _data(self) -> np.ndarray:
        if self._map is None:
            with self._lock:
                if self._map is None:
                    try:
                        self._map = np.memmap(self.path, dtype=np.uint8, mode="r") if self.size else np.zeros(0, np.uint8)
                    except FileNotFoundError:
                        raise StoreCorruptedError(f"store file {self.path}{self.what} is missing (deleted?); restore "
                                                  "it from a backup or rebuild the store (momoka index ... --overwrite)",
                                                  self.path) from None
                    if len(self._map) != self.size:
                        raise self._error(f"has {len(self._map)} bytes, the manifest says {self.size}")
        return self._map

    def _verify(self, b: int) -> None:
        data = self._data()
        lo = b * BLOCK
        if zlib.crc32(data[lo:lo + BLOCK]) != int(self._crcs[b]):
            raise self._error(f"bytes {lo}-{min(lo + BLOCK, self.size)} do not match their checksum")
        self._done[b] = 1

    def _whole_sha(self) -> None:
        h = hashlib.sha256()
        data = self._data()
        for lo in range(0, self.size, _READ):
            h.update(data[lo:lo + _READ])
        if h.hexdigest() != self._sha:
            raise self._error("does not match its sha256")
        self._all = True

    def whole(self) -> None:
        """Verify every block not verified yet (the file is read whole)."""
        if self._all:
            return
        if self._crcs is None:
            self._whole_sha()
            return
        for b in range(len(self._done)):
            if not self._done[b]:
                self._verify(b)
        self._all = True

    def span(self, lo: int, hi: int) -> None:
        """Verify the blocks that bytes ``lo..hi`` of the file touch."""
        if self._all or hi <= lo:
            return
        if self._crcs is None:
            self._whole_sha()
            return
        done = self._done
        for b in range(lo // BLOCK, (hi - 1) // BLOCK + 1):
            if not done[b]:
                self._verify(b)

    def rows(self, rows: np.ndarray, offset: int, row_bytes: int) -> None:
        """Verify the blocks holding ``rows`` of an array of ``row_bytes``-byte rows starting at byte ``offset``."""
        if self._all or len(rows) == 0:
            return
        if self._crcs is None:
            self._whole_sha()
            return
        r = np.asarray(rows, dtype=np.int64)
        first = (offset + r * row_bytes) // BLOCK
        last = (offset + (r + 1) * row_bytes - 1) // BLOCK
        blocks = np.unique(np.concatenate([first, last])) if row_bytes <= BLOCK else np.unique(
            np.concatenate([np.arange(a, z + 1) for a, z in zip(first.tolist(), last.tolist())]))
        done = self._done
        for b in blocks.tolist():
            if not done[b]:
                self._verify(b)
