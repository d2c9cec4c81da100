"""Native text kernels: edit distance, span location, outline recovery, dedup, tries.

Everything here runs in the C++ core (``momoka._core``) on Python ``str``
storage without copies where possible, releases the GIL, and has batch entry
points taking lists or numpy arrays. Offsets are Python ``str`` offsets.

- :func:`levenshtein`, :func:`levenshtein_pairwise`, :func:`levenshtein_cdist`
- :func:`locate`, :func:`locate_many`, :class:`Locator` (semi-global alignment)
- :func:`recover_outlines` (MoC meta-chunker outlines to tiling spans)
- :func:`simhash`, :func:`near_duplicates`, :func:`hamming`, :class:`BloomFilter`
- :class:`Trie`, :func:`unique_prefix_lengths`
"""

from __future__ import annotations

from .dedup import BloomFilter, feature_hash, hamming, near_duplicates, simhash
from .edit import Locator, Span, levenshtein, levenshtein_cdist, levenshtein_pairwise, locate, locate_many
from .outlines import DEFAULT_MASKS, RecoveredChunk, recover_outlines, split_outline
from .trie import Trie, unique_prefix_lengths

__all__ = [
    "BloomFilter",
    "DEFAULT_MASKS",
    "Locator",
    "RecoveredChunk",
    "Span",
    "Trie",
    "feature_hash",
    "hamming",
    "levenshtein",
    "levenshtein_cdist",
    "levenshtein_pairwise",
    "locate",
    "locate_many",
    "near_duplicates",
    "recover_outlines",
    "simhash",
    "split_outline",
    "unique_prefix_lengths",
]
