"""Edit distance and fuzzy span location (MoC section 3.2.4).

All offsets are Python ``str`` offsets (code points): ``text[start:end]`` is
the located span.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable
from typing import NamedTuple

import numpy as np

from .. import _core
from .._validate import check_int
from ..errors import KernelInputError
from ._common import check_bound, check_str, check_threads, native_call, slice_bounds, str_list

__all__ = [
    "Span",
    "levenshtein",
    "levenshtein_pairwise",
    "levenshtein_cdist",
    "locate",
    "locate_many",
    "Locator",
]


class Span(NamedTuple):
    """A located substring: ``text[start:end]`` is ``distance`` edits from the pattern."""

    start: int
    end: int
    distance: int


def levenshtein(a: str, b: str, max_distance: int | None = None) -> int:
    """Unit-cost Levenshtein distance between two strings (code points).

    With ``max_distance=k`` the computation is banded (Ukkonen) or bit-parallel
    with early exit, and any distance above ``k`` is reported as ``k + 1``.
    Long strings use the Myers/Hyyro bit-vector algorithm (64 characters per
    machine word).

    >>> levenshtein("kitten", "sitting")
    3
    >>> levenshtein("kitten", "sitting", max_distance=1)
    2
    """
    k = check_bound("max_distance", max_distance)
    check_str("a", a)
    check_str("b", b)
    return int(_core.levenshtein(a, b, k))


def levenshtein_pairwise(
    a: Iterable[str], b: Iterable[str], max_distance: int | None = None, threads: int | None = None
) -> np.ndarray:
    """Distances ``levenshtein(a[i], b[i])`` for two equally long batches, as an int64 array."""
    k = check_bound("max_distance", max_distance)
    la, lb = str_list("a", a), str_list("b", b)
    if len(la) != len(lb):
        raise KernelInputError(f"a and b must have the same length, got {len(la)} and {len(lb)}")
    return native_call(_core.levenshtein_pairwise, la, lb, k, check_threads(threads))


def levenshtein_cdist(
    queries: Iterable[str], choices: Iterable[str], max_distance: int | None = None, threads: int | None = None
) -> np.ndarray:
    """All distances between ``queries`` and ``choices`` as an int64 matrix (len(queries), len(choices))."""
    k = check_bound("max_distance", max_distance)
    return native_call(
        _core.levenshtein_cdist, str_list("queries", queries), str_list("choices", choices), k, check_threads(threads)
    )


class Locator:
    """A q-gram index of one text that answers many :func:`locate` queries fast.

    Results are exactly those of :func:`locate` (the same optimum and tie-break);
    the index only avoids scanning the whole text. Each query splits the
    pattern into pieces: an alignment with fewer edits than pieces keeps one
    piece intact, so only regions around exact piece occurrences are scanned,
    and the answer is certified before it is returned (otherwise the whole
    range is scanned).
    """

    def __init__(self, text: str, q: int = 4):
        check_str("text", text)
        q = check_int(q, "q", minimum=1)
        self.text = text
        self._native = _core.Locator(text, q)

    def __len__(self) -> int:
        return len(self.text)

    def locate(self, pattern: str, max_distance: int | None = None, start: int = 0, end: int | None = None) -> Span | None:
        """Best match of ``pattern`` in ``text[start:end]``; see :func:`locate`."""
        k = check_bound("max_distance", max_distance)
        check_str("pattern", pattern)
        lo, hi = slice_bounds(len(self.text), start, end)
        r = self._native.locate(pattern, lo, hi, k)
        return None if r is None else Span(*r)

    def locate_many(
        self,
        patterns: Iterable[str],
        max_distance: int | None = None,
        start: int = 0,
        end: int | None = None,
        threads: int | None = None,
    ) -> np.ndarray:
        """Locate every pattern; returns an int64 array of shape (n, 3): start, end, distance.

        Rows of patterns with no match within ``max_distance`` are ``-1``.
        """
        k = check_bound("max_distance", max_distance)
        lo, hi = slice_bounds(len(self.text), start, end)
        return native_call(self._native.locate_many, str_list("patterns", patterns), lo, hi, k, check_threads(threads))


# Indexes of recently used long texts: the first locate() on a text scans it,
# a second one on the same str object builds a Locator that later calls reuse.
_CACHE_MIN_LEN = 4096
_CACHE_SIZE = 4
_cache: OrderedDict[int, tuple[str, int, Locator | None]] = OrderedDict()
_cache_lock = threading.Lock()


def _cached_locator(text: str) -> Locator | None:
    if len(text) < _CACHE_MIN_LEN:
        return None
    key = id(text)
    with _cache_lock:
        hit = _cache.get(key)
        if hit is not None and hit[0] is text:
            _cache.move_to_end(key)
            if hit[2] is not None:
                return hit[2]
            loc = Locator(text)
            _cache[key] = (text, hit[1] + 1, loc)
            return loc
        # The cache holds a reference to the text, so its id cannot be reused
        # by another object while the entry lives.
        _cache[key] = (text, 1, None)
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
        return None


def locate(
    pattern: str,
    text: str,
    max_distance: int | None = None,
    start: int = 0,
    end: int | None = None,
    *,
    index: bool | None = None,
) -> Span | None:
    """Find the substring of ``text[start:end]`` closest to ``pattern`` in edit distance.

    Semi-global alignment: the whole pattern is aligned against any substring
    ``text[s:e]``. Returns ``Span(s, e, distance)`` with exact ``str`` offsets
    for the smallest distance; ties go to the leftmost ``s``, then the
    smallest ``e``. Returns ``None`` when no substring is within
    ``max_distance``.

    Documented edge cases: an empty pattern matches at ``start`` with
    distance 0; an empty text (or window) gives ``Span(start, start,
    len(pattern))``; a pattern longer than the text is aligned all the same
    (its distance is at least the length difference). ``start``/``end``
    follow slice rules (negative values count from the end).

    ``index``: ``True`` builds (and caches) a q-gram index of the text,
    ``False`` always scans the text with the bit-parallel algorithm, ``None``
    (default) builds the index on the second call with the same long text
    object. The answer is the same either way.

    >>> locate("wrld", "hello world")
    Span(start=6, end=11, distance=1)
    """
    k = check_bound("max_distance", max_distance)
    check_str("pattern", pattern)
    check_str("text", text)
    lo, hi = slice_bounds(len(text), start, end)
    loc = None
    if index is None:
        loc = _cached_locator(text)
    elif index:
        loc = _cached_locator(text) or _cached_locator(text)
        if loc is None:  # short texts are not cached
            loc = Locator(text)
    r = loc._native.locate(pattern, lo, hi, k) if loc is not None else _core.locate(pattern, text, lo, hi, k)
    return None if r is None else Span(*r)


def locate_many(
    patterns: Iterable[str],
    text: str,
    max_distance: int | None = None,
    start: int = 0,
    end: int | None = None,
    threads: int | None = None,
) -> np.ndarray:
    """Locate many patterns in one text (indexed once); int64 array (n, 3), ``-1`` rows when not found."""
    check_str("text", text)
    return Locator(text).locate_many(patterns, max_distance, start, end, threads)
