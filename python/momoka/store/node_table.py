"""Node tables: rows of non-chunk nodes (entities ...) that relations can point at.

File of a node table in a segment: ``nodes/NAME.jsonl``, the nodes added in that
commit, one JSON object per line; node ids count on from the older segments'
nodes (node id = line number across the segments, oldest first). Read on first use.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..errors import InputError, StoreCorruptedError
from ._io import check_json, jsonl, write_file
from .artifact import Artifact, Part, SpannedParts


class NodeTable(SpannedParts, Artifact):
    """Nodes with ids 0, 1, 2, ... in the order they are added, each a JSON-serialisable dict.

    ``id_fields`` declares the fields of a row that hold store ids (an int, a list of ints or None):
    ``{"chunks": "chunk", "src": "nodes/entities"}`` (chunk ids, or node ids of a node table), and
    ``doc_fields`` the document metadata that holds ids of this table's nodes (``{"jerr":
    ["first_entity"]}``: ``metadata["jerr"]["first_entity"]``). A batch built apart (a Ray worker's
    :class:`~momoka.store.delta.Delta`) has its own ids; these declarations let the store renumber them.
    """

    kind = "nodes"

    def __init__(self, store, name: str, source: dict | None = None, *, id_fields: dict | None = None,
                 doc_fields: dict | None = None):
        super().__init__(store, name, source)
        self.id_fields = {str(k): str(v) for k, v in (id_fields or {}).items()}
        self.doc_fields = {str(k): [str(f) for f in v] for k, v in (doc_fields or {}).items()}
        bad = [v for v in self.id_fields.values() if v != "chunk" and not v.startswith("nodes/")]
        if bad:
            raise InputError(f"node table {name!r}: an id field holds 'chunk' or 'nodes/NAME' ids, not {bad[0]!r}")
        self._rows: list[dict] | None = []
        self._saved = 0
        self._spans: dict[str, tuple[int, int]] = {}  # segment -> the node ids its part holds
        self._new_span: tuple[int, int] | None = None  # those of the part written last

    def _file(self) -> str:
        return f"nodes/{self.name}.jsonl"

    def load_parts(self, parts: list[Part]) -> None:
        """Remember the segments' parts; they are read on first use."""
        self.set_parts(parts)
        self._rows, self._saved = None, 0

    def loaded(self) -> bool:
        return self._rows is not None

    def _data(self) -> list[dict]:
        if self._rows is None:
            rows: list[dict] = []
            spans = {}
            for part in self.parts:
                if not part.has(self._file()):
                    continue
                p = self._read(part, self._file())
                first = len(rows)
                try:
                    with open(p, encoding="utf-8") as f:
                        rows.extend(json.loads(line) for line in f)
                except (OSError, ValueError) as exc:
                    raise StoreCorruptedError(f"store file {p} (node table {self.name!r}) is corrupted: {exc}") from None
                spans[part.segment] = (first, len(rows))
            self._rows, self._saved, self._spans = rows, len(rows), spans
        return self._rows

    def add(self, rows: list[dict]) -> list[int]:
        """Append nodes; returns their ids."""
        rows = list(rows)
        for i, r in enumerate(rows):
            if not isinstance(r, dict):
                raise InputError(f"node {i} must be a dict, got {type(r).__name__}")
            check_json(r, f"node {i}")
        data = self._data()
        self._changing()
        start = len(data)
        data.extend(dict(r) for r in rows)
        return list(range(start, start + len(rows)))

    def get(self, node_id: int) -> dict:
        """Node ``node_id`` (KeyError when there is none)."""
        data = self._data()
        i = int(node_id)
        if not 0 <= i < len(data):
            raise KeyError(f"node table {self.name!r} has no node {node_id!r}")
        return dict(data[i])

    def __len__(self) -> int:
        return len(self._data())

    # -- saving --------------------------------------------------------------

    def has_delta(self) -> bool:
        return self._rows is not None and len(self._rows) > self._saved

    def _write(self, folder: Path, lo: int, hi: int) -> list[str]:
        self._new_span = (lo, hi)
        if hi <= lo:
            return []
        write_file(Path(folder) / self._file(), jsonl(self._data()[lo:hi]))
        return [self._file()]

    def write_delta(self, folder: Path) -> list[str]:
        return self._write(folder, self._saved, len(self._data()))

    def write_merged(self, folder: Path, parts: list[Part], lo: int, hi: int) -> list[str]:
        self._data()
        spans = [self._spans[p.segment] for p in parts if p.segment in self._spans]
        return self._write(folder, spans[0][0], spans[-1][1]) if spans else []

    def committed(self) -> None:
        if self._rows is not None:
            self._saved = len(self._rows)

    def set_parts(self, parts: list[Part]) -> None:
        """After a save or merge: point at the new segments (the rows in memory stay)."""
        super().set_parts(parts)
        if self._rows is None:
            return
        new = self._new_span
        self._spans = {p.segment: (self._spans.get(p.segment) or new) for p in parts if p.has(self._file())}
        self._new_span = None

    def unsave(self) -> None:
        self._data()
        self._saved = 0

    def describe(self) -> dict:
        d: dict = {"rows": len(self._rows)} if self._rows is not None else {}
        if self.id_fields:
            d["id_fields"] = dict(self.id_fields)
        if self.doc_fields:
            d["doc_fields"] = {k: list(v) for k, v in self.doc_fields.items()}
        return d
