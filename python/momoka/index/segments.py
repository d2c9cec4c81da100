"""Segments of a store (format version 3): immutable folders of per-commit changes and their merge policy.

A commit writes one segment holding only that commit's changes: the chunk rows it
added, every artifact's new rows (vectors with their own HNSW graph, a BM25 index
of its slots, relation rows, node rows), changed metadata and tombstones for what
it deleted. The manifest lists the live segments, oldest first, each as::

    {"name": "seg-000012", "level": 0, "base": 5120, "end": 5376,
     "parts": {"chunks": {REL: {"bytes", "sha256"}}, "vectors/raw": {...}, "documents": {...}, ...}}

(``base..end``: the chunk ids whose rows it holds). Readers apply the segments in
order; a later segment's row wins. Segments are folders of the store (``seg-000012/``)
written once and never changed; a commit writes its segment and a small generation
folder (a lease file and its manifest), so it writes only its own bytes.

The merge policy is logarithmic, as Lucene's ``LogMergePolicy``: new segments have
level 0; when the newest :data:`MERGE_FACTOR` of them share level 0, or the newest
half as many (:func:`level_factor`) share a higher level, they are merged into one
segment of the next level (the current state of what they held: dead chunks'
texts, vectors and postings leave the store). A store of N commits then has about
``9 + 4 * log5(N / 10)`` segments, few of them large enough to be searched through
an HNSW graph of their own, and each row is rewritten about ``1 + log5(N / 10)``
times. :meth:`Store.merge` with ``everything=True`` merges all segments into one.
"""

from __future__ import annotations

from .. import settings

#: Segments of one level merged together (``MOMOKA_MERGE_FACTOR`` changes it).
MERGE_FACTOR: int = settings.default("MOMOKA_MERGE_FACTOR")
#: The part key of the document entries.
DOCS = "documents"
DOCS_FILE = "documents.jsonl"
DOCS_DELETED = "documents.deleted.json"


def merge_factor() -> int:
    """The merge factor: ``$MOMOKA_MERGE_FACTOR`` when set (an integer of at least 2; anything else is a
    ConfigError), else :data:`MERGE_FACTOR`."""
    return settings.get_int("MOMOKA_MERGE_FACTOR")


def segment_name(number: int) -> str:
    """The folder name of segment ``number``."""
    return f"seg-{number:06d}"


def level_factor(factor: int, level: int) -> int:
    """Segments of ``level`` merged together: ``factor`` for the commits' own segments, half of it (at least
    2) above, so few segments are large enough to be searched through their own HNSW graph."""
    return factor if level == 0 else max(2, factor // 2)


def next_merge(segments: list[dict], factor: int) -> tuple[int, int] | None:
    """``(first, stop)``: the run of segments to merge next (the newest of one level, as many as
    :func:`level_factor` says for it), or None."""
    if not segments:
        return None
    level = segments[-1].get("level", 0)
    n = level_factor(factor, level)
    tail = segments[-n:]
    if len(tail) == n and all(s.get("level", 0) == level for s in tail):
        return len(segments) - n, len(segments)
    return None
