"""The documents of a store (``documents.jsonl``): one line per document, its metadata and its chunk ids."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class DocEntry:
    """A document of the store: its metadata and the ids of its chunks."""

    doc_id: str
    title: str | None = None
    source: str | None = None
    length: int = 0
    chunk_ids: list[int] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    #: sha256 of the indexed text and title (None for documents indexed before it was recorded).
    sha256: str | None = None

    def to_dict(self) -> dict:
        """The ``documents.jsonl`` line of this document."""
        d = {"doc_id": self.doc_id, "title": self.title, "source": self.source, "length": self.length,
             "chunk_ids": self.chunk_ids}
        if self.metadata:
            d["metadata"] = self.metadata
        if self.sha256:
            d["sha256"] = self.sha256
        return d

    @classmethod
    def from_dict(cls, r: dict) -> DocEntry:
        """A document from its ``documents.jsonl`` line."""
        return cls(r["doc_id"], r.get("title"), r.get("source"), int(r.get("length") or 0),
                   [int(c) for c in r["chunk_ids"]], dict(r.get("metadata") or {}), r.get("sha256"))


class TrackedMeta(dict):
    """A document's metadata dict that tells the store when it changes (the next save writes the document)."""

    __slots__ = ("_changed",)

    def __init__(self, data, changed):
        super().__init__(data)
        self._changed = changed

    def __reduce__(self):  # copies and pickles are plain dicts
        return (dict, (dict(self),))

    def _touch(self):
        self._changed()


def _tracking(name):
    base = getattr(dict, name)

    def method(self, *args, **kwargs):
        self._touch()  # before the change: a read-only store refuses it
        return base(self, *args, **kwargs)

    method.__name__ = name
    return method


for _name in ("__setitem__", "__delitem__", "update", "pop", "popitem", "setdefault", "clear", "__ior__"):
    setattr(TrackedMeta, _name, _tracking(_name))
