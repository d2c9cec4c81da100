"""Reading stores of format version 2 into memory (the next save writes them as one segment).

Version 2 kept every artifact whole in its generation folder: ``documents.jsonl``,
``chunks/`` (columns by slot, ``text.bin`` + ``text_offsets.npy``, ``docs.json``,
``sections.json``, ``meta.jsonl``), ``vectors/NAME.npy`` + ``NAME.has.npy``,
``hnsw/NAME.bin``, ``bm25/NAME.bin``, ``relations/NAME.npz`` and ``nodes/NAME.jsonl``,
each listed with its files in the manifest's ``artifacts``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ..errors import StoreCorruptedError, StoreError
from ._verify import check_on_open_v2
from .bm25 import BM25
from .bm25_view import BM25View
from .chunk_table import COLUMNS, ChunkTable
from .documents import DocEntry
from .node_table import NodeTable
from .relations import Relation
from .vectors import VectorView


def load_v2(store, gdir: Path, manifest: dict) -> None:
    """Read a format-version-2 generation into ``store`` (everything in memory, unsaved)."""
    root = store.path
    entries = manifest.get("artifacts") or []
    check_on_open_v2(root, gdir.name, entries)
    try:
        with open(gdir / "documents.jsonl", encoding="utf-8") as f:
            documents = {d.doc_id: d for d in (DocEntry.from_dict(json.loads(line)) for line in f)}
        base = gdir / "chunks"
        cols = {k: np.load(base / f"{k}.npy", allow_pickle=False) for k in COLUMNS}
        offsets = np.load(base / "text_offsets.npy", allow_pickle=False)
        docs = json.loads((base / "docs.json").read_text(encoding="utf-8"))
        sections = json.loads((base / "sections.json").read_text(encoding="utf-8"))
        blob = (base / "text.bin").read_bytes()
        meta = {}
        if (base / "meta.jsonl").is_file():
            with open(base / "meta.jsonl", encoding="utf-8") as f:
                for line in f:
                    r = json.loads(line)
                    meta[int(r["id"])] = dict(r["metadata"])
        n = len(cols["live"])
        if any(len(c) != n for c in cols.values()) or len(offsets) != n + 1 or int(offsets[-1]) != len(blob):
            raise ValueError("chunk columns of different lengths")
        store.chunks = ChunkTable.from_arrays(store, cols, docs, sections, offsets, blob, meta)
        hnsw = manifest.get("hnsw")
        for e in entries:
            kind, name = e.get("kind"), e.get("name")
            if kind == "vectors":
                rows = np.load(gdir / f"vectors/{name}.npy", allow_pickle=False)
                has = np.load(gdir / f"vectors/{name}.has.npy", allow_pickle=False)
                v = VectorView.from_rows(store, name, embedder=e["embedder"], rows=rows, has=has,
                                         source=e.get("source"), hnsw=hnsw)
                store.put_artifact("vectors", name, v)
            elif kind == "bm25":
                store.put_artifact("bm25", name, BM25View.from_index(
                    store, name, BM25.load(gdir / f"bm25/{name}.bin"), params=e.get("params") or {},
                    source=e.get("source")))
            elif kind == "relation":
                r = Relation(store, name, ordered=e.get("ordered", True), weighted=e.get("weighted", False),
                             target_table=e.get("target_table"), source=e.get("source"))
                with np.load(gdir / f"relations/{name}.npz", allow_pickle=False) as z:
                    src, indptr, ind = z["sources"], z["indptr"], z["indices"]
                    w = z["weights"] if r.weighted else None
                for i, c in enumerate(src.tolist()):
                    a, b = int(indptr[i]), int(indptr[i + 1])
                    r._rows[c] = ind[a:b].astype(np.int64)
                    if w is not None:
                        r._weights[c] = w[a:b].astype(np.float32)
                store.put_artifact("relation", name, r)
            elif kind == "nodes":
                t = NodeTable(store, name, e.get("source"), id_fields=e.get("id_fields"),
                              doc_fields=e.get("doc_fields"))
                with open(gdir / f"nodes/{name}.jsonl", encoding="utf-8") as f:
                    t._rows = [json.loads(line) for line in f]
                store.put_artifact("nodes", name, t)
            elif kind not in ("chunks", "documents"):
                raise StoreError(f"store {root} has an artifact of unknown kind {kind!r} ({name!r}); upgrade momoka")
    except FileNotFoundError:
        raise
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise StoreCorruptedError(f"store {root} is corrupted ({gdir.name}): {exc}") from None
    store.documents = documents
