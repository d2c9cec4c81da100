"""The base of every store artifact: where its files are, whether it changed, checksums."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import StoreCorruptedError, StoreError
from ._io import sha256_file

if TYPE_CHECKING:  # pragma: no cover
    from .store import Store


class StoreWarning(UserWarning):
    """Something in a store was repaired or skipped on the fly (e.g. a damaged HNSW graph rebuilt)."""


class Artifact:
    """A named part of a store saved as files in a generation folder.

    Subclasses set :attr:`kind`, implement :meth:`write` (write the files
    into a folder, return their relative paths) and :meth:`describe` (the
    kind-specific fields of the manifest entry), and call :meth:`_changing`
    before every change. An artifact opened from a generation keeps the
    folder and the manifest's file records, so it can read its files on first
    use and, when unchanged, be hard-linked into the next generation.
    """

    kind = "artifact"

    def __init__(self, store: Store | None, name: str, source: dict | None = None):
        self._store = store
        self.name = name
        self.source: dict = dict(source or {})
        self.folder: Path | None = None  # generation folder its files were read from
        self.files: dict[str, dict] = {}  # manifest records of those files
        self.dirty = True

    # -- persistence ---------------------------------------------------------

    def attach(self, gen_dir: Path, files: dict[str, dict]) -> None:
        """Point the artifact at its saved files (after open or save)."""
        self.folder = Path(gen_dir)
        self.files = {k: dict(v) for k, v in files.items()}
        self.dirty = False

    def path_of(self, rel: str, verify: bool = False) -> Path:
        """The saved file ``rel``; with ``verify`` its sha256 is checked against the manifest."""
        if self.folder is None:
            raise StoreError(f"{self.kind} {self.name!r} has no saved files")
        p = self.folder / rel
        if not p.is_file():
            # Readers lease their generation, so no writer removed it: the file was deleted.
            raise StoreCorruptedError(
                f"store file {p} of {self.kind} {self.name!r} is missing (deleted?); restore it from a backup "
                "or rebuild the store (momoka index ... --overwrite)", p)
        rec = self.files.get(rel)
        if verify and rec and rec.get("sha256") and sha256_file(p) != rec["sha256"]:
            raise StoreCorruptedError(f"store file {p} of {self.kind} {self.name!r} is corrupted (sha256 differs)", p)
        return p

    def loaded(self) -> bool:
        """True when nothing is left to read from disk (lazy parts are in memory)."""
        return True

    def write(self, folder: Path) -> list[str]:  # pragma: no cover - abstract
        """Write the artifact's files into ``folder``; return their paths relative to it."""
        raise NotImplementedError

    def describe(self) -> dict[str, Any]:
        """Kind-specific fields of the manifest entry (besides kind, name, files, source)."""
        return {}

    def entry(self, files: dict[str, dict]) -> dict[str, Any]:
        """The manifest entry of this artifact, given its file records."""
        d = {"kind": self.kind, "name": self.name, "files": files, "source": self.source}
        d.update(self.describe())
        return d

    # -- changes -------------------------------------------------------------

    def _changing(self) -> None:
        """Called before a change: the store must be writable; marks the artifact dirty."""
        if self._store is not None:
            self._store.ensure_writable()
        self.dirty = True
