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

Merges run in a background thread of the writing process (:mod:`momoka.store._merger`), one at a
time: a commit returns once its own segment is committed, and the merge's result is committed with
the next save (or when the store is closed). Commits that land while a merge runs add segments after
the run it merges, so the policy picks the oldest run of one level that is long enough, not only the
newest segments. ``MOMOKA_MERGE_BACKGROUND=0`` (or :attr:`Store.merge_background` = False) runs them
in the save instead, each as a commit of its own.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import settings
from ..errors import ConfigError

#: Segments of one level merged together (``MOMOKA_MERGE_FACTOR`` changes it).
MERGE_FACTOR: int = settings.default("MOMOKA_MERGE_FACTOR")
#: The part key of the document entries.
DOCS = "documents"
DOCS_FILE = "documents.jsonl"
DOCS_DELETED = "documents.deleted.json"
#: The folder of a store where other processes (Ray workers) write parts its writer adopts (never read by readers).
STAGING = "staging"


def merge_factor() -> int:
    """The merge factor: ``$MOMOKA_MERGE_FACTOR`` when set (an integer of at least 2; anything else is a
    ConfigError), else :data:`MERGE_FACTOR`."""
    return settings.get_int("MOMOKA_MERGE_FACTOR")


def merge_background() -> bool:
    """Whether merges run in the background: ``$MOMOKA_MERGE_BACKGROUND`` when set (a flag: 0/1, no/yes,
    off/on; anything else is a ConfigError), else True."""
    return bool(settings.get_flag("MOMOKA_MERGE_BACKGROUND"))


def segment_name(number: int) -> str:
    """The folder name of segment ``number``."""
    return f"seg-{number:06d}"


def level_factor(factor: int, level: int) -> int:
    """Segments of ``level`` merged together: ``factor`` for the commits' own segments, half of it (at least
    2) above, so few segments are large enough to be searched through their own HNSW graph."""
    return factor if level == 0 else max(2, factor // 2)


def next_merge(segments: list[dict], factor: int) -> tuple[int, int] | None:
    """``(first, stop)``: the run of segments to merge next, or None: the oldest :func:`level_factor` (of
    their level) segments of the oldest run of consecutive segments of one level that holds that many.

    Merged after every commit, only the newest segments can form such a run; merged in the background,
    commits landing meanwhile may lengthen a run beyond it, and its oldest segments go first.
    """
    i = 0
    while i < len(segments):
        level = segments[i].get("level", 0)
        j = i
        while j < len(segments) and segments[j].get("level", 0) == level:
            j += 1
        n = level_factor(factor, level)
        if j - i >= n:
            return i, i + n
        i = j
    return None


@dataclass(frozen=True)
class SegmentStats:
    """What a merge policy knows of a segment: its ``level``, the chunk ``rows`` it holds that were live
    when it was written, and how many of those were ``deleted`` since (their tombstones are in later
    segments, or not saved yet)."""

    level: int = 0
    rows: int = 0
    deleted: int = 0

    @property
    def deleted_share(self) -> float:
        """``deleted / rows`` (0 for a segment without rows: only deletions or document entries)."""
        return self.deleted / self.rows if self.rows else 0.0


@dataclass(frozen=True)
class MergePolicy:
    """Which run of segments a writer merges next, after each commit (a :class:`~momoka.store.writer.StoreWriter`
    takes one: ``StoreWriter.merge_policy``; injectable, e.g. for tests or another trade-off).

    * **log rule** (Lucene's ``LogMergePolicy``): the oldest :func:`level_factor` segments of the oldest run
      of consecutive segments of one level that holds that many (``factor``: :data:`MERGE_FACTOR` for the
      commits' own level 0, half of it above; :func:`next_merge`);
    * **tombstone share** (tantivy's ``del_docs_ratio_before_merge``): when the log rule asks for nothing,
      the oldest segment at least ``deleted_share`` of whose rows were deleted since it was written is
      merged with every segment after it (those hold its tombstones: a merge drops the data of the
      chunks deleted within its run only), so the deleted chunks' texts, vectors and postings leave the
      store; the newest segment alone keeps its level. ``None`` (the default) turns it off.
    """

    factor: int = MERGE_FACTOR
    deleted_share: float | None = None

    def __post_init__(self):
        if isinstance(self.factor, bool) or not isinstance(self.factor, int) or self.factor < 2:
            raise ConfigError(f"a merge factor is an integer of at least 2, not {self.factor!r}")
        d = self.deleted_share
        if d is not None and (isinstance(d, bool) or not isinstance(d, (int, float)) or not 0 < d <= 1):
            raise ConfigError(f"deleted_share is a share in (0, 1] or None, not {d!r}")

    @classmethod
    def from_settings(cls) -> MergePolicy:
        """The policy of ``$MOMOKA_MERGE_FACTOR`` (see :func:`merge_factor`), tombstone trigger off."""
        return cls(factor=merge_factor())

    def next_merge(self, segments: list[SegmentStats]) -> tuple[int, int] | None:
        """``(first, stop)``: the run of ``segments`` (oldest first) to merge next, or None."""
        run = next_merge([{"level": sg.level} for sg in segments], self.factor)
        if run is not None or self.deleted_share is None:
            return run
        for i, sg in enumerate(segments):
            if sg.rows and sg.deleted_share >= self.deleted_share:
                return i, len(segments)
        return None
