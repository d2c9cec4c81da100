"""Checksums of a store: the manifest's own checksum, the checks on every open, the full verify.

Every file of a generation (of every segment's parts, :mod:`momoka.store.segments`)
is listed in the manifest with its size and sha256, and the manifest carries the sha256 of its own content
(``"checksum"``). What is checked when:

- every open: the manifest's checksum; every file's size (except an HNSW
  graph's: a damaged graph is rebuilt from the vectors on first use, with a
  warning, whatever the damage); the sha256 of the
  files read at open (documents, chunk columns, vectors), smallest first, up
  to :data:`VERIFY_ON_OPEN_BYTES` in total (``MOMOKA_VERIFY_MB`` changes it);
- every read of the rest: the block checksums of :mod:`momoka.store._blocks`,
  for the files read whole at open when they are loaded, and for memory-mapped
  chunk texts and vector rows each 64 KiB block the first time it is read, so
  damage anywhere is an error however large the store;
- first use: the sha256 of every file read lazily (HNSW graphs, BM25 indexes,
  relations, node tables, chunk metadata) before it is parsed;
- ``momoka store verify DIR`` (:func:`verify_store`): everything.

A mismatch is a :class:`~momoka.errors.StoreCorruptedError` naming the file.
"""

from __future__ import annotations

import os
from pathlib import Path

from .. import settings
from .._files import sha256_file
from ..errors import StoreCorruptedError
from ._manifest import read_manifest

#: Bytes of eagerly read files whose sha256 is checked on every open (64 MiB unless ``MOMOKA_VERIFY_MB``).
VERIFY_ON_OPEN_BYTES = int(settings.default("MOMOKA_VERIFY_MB") * (1 << 20))
#: Files read on first use (verified then, not at open).
LAZY_PREFIXES = ("hnsw/", "bm25/", "relations/", "nodes/", "chunks/meta.jsonl")
#: Labels of the artifact kinds, for messages.
LABELS = {"documents": "documents", "chunks": "chunk table", "vectors": "vector view", "bm25": "BM25 view",
          "relation": "relation", "nodes": "node table"}


def _budget() -> int:
    return int(settings.get_float("MOMOKA_VERIFY_MB") * (1 << 20))


def _files_v2(entries: list[dict]):
    for e in entries:
        label = f"{LABELS.get(e.get('kind'), e.get('kind'))} {e.get('name')!r}"
        for rel, rec in (e.get("files") or {}).items():
            yield rel, rec, label, rel


def _label(key: str) -> str:
    kind, _, name = key.partition("/")
    return f"{LABELS.get(kind, kind)} {name!r}" if name else LABELS.get(kind, kind)


def _files(segments: list[dict]):
    """``(path in the store, record, label, path in the segment)`` of every file of the segments."""
    for sg in segments:
        for key, files in (sg.get("parts") or {}).items():
            for rel, rec in (files or {}).items():
                yield f"{sg.get('name')}/{rel}", rec, _label(key), rel


def manifest_files(manifest: dict):
    """The files a manifest lists: ``(path in the store, record, label, path in the part)``."""
    if int(manifest.get("version") or 0) >= 3:
        return _files(manifest.get("segments") or [])
    gen = manifest.get("dir")
    return ((f"{gen}/{rel}", rec, label, inner) for rel, rec, label, inner in _files_v2(manifest.get("artifacts") or []))


def damaged(root: Path, rel: str, label: str, why: str) -> StoreCorruptedError:
    """The error for one damaged file ``rel`` (a path in the store; ``why``: what differs)."""
    p = Path(root) / rel
    return StoreCorruptedError(f"store {root} is corrupted: {rel} ({label}) {why}; rebuild the store "
                               "(momoka index ... --overwrite) or restore it from a backup", p)


def missing(root: Path, path: str | os.PathLike) -> StoreCorruptedError:
    """The error for a file of the manifest's own generation that is not there (deleted, not replaced)."""
    p = Path(path)
    try:
        rel = p.relative_to(root).as_posix()
    except ValueError:
        rel = str(p)
    return StoreCorruptedError(f"store {root} is corrupted: {rel} is missing (deleted?); restore it from a backup "
                               "or rebuild the store (momoka index ... --overwrite)", p)


def _check_files(root: Path, files) -> set[str]:
    root = Path(root)
    eager = []
    verified: set[str] = set()
    for rel, rec, label, inner in files:
        size = (root / rel).stat().st_size
        if size != rec.get("bytes") and inner.startswith("hnsw/"):
            continue  # its first use finds the damage and rebuilds the graph from the vectors, with a warning
        if size != rec.get("bytes"):
            raise damaged(root, rel, label, f"has {size} bytes, the manifest says {rec.get('bytes')}")
        if not inner.startswith(LAZY_PREFIXES):
            eager.append((size, rel, rec, label))
    left = _budget()
    for size, rel, rec, label in sorted(eager, key=lambda t: (t[0], t[1])):
        if size > left:
            break
        left -= size
        if rec.get("sha256") and sha256_file(root / rel) != rec["sha256"]:
            raise damaged(root, rel, label, "does not match its sha256")
        verified.add(rel)
    return verified


def check_on_open(root: Path, segments: list[dict]) -> set[str]:
    """Sizes of every file and sha256 of the eagerly read ones within the budget (see the module docstring).

    Returns the files (paths in the store) whose sha256 was verified; the others are verified
    block by block as they are read (:mod:`momoka.store._blocks`).
    FileNotFoundError passes (a writer may have replaced the generation: the caller retries).
    """
    return _check_files(root, _files(segments))


def check_on_open_v2(root: Path, gen: str, entries: list[dict]) -> None:
    """:func:`check_on_open` for a store of format version 2 (its files in generation folder ``gen``)."""
    _check_files(root, ((f"{gen}/{rel}", rec, label, inner) for rel, rec, label, inner in _files_v2(entries)))


def verify_store(path: str | os.PathLike) -> dict:
    """Check every file the store's manifest lists (its current generation's segments) against it.

    Returns ``{"generation", "files", "bytes", "damaged": [(file, reason), ...]}``;
    a store whose manifest itself is damaged raises StoreCorruptedError.
    """
    root = Path(path)
    manifest = read_manifest(root)
    gen = manifest.get("dir")
    out = {"generation": gen, "files": 0, "bytes": 0, "damaged": []}
    if gen is None:
        return out
    for rel, rec, label, _ in manifest_files(manifest):
        out["files"] += 1
        p = root / rel
        if not p.is_file():
            out["damaged"].append((rel, f"{label}: missing"))
            continue
        size = p.stat().st_size
        out["bytes"] += size
        if size != rec.get("bytes"):
            out["damaged"].append((rel, f"{label}: {size} bytes, the manifest says {rec.get('bytes')}"))
        elif rec.get("sha256") and sha256_file(p) != rec["sha256"]:
            out["damaged"].append((rel, f"{label}: sha256 differs"))
    return out
