"""The base of every store artifact: its parts in the store's segments, its unsaved changes, checksums.

A store (format version 3) is a list of immutable segments (:mod:`momoka.store.segments`).
Each artifact keeps, per segment, the files of its *part* there (``{rel: {"bytes",
"sha256"}}``), reads them on open or on first use, and holds its changes since the last
save in memory: its *delta*. A save writes every artifact's delta into one new segment;
a merge writes the current state of a run of segments into one.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import StoreCorruptedError, StoreError
from ._blocks import BlockCheck
from ._io import sha256_file, write_npy

if TYPE_CHECKING:  # pragma: no cover
    from .store import Store


class StoreWarning(UserWarning):
    """Something in a store was repaired or skipped on the fly (e.g. a damaged HNSW graph rebuilt)."""


def write_tombstones(folder: Path, rel: str, ids) -> list[str]:
    """Write the ids ``ids`` (sorted, int64) as file ``rel`` of a segment folder; ``[rel]``, or ``[]`` when none."""
    ids = sorted(int(i) for i in ids)
    if not ids:
        return []
    write_npy(Path(folder) / rel, np.array(ids, dtype=np.int64))
    return [rel]


class Part:
    """The files one artifact has in one segment: ``folder`` (the segment's folder) and their records.

    ``unchecked``: the files not verified when the store was opened, which :meth:`check`
    verifies block by block as they are read (None: every file is trusted, e.g. just written).
    """

    __slots__ = ("segment", "folder", "files", "unchecked", "_checks")

    def __init__(self, segment: str, folder: Path, files: dict[str, dict], unchecked: frozenset[str] | None = None):
        self.segment = segment
        self.folder = Path(folder)
        self.files = {k: dict(v) for k, v in files.items()}
        self.unchecked = unchecked
        self._checks: dict[str, BlockCheck] = {}

    def check(self, rel: str, what: str = "") -> BlockCheck | None:
        """The block check of file ``rel`` when it still needs verifying as it is read, else None."""
        if not self.unchecked or rel not in self.unchecked or rel not in self.files:
            return None
        c = self._checks.get(rel)
        if c is None:
            c = self._checks[rel] = BlockCheck(self.folder / rel, self.files[rel], what)
        return c

    def check_whole(self, rel: str, what: str = "") -> None:
        """Verify file ``rel`` whole (it is about to be read whole) unless it was verified at open."""
        c = self.check(rel, what)
        if c is not None:
            c.whole()

    def has(self, rel: str) -> bool:
        """True when the part has file ``rel``."""
        return rel in self.files

    def path(self, rel: str, verify: bool = False, what: str = "") -> Path:
        """The file ``rel`` of this part; with ``verify`` its sha256 is checked against the manifest."""
        p = self.folder / rel
        if not p.is_file():
            # Readers lease their generation, so no writer removed it: the file was deleted.
            raise StoreCorruptedError(
                f"store file {p}{what} is missing (deleted?); restore it from a backup "
                "or rebuild the store (momoka index ... --overwrite)", p)
        rec = self.files.get(rel)
        if verify and rec and rec.get("sha256") and sha256_file(p) != rec["sha256"]:
            raise StoreCorruptedError(f"store file {p}{what} is corrupted (sha256 differs)", p)
        return p


class Artifact:
    """A named part of a store, saved as one part per segment.

    Subclasses set :attr:`kind` and implement :meth:`load_parts` (build the state
    from the parts of the segments, oldest first), :meth:`has_delta`,
    :meth:`write_delta` (write the changes since the last save into a segment
    folder, return their paths relative to it), :meth:`write_merged` (write the
    current state of what a run of segments held), :meth:`committed` (the delta
    was saved) and :meth:`describe` (the kind-specific fields of the manifest
    entry); they call :meth:`_changing` before every change.
    """

    kind = "artifact"

    def __init__(self, store: Store | None, name: str, source: dict | None = None):
        self._store = store
        self.name = name
        self.source: dict = dict(source or {})
        self.parts: list[Part] = []  # its files in the store's segments, oldest first

    @property
    def key(self) -> str:
        """The part key of this artifact in a segment entry (``"vectors/raw"``, ``"chunks"``)."""
        return self.kind if self.kind == "chunks" else f"{self.kind}/{self.name}"

    def _what(self) -> str:
        return f" of {self.kind} {self.name!r}"

    # -- persistence ---------------------------------------------------------

    def set_parts(self, parts: list[Part]) -> None:
        """Point the artifact at its saved parts (after open, save or merge; the state stays in memory)."""
        self.parts = list(parts)

    def load_parts(self, parts: list[Part]) -> None:  # pragma: no cover - abstract
        """Read the state saved in ``parts`` (oldest first); lazy kinds only remember them."""
        raise NotImplementedError

    def loaded(self) -> bool:
        """True when nothing is left to read from disk (lazy parts are in memory)."""
        return True

    def has_delta(self) -> bool:  # pragma: no cover - abstract
        """True when there are changes not yet saved."""
        raise NotImplementedError

    @property
    def dirty(self) -> bool:
        """True when there are changes not yet saved (same as :meth:`has_delta`)."""
        return self.has_delta()

    def write_delta(self, folder: Path) -> list[str]:  # pragma: no cover - abstract
        """Write the changes since the last save into ``folder``; return their paths relative to it."""
        raise NotImplementedError

    def write_merged(self, folder: Path, parts: list[Part], lo: int, hi: int) -> list[str]:  # pragma: no cover
        """Write the current state of what ``parts`` (a run of consecutive segments, whose new chunk rows
        are the slots ``lo..hi``) held into ``folder``; return the paths written."""
        raise NotImplementedError

    def committed(self) -> None:  # pragma: no cover - abstract
        """The delta was saved: forget it."""
        raise NotImplementedError

    def merged_into(self, names: list[str], segment: str) -> None:
        """Segments ``names`` (consecutive) were replaced by ``segment``, which a merge wrote apart from
        this object; called before :meth:`set_parts` points it at the new parts."""

    def unsave(self) -> None:  # pragma: no cover - abstract
        """Treat the whole state as unsaved (a store of an older format is written anew)."""
        raise NotImplementedError

    def describe(self) -> dict[str, Any]:
        """Kind-specific fields of the manifest entry (besides kind, name, source)."""
        return {}

    def entry(self) -> dict[str, Any]:
        """The manifest entry of this artifact (its files are listed by the segments)."""
        d = {"kind": self.kind, "name": self.name, "source": self.source}
        d.update(self.describe())
        return d

    # -- changes -------------------------------------------------------------

    def _changing(self) -> None:
        """Called before a change: the store must be writable."""
        if self._store is not None:
            self._store.ensure_writable()

    def _read(self, part: Part, rel: str) -> Path:
        """The verified path of file ``rel`` of ``part`` (read on first use)."""
        return part.path(rel, verify=True, what=self._what())

    def _no_parts_error(self) -> StoreError:
        return StoreError(f"{self.kind} {self.name!r} has no saved files")


class SpannedParts:
    """For artifacts that keep which of their ids each segment's part holds (``_spans``: segment ->
    ``(first, stop)``): a merged segment holds the ids of the segments it replaced."""

    _spans: dict[str, tuple[int, int]]

    def merged_into(self, names: list[str], segment: str) -> None:
        spans = [self._spans.pop(n, None) for n in names]
        spans = [s for s in spans if s is not None]  # (none known before the parts are read)
        if spans:
            self._spans[segment] = (spans[0][0], spans[-1][1])
