"""Reading stores of format version 1 into the in-memory structures.

Version 1 kept, per generation: ``documents.jsonl``, ``chunks.jsonl`` (one JSON
record per live chunk, with its id), ``vectors.npy`` (rows in chunk id order of
the live chunks), ``hnsw.bin``, ``bm25.bin``; the manifest held ``embedder``,
``bm25`` and ``vector_dtype``. They become the chunk table, vector view ``raw``
(source ``{"text": "chunk"}``) and BM25 view ``raw``; the next save writes
them as one segment (format version 3).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ..errors import StoreCorruptedError
from .bm25 import BM25
from .bm25_view import BM25View
from .chunk_table import ChunkTable
from ._manifest import RAW_VIEW
from .documents import DocEntry
from .vectors import VectorView



def load_v1(store, gdir: Path, manifest: dict) -> None:
    """Read a format-version-1 generation into ``store`` (written as one segment by the next save)."""

    root = store.path
    try:
        with open(gdir / "documents.jsonl", encoding="utf-8") as f:
            documents = {d.doc_id: d for d in (DocEntry.from_dict(json.loads(line)) for line in f)}
        with open(gdir / "chunks.jsonl", encoding="utf-8") as f:
            records = [json.loads(line) for line in f]
        bm25 = BM25.load(gdir / "bm25.bin")
    except FileNotFoundError:
        raise
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise StoreCorruptedError(f"store {root} is corrupted ({gdir.name}): {exc}") from None
    n_slots = int(manifest["counts"]["slots"])
    if bm25.n_slots != n_slots or bm25.n_docs != len(records):
        raise StoreCorruptedError(f"store {root} is corrupted: BM25 index and chunks disagree")
    try:
        store.chunks = ChunkTable.from_records(store, records, n_slots)
    except (KeyError, TypeError, ValueError) as exc:
        raise StoreCorruptedError(f"store {root} is corrupted (chunks.jsonl): {exc}") from None
    params = manifest.get("bm25") or {}  # no tokenizer_version: rule 1 (stored_params)
    store.put_artifact("bm25", RAW_VIEW, BM25View.from_index(store, RAW_VIEW, bm25, params=params, source={"text": "chunk"}))
    emb = manifest.get("embedder")
    if emb:
        dim = int(emb["dim"])
        try:
            vecs = np.load(gdir / "vectors.npy", allow_pickle=False)
        except FileNotFoundError:
            raise
        except (OSError, ValueError) as exc:
            raise StoreCorruptedError(f"store {root} is corrupted (vectors): {exc}") from None
        ids = store.chunks.ids()
        if vecs.shape != (len(ids), dim):
            raise StoreCorruptedError(f"store {root} is corrupted: vectors {vecs.shape} for {len(ids)} chunks")
        rows = np.zeros((n_slots, dim), dtype=vecs.dtype)
        rows[ids] = vecs
        has = np.zeros(n_slots, dtype=bool)
        has[ids] = True
        graph = None
        if len(ids):
            import hnswlib  # start-up: hnswlib

            graph = hnswlib.Index(space="ip", dim=dim)
            try:
                graph.load_index(str(gdir / "hnsw.bin"), max_elements=max(len(ids), 16))
            except RuntimeError as exc:
                if not (gdir / "hnsw.bin").is_file():
                    raise FileNotFoundError(gdir / "hnsw.bin") from None
                raise StoreCorruptedError(f"store {root} is corrupted (HNSW index): {exc}") from None
        store.put_artifact("vectors", RAW_VIEW, VectorView.from_rows(
            store, RAW_VIEW, embedder=emb, rows=rows, has=has, source={"text": "chunk"},
            hnsw=manifest.get("hnsw"), graph=graph))
    store.documents = documents
    # The artifacts read here have no segment yet: the store marks them unsaved, and the next save writes them.
