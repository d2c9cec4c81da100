"""Slow plain-Python references for the native chunking kernels (``momoka._core.chunk_*``).

Each function has the signature and return types of the kernel it mirrors, so
the tests can compare them one by one and can also swap the whole set in for
``_core`` inside the chunking package (:data:`REFERENCE_CORE`) to check that
every chunker gives the same chunks on top of them. Written for clarity:
character-by-character scans, linear greedy packing, no numpy tricks.
"""

from __future__ import annotations

from bisect import bisect_left
from types import SimpleNamespace

import unicodedata

import numpy as np


def _arr(values) -> np.ndarray:
    return np.array(list(values), dtype=np.int64)


def first_nonws(text: str, p: int, hi: int) -> int:
    """First offset in [p, hi) holding a non-whitespace character, else hi."""
    while p < hi and text[p].isspace():
        p += 1
    return p


def last_nonws_end(text: str, p: int, lo: int) -> int:
    """One past the last non-whitespace character in [lo, p), else lo."""
    while p > lo and text[p - 1].isspace():
        p -= 1
    return p


#: Unicode names of the characters written without spaces, each a token by itself.
SOLO_NAMES = ("CJK UNIFIED IDEOGRAPH", "CJK COMPATIBILITY IDEOGRAPH", "HIRAGANA LETTER", "KATAKANA LETTER",
              "THAI CHARACTER", "LAO LETTER", "KHMER LETTER", "MYANMAR LETTER", "TIBETAN LETTER")


def solo(ch: str) -> bool:
    """A character of a script written without spaces (by its Unicode name)."""
    return unicodedata.name(ch, "").startswith(SOLO_NAMES)


def words(text: str, split_solo: bool = True) -> list[tuple[int, int]]:
    """Maximal non-whitespace runs (with ``split_solo`` each CJK/kana/Thai... character a word by itself),
    found by scanning characters."""
    out = []
    i = 0
    while i < len(text):
        if text[i].isspace():
            i += 1
            continue
        j = i + 1
        if not (split_solo and solo(text[i])):
            while j < len(text) and not text[j].isspace() and not (split_solo and solo(text[j])):
                j += 1
        out.append((i, j))
        i = j
    return out


def word_starts(text: str, split_solo: bool = False) -> np.ndarray:
    """Starts of the words (see :func:`words`)."""
    return _arr(s for s, _ in words(text, split_solo))


def word_ids(text: str, split_solo: bool = False):
    """(starts, ends, ids, first) as ``chunk_word_ids`` defines them."""
    ws = words(text, split_solo)
    starts, ends = [s for s, _ in ws], [e for _, e in ws]
    seen: dict[str, int] = {}
    ids, first = [], []
    for k, (s, e) in enumerate(zip(starts, ends)):
        w = text[s:e]
        if w not in seen:
            seen[w] = len(first)
            first.append(k)
        ids.append(seen[w])
    return _arr(starts), _arr(ends), _arr(ids), _arr(first)


def trim_bounds(text: str, cuts) -> tuple[np.ndarray, np.ndarray]:
    """For each cut (clamped to the text): first non-whitespace at or after it, end of the last one before it."""
    n = len(text)
    cl = [min(max(int(c), 0), n) for c in np.asarray(cuts, dtype=np.int64).tolist()]
    return _arr(first_nonws(text, c, n) for c in cl), _arr(last_nonws_end(text, c, 0) for c in cl)


def find_all(text: str, sep: str, lo: int, hi: int) -> np.ndarray:
    """Every offset where ``sep`` occurs wholly inside text[lo:hi], overlaps included."""
    if not sep:
        raise ValueError("separator must not be empty")
    n = len(text)
    lo = min(max(lo, 0), n)
    hi = min(max(hi, lo), n)
    return _arr(i for i in range(lo, hi - len(sep) + 1) if text.startswith(sep, i))


class _Packer:
    """Recursive greedy splitting, as ``chunk_recursive_pack`` does it."""

    def __init__(self, text, levels, size, atom_starts, cum, keep_oversize, lead=None):
        self.text = text
        self.levels = levels
        self.size = size
        self.tokens = atom_starts is not None
        if self.tokens:
            self.starts = np.asarray(atom_starts, dtype=np.int64).tolist()
            self.cum = np.asarray(cum, dtype=np.int64).tolist()
            # tokens added when an atom is the first of a span (0 past the last atom)
            self.lead = ([0] * len(self.starts) if lead is None else np.asarray(lead, dtype=np.int64).tolist()) + [0]
        self.keep_oversize = keep_oversize
        self.out: list[tuple[int, int]] = []

    # per-boundary values: size(B[i]..B[j]) == hi(B[j]) - lo(B[i])
    def lo(self, p: int) -> int:
        if self.tokens:
            k = bisect_left(self.starts, p)
            return self.cum[k] - self.lead[k]
        return first_nonws(self.text, p, len(self.text))

    def hi(self, p: int) -> int:
        if self.tokens:
            return self.cum[bisect_left(self.starts, p)]
        return last_nonws_end(self.text, p, 0)

    def measure(self, a: int, b: int) -> int:
        if self.tokens:  # the tokens starting in [a, b), plus the lead of the first of them
            t = self.hi(b) - self.hi(a)
            return t + self.lead[bisect_left(self.starts, a)] if t > 0 else 0
        return max(0, self.hi(b) - self.lo(a))

    def cuts(self, level, lo: int, hi: int) -> list[int]:
        if isinstance(level, str):
            found = [k + len(level) for k in find_all(self.text, level, lo, hi).tolist()]
        else:
            found = np.asarray(level, dtype=np.int64).tolist()
        return sorted({c for c in found if lo < c < hi})

    def pack(self, B: list[int], oversize) -> None:
        """Longest runs of consecutive pieces that fit; a piece too big alone goes to ``oversize``."""
        m = len(B) - 1
        i = 0
        while i < m:
            j = i
            while j < m and self.hi(B[j + 1]) - self.lo(B[i]) <= self.size:
                j += 1
            if j == i:
                oversize(B[i], B[i + 1])
                i += 1
                continue
            self.out.append((B[i], B[j]))
            if j == m or self.hi(B[j]) >= self.hi(B[m]):  # the rest measures nothing
                break
            i = j

    def emit(self, a: int, b: int) -> None:
        self.out.append((a, b))

    def hard_split(self, lo: int, hi: int) -> None:
        if self.tokens:
            inside = [s for s in self.starts if lo < s < hi]
            self.pack([lo, *inside, hi], self.emit)
            return
        pos = first_nonws(self.text, lo, hi)
        while pos < hi:
            end = pos + self.size
            if end >= hi:
                self.out.append((pos, hi))
                return
            self.out.append((pos, end))
            pos = first_nonws(self.text, end, hi)

    def run(self, lo: int, hi: int, level: int = 0) -> None:
        if self.measure(lo, hi) <= self.size:
            self.out.append((lo, hi))
            return
        while level < len(self.levels):
            c = self.cuts(self.levels[level], lo, hi)
            if c:
                break
            level += 1
        else:
            if self.keep_oversize:
                self.out.append((lo, hi))
            else:
                self.hard_split(lo, hi)
            return
        if self.keep_oversize:  # split on this level only; pieces still too big stay whole
            self.pack([lo, *c, hi], self.emit)
            return
        nxt = level + 1
        self.pack([lo, *c, hi], lambda a, b: self.run(a, b, nxt))


def recursive_pack(text, ranges, levels, size, atom_starts=None, cum=None, keep_oversize=False,
                   lead=None) -> np.ndarray:
    """Untrimmed ``(K, 2)`` spans of the recursive splitting of each range, in order."""
    if size < 1:
        raise ValueError("size must be >= 1")
    p = _Packer(text, list(levels), size, atom_starts, cum, keep_oversize, lead)
    n = len(text)
    for lo, hi in np.asarray(ranges, dtype=np.int64).reshape(-1, 2).tolist():
        lo = min(max(lo, 0), n)
        hi = min(max(hi, lo), n)
        if lo < hi:
            p.run(lo, hi)
    return np.array(p.out, dtype=np.int64).reshape(-1, 2)


def trimmed(text: str, spans) -> list[tuple[int, int]]:
    """Spans with surrounding whitespace removed, empty ones dropped."""
    out = []
    for a, b in np.asarray(spans, dtype=np.int64).reshape(-1, 2).tolist():
        s = first_nonws(text, a, b)
        e = last_nonws_end(text, b, s)
        if s < e:
            out.append((s, e))
    return out


#: Stands in for ``momoka._core`` inside the chunking package (only the ``chunk_*`` kernels).
REFERENCE_CORE = SimpleNamespace(
    chunk_word_starts=word_starts,
    chunk_word_ids=word_ids,
    chunk_trim_bounds=trim_bounds,
    chunk_find_all=find_all,
    chunk_recursive_pack=recursive_pack,
)
