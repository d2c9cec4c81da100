"""Node tables: rows of non-chunk nodes (entities ...) that relations can point at.

File in a generation: ``nodes/NAME.jsonl``, one JSON object per node (node id =
line number). Read on first use.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..errors import InputError, StoreCorruptedError
from ._io import check_json, jsonl, write_file
from .artifact import Artifact


class NodeTable(Artifact):
    """Nodes with ids 0, 1, 2, ... in the order they are added, each a JSON-serialisable dict."""

    kind = "nodes"

    def __init__(self, store, name: str, source: dict | None = None):
        super().__init__(store, name, source)
        self._rows: list[dict] | None = []

    @classmethod
    def load(cls, store, gen_dir: Path, entry: dict) -> NodeTable:
        """A saved table; its file is read on first use."""
        t = cls(store, entry["name"], entry.get("source"))
        t.attach(gen_dir, entry["files"])
        t._rows = None
        return t

    def loaded(self) -> bool:
        return self._rows is not None

    def _data(self) -> list[dict]:
        if self._rows is None:
            p = self.path_of(f"nodes/{self.name}.jsonl", verify=True)
            try:
                with open(p, encoding="utf-8") as f:
                    self._rows = [json.loads(line) for line in f]
            except (OSError, ValueError) as exc:
                raise StoreCorruptedError(f"store file {p} (node table {self.name!r}) is corrupted: {exc}") from None
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

    def write(self, folder: Path) -> list[str]:
        rel = f"nodes/{self.name}.jsonl"
        write_file(Path(folder) / rel, jsonl(self._data()))
        return [rel]

    def describe(self) -> dict:
        return {"rows": len(self._rows)} if self._rows is not None else {}
