"""A read-only :class:`Snapshot` of a store: one leased generation with the read API only.

``Store.open(path)`` returns one (as tantivy's ``IndexReader`` lends a searcher): the documents, the
chunk table and every artifact as the store's newest commit held them when it was opened. It holds a
shared lease on that generation (:mod:`momoka.store._lease`), so no writer deletes its files while it
is open, however many commits follow; :meth:`Snapshot.refresh` returns a new snapshot of the newest
commit (the old one answers as before until it is closed).

A snapshot never writes and never takes the writer lock: its write calls (``add_documents``,
``delete``, ``apply``, ``save``, ``add_vector_view``, ...) and every change through it (an
artifact's ``add``/``set``/``delete``, a document's metadata) raise
:class:`~momoka.errors.ReadOnlyError`. To change the store, open its writer
(``Store.open(path, writable=True)``), or make the writer of the very generation a snapshot loaded
with :meth:`StoreWriter.adopt <momoka.store.writer.StoreWriter.adopt>`.
"""

from __future__ import annotations

import os
from pathlib import Path

from ._kinds import KINDS
from ._manifest import read_manifest
from .chunk_table import ChunkTable
from .store import Store

#: What a :class:`~momoka.store.writer.StoreWriter` does and a snapshot refuses.
WRITES = frozenset({"add_documents", "apply", "delete", "save", "merge", "wait_merges", "mark_dirty",
                    "add_vector_view", "add_bm25_view", "add_relation", "add_node_table", "remove_artifact"})


class Snapshot(Store, role="reader"):
    """One generation of a store, leased, read-only (see the module docstring)."""

    @classmethod
    def open(cls, path: str | os.PathLike, *, writable: bool = False) -> Snapshot:
        """A snapshot of the newest commit of the store at ``path`` (format version 3, 2 or 1).

        ``writable`` must be False (it is there for ``Store.open``'s signature; ``True`` opens the
        :class:`~momoka.store.writer.StoreWriter`)."""
        if writable:
            return Store.open(path, writable=True)  # type: ignore[return-value]  (the writer)
        root = Path(path)
        snap = cls(root, read_manifest(root))
        try:
            snap._attach(snap.manifest)
        except BaseException:
            snap.close()
            raise
        return snap

    @classmethod
    def _bare(cls, root: Path, manifest: dict) -> Snapshot:
        """A snapshot of the segments ``manifest`` names, taking no lease (the caller leases; a merge uses it)."""
        snap = cls(root, manifest)
        snap._load(manifest)
        return snap

    def refresh(self) -> Snapshot:
        """A snapshot of the store's newest commit: a new one when a writer committed since this one was
        loaded, else this very snapshot. This one is unchanged (close it when done with it)."""
        if self.path is None:
            return self
        manifest = read_manifest(self.path)
        if manifest.get("dir") == self.manifest.get("dir"):
            return self
        new = type(self)(self.path, manifest)
        try:
            new._attach(manifest)
        except BaseException:
            new.close()
            raise
        return new

    @property
    def generation(self) -> int:
        """The number of the generation (commit) this snapshot holds."""
        return int(self.manifest.get("generation") or 0)

    def _given_away(self) -> None:
        """A writer took this snapshot's state over (:meth:`StoreWriter.adopt`): it holds nothing now."""
        self.documents, self.chunks, self.segments = {}, ChunkTable(self), []
        self._artifacts = {k: {} for k in KINDS}
        self._lease = None

    def __getattr__(self, name: str):
        if name in WRITES:
            raise self._read_only(f"call {name}()")
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
