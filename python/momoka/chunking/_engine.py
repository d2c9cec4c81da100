"""Span arithmetic shared by every chunker.

Everything here works on character offsets into one document's text. The
central routine is :meth:`Splitter.pack`: given sorted candidate cut
positions ``B`` (the first and last being the ends of a range) it greedily
takes the longest run of consecutive pieces whose measured size fits the
limit, with an optional overlap, and hands pieces that are too big on their
own to a callback. Sizes are measured in characters (length of the span
after stripping surrounding whitespace) or in tokens (tokens that start in
the span), both as differences of monotone per-boundary values, so the
greedy step is a binary search and the loop runs once per chunk, not once
per piece.
"""

from __future__ import annotations

import re
from typing import Callable

import numpy as np

from .. import _core
from ._tokens import Atoms, TokenSource

# Native kernels (cpp/include/momoka/chunk.hpp); pure-Python fallbacks below.
_native_trim = getattr(_core, "chunk_trim_bounds", None)
_native_find = getattr(_core, "chunk_find_all", None)
_native_pack = getattr(_core, "chunk_recursive_pack", None)

_NONWS = re.compile(r"\S")

#: Separator standing for "a sentence boundary of the document".
SENTENCE = "<sentence>"
#: Separator standing for "a paragraph boundary of the document".
PARAGRAPH = "<paragraph>"

Spans = list  # list[tuple[int, int]]


class Splitter:
    """Per-call state: the text, its size measure and lazily built token atoms."""

    def __init__(self, document, unit: str = "chars", source: TokenSource | None = None):
        self.doc = document
        self.text: str = document.text
        self.n = len(self.text)
        self.unit = unit
        self.source = source
        self._atoms: Atoms | None = None

    # -- whitespace trimming -------------------------------------------------

    def first_nonws(self, p: int, hi: int) -> int:
        """First offset >= p (and < hi) holding a non-whitespace character, else hi."""
        m = _NONWS.search(self.text, p, hi)
        return m.start() if m else hi

    def last_nonws_end(self, p: int, lo: int) -> int:
        """One past the last non-whitespace character before p (and >= lo), else lo."""
        t = self.text
        if p <= lo or not t[p - 1].isspace():
            return p
        steps = 0
        while p > lo and t[p - 1].isspace():
            p -= 1
            steps += 1
            if steps > 64:  # long whitespace run: strip whole windows
                while p > lo:
                    a = max(lo, p - 4096)
                    r = t[a:p].rstrip()
                    if r:
                        return a + len(r)
                    p = a
                return lo
        return p

    def trim(self, a: int, b: int) -> tuple[int, int]:
        """(a, b) with surrounding whitespace removed; empty spans come back with a >= b."""
        s = self.first_nonws(a, b)
        if s >= b:
            return b, b
        return s, self.last_nonws_end(b, s)

    # -- measures ------------------------------------------------------------

    @property
    def atoms(self) -> Atoms:
        if self._atoms is None:
            assert self.source is not None
            self._atoms = self.source.atoms(self.text)
        return self._atoms

    def values(self, B: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per-boundary values (lo, hi) with size(B[i]..B[j]) == hi[j] - lo[i]."""
        if self.unit == "chars":
            if _native_trim is not None:
                return _native_trim(self.text, B)
            n = self.n
            fn, ln = self.first_nonws, self.last_nonws_end
            bl = B.tolist()
            lo = np.fromiter((fn(b, n) for b in bl), dtype=np.int64, count=len(bl))
            hi = np.fromiter((ln(b, 0) for b in bl), dtype=np.int64, count=len(bl))
            return lo, hi
        c = self.atoms.tokens_before(B)
        return c, c

    def measure(self, a: int, b: int) -> int:
        """Size of the span [a, b) in the splitter's unit."""
        if self.unit == "chars":
            s, e = self.trim(a, b)
            return max(0, e - s)
        c = self.atoms.tokens_before(np.array([a, b], dtype=np.int64))
        return int(c[1] - c[0])

    # -- boundaries ----------------------------------------------------------

    @staticmethod
    def bounds(cuts: np.ndarray, lo: int, hi: int) -> np.ndarray:
        """[lo] + sorted unique cuts strictly inside (lo, hi) + [hi]."""
        cuts = np.asarray(cuts, dtype=np.int64)
        if cuts.size:
            cuts = cuts[(cuts > lo) & (cuts < hi)]
        if cuts.size > 1:
            if not bool((cuts[1:] >= cuts[:-1]).all()):
                cuts = np.sort(cuts)
            keep = np.empty(cuts.size, dtype=bool)
            keep[0] = True
            np.not_equal(cuts[1:], cuts[:-1], out=keep[1:])
            cuts = cuts[keep]
        return np.concatenate([np.array([lo], dtype=np.int64), cuts, np.array([hi], dtype=np.int64)])

    def cuts(self, sep: str, lo: int, hi: int) -> np.ndarray:
        """Cut positions for one separator inside (lo, hi).

        A string separator cuts right after each of its occurrences (it stays
        with the text before it); :data:`SENTENCE` and :data:`PARAGRAPH` cut at
        the starts of the document's sentences and paragraphs.
        """
        if sep == SENTENCE or sep == PARAGRAPH:
            spans = self.doc.sentences if sep == SENTENCE else self.doc.paragraphs
            starts = np.asarray(spans, dtype=np.int64).reshape(-1, 2)[:, 0]
            a = np.searchsorted(starts, lo, side="right")
            b = np.searchsorted(starts, hi, side="left")
            return starts[a:b]
        if _native_find is not None:
            occ = _native_find(self.text, sep, lo, hi)
            occ += len(sep)
            return occ[occ < hi]
        t = self.text
        find = t.find
        L = len(sep)
        out = []
        k = find(sep, lo, hi)
        while k != -1:
            c = k + L
            if c < hi:
                out.append(c)
            k = find(sep, k + 1, hi)
        return np.array(out, dtype=np.int64)

    # -- packing -------------------------------------------------------------

    def pack(
        self,
        B: np.ndarray,
        size: int,
        out: Spans,
        overlap: int = 0,
        oversize: Callable[[int, int, Spans], None] | None = None,
        lo_v: np.ndarray | None = None,
        hi_v: np.ndarray | None = None,
    ) -> None:
        """Greedily join consecutive pieces of ``B`` into spans of at most ``size``.

        A piece bigger than ``size`` on its own goes to ``oversize`` (or is
        emitted whole when it is None). With ``overlap``, the next span starts
        at the earliest boundary whose tail of the previous span measures at
        most ``overlap``.
        """
        if lo_v is None or hi_v is None:
            lo_v, hi_v = self.values(B)
        m = len(B) - 1
        Bl = B.tolist() if m < 4096 else B  # big arrays: index lazily
        i = 0
        while i < m:
            j = int(hi_v.searchsorted(lo_v[i] + size, side="right")) - 1
            if j > m:
                j = m
            if j <= i:
                if oversize is None:
                    out.append((int(Bl[i]), int(Bl[i + 1])))
                else:
                    oversize(int(Bl[i]), int(Bl[i + 1]), out)
                i += 1
                continue
            out.append((int(Bl[i]), int(Bl[j])))
            if j >= m or hi_v[j] >= hi_v[m]:  # nothing left to measure
                break
            if overlap > 0:
                # earliest start sharing at most `overlap` with this span that
                # still leaves room for the next piece (else the next span
                # would add nothing)
                k = int(lo_v.searchsorted(max(hi_v[j] - overlap, hi_v[j + 1] - size), side="left"))
                i = min(max(k, i + 1), j)
            else:
                i = j

    def char_windows(self, lo: int, hi: int, size: int, out: Spans, overlap: int = 0) -> None:
        """Fixed windows of ``size`` characters over [lo, hi), each starting on non-whitespace."""
        pos = self.first_nonws(lo, hi)
        while pos < hi:
            end = pos + size
            if end >= hi:
                out.append((pos, hi))
                break
            out.append((pos, end))
            nxt = self.first_nonws(end, hi)  # first character not covered yet
            if nxt >= hi:  # only whitespace left
                break
            if overlap:
                # overlap the trimmed end of this window, but reach nxt
                e = self.last_nonws_end(end, pos)
                pos = self.first_nonws(max(e - overlap, nxt - size + 1), hi)
            else:
                pos = nxt

    def token_windows(self, lo: int, hi: int, size: int, out: Spans, overlap: int = 0) -> None:
        """Spans of at most ``size`` tokens over [lo, hi), cut at token starts."""
        st = self.atoms.starts
        a = np.searchsorted(st, lo, side="right")
        b = np.searchsorted(st, hi, side="left")
        B = self.bounds(st[a:b], lo, hi)
        self.pack(B, size, out, overlap=overlap)

    def hard_split(self, lo: int, hi: int, size: int, out: Spans, overlap: int = 0) -> None:
        """Split [lo, hi) with no regard to separators, by characters or tokens."""
        if self.unit == "chars":
            self.char_windows(lo, hi, size, out, overlap)
        else:
            self.token_windows(lo, hi, size, out, overlap)

    def recursive(self, lo: int, hi: int, seps: tuple, level: int, size: int, out: Spans) -> None:
        """Recursive splitting: cut on ``seps[level]``, join pieces up to ``size``,
        split pieces still too big with the next separator, and finally by
        characters or tokens."""
        if self.measure(lo, hi) <= size:
            out.append((lo, hi))
            return
        while level < len(seps):
            c = self.cuts(seps[level], lo, hi)
            if c.size:
                break
            level += 1
        else:
            self.hard_split(lo, hi, size, out)
            return
        B = self.bounds(c, lo, hi)
        nxt = level + 1

        def oversize(a: int, b: int, o: Spans) -> None:
            self.recursive(a, b, seps, nxt, size, o)

        self.pack(B, size, out, oversize=oversize)

    def level_cuts(self, sep: str):
        """A level for the native packer: sentence/paragraph starts as an array, else the separator itself."""
        if sep == SENTENCE or sep == PARAGRAPH:
            spans = self.doc.sentences if sep == SENTENCE else self.doc.paragraphs
            return np.ascontiguousarray(np.asarray(spans, dtype=np.int64).reshape(-1, 2)[:, 0])
        return sep

    def split_ranges(self, ranges: list, seps: tuple, size: int, keep_oversize: bool = False):
        """Recursive splitting of each (lo, hi) range, in order (native when built).

        With ``keep_oversize``, a piece still too big after the last separator
        is kept whole instead of being cut by characters or tokens.
        """
        if _native_pack is not None:
            levels = [self.level_cuts(sep) for sep in seps]
            if self.unit == "chars":
                starts = cum = None
            else:
                starts, cum = self.atoms.starts, self.atoms.cum
            arr = np.asarray(ranges, dtype=np.int64).reshape(-1, 2)
            return _native_pack(self.text, arr, levels, size, starts, cum, keep_oversize)
        out: Spans = []
        for lo, hi in ranges:
            if keep_oversize:
                c = self.cuts(seps[0], lo, hi) if seps else np.zeros(0, dtype=np.int64)
                self.pack(self.bounds(c, lo, hi), size, out)
            else:
                self.recursive(lo, hi, seps, 0, size, out)
        return out

    # -- output --------------------------------------------------------------

    def finish(self, spans: Spans) -> np.ndarray:
        """Trim every span, drop empty ones, return an ``(K, 2)`` int64 array."""
        if len(spans) == 0:
            return np.zeros((0, 2), dtype=np.int64)
        arr = np.asarray(spans, dtype=np.int64).reshape(-1, 2)
        if _native_trim is not None:
            s, _ = _native_trim(self.text, arr[:, 0])
            _, e = _native_trim(self.text, arr[:, 1])
            keep = (s < arr[:, 1]) & (e > s)
            return np.stack([s[keep], e[keep]], axis=1)
        res = []
        trim = self.trim
        for a, b in arr.tolist():
            s2, e2 = trim(a, b)
            if s2 < e2:
                res.append((s2, e2))
        if not res:
            return np.zeros((0, 2), dtype=np.int64)
        return np.array(res, dtype=np.int64)
