"""Span arithmetic shared by every chunker.

Everything here works on character offsets into one document's text. The
central routine is :meth:`Splitter.pack`: given sorted candidate cut
positions ``B`` (the first and last being the ends of a range) it greedily
takes the longest run of consecutive pieces whose measured size fits the
limit, with an optional overlap, and emits pieces that are too big on their
own whole. Sizes are measured in characters (length of the span after
stripping surrounding whitespace) or in tokens (tokens that start in the
span), both as differences of monotone per-boundary values, so the
greedy step is a binary search and the loop runs once per chunk, not once
per piece.

Whitespace trimming, separator search and the recursive splitting of
:meth:`Splitter.split_ranges` run in the native kernels
(``cpp/include/momoka/chunk.hpp``, bound as ``momoka._core.chunk_*``).
"""

from __future__ import annotations

import re

import numpy as np

from .. import _core
from ._tokens import Atoms, TokenSource

_NONWS = re.compile(r"\S")

#: Separator standing for "a sentence boundary of the document".
SENTENCE = "<sentence>"
#: Separator standing for "a paragraph boundary of the document".
PARAGRAPH = "<paragraph>"

Spans = list  # list[tuple[int, int]]

#: A plain-text paragraph that is a heading: a title underlined by a line of ``=``/``-``/``~``/``*``, a
#: numbered title without a final period (``5. Termination``, ``2.1 Scope``: section numbers of at most
#: three digits, so a line of data such as ``2019 revenue grew 5%`` is not one) or a line in capitals.
_PLAIN_HEADING = re.compile(
    r"\A(?:[^\n]{1,100}\n[ \t]*([=\-~*#_])\1{2,}[ \t]*"
    r"|[ \t]*\d{1,3}(?:\.\d{1,3})*\.?[ \t]+[^\n]{1,80}(?<![.!?:;,])"
    r"|[ \t]*(?=[^\n]*[A-Z]{2})[^a-z\n]{3,80}(?<![.!?:;,]))\Z"
)
#: A line that can be a title: at most 80 characters, not ending a sentence or clause (``Battle of Calabria``,
#: ``Methodology ::: Fine-Tuning``, ``Senior Management Changes:``) except by an abbreviation (``Bill Martin Jr.``).
_TITLE_LINE = re.compile(r"[ \t]*\S(?:[^\n]{0,79}(?<![.!?;,])|[^\n]{0,75}\b[A-Z][a-z]{0,2}\.)")
#: A line that ends a sentence (closing quotes or brackets allowed after the mark).
_ENDS_SENTENCE = re.compile(r"[.!?][\"')\]]*[ \t]*$")
#: The text line after a title: at least this many characters, and twice as long as the title (so the
#: lines of hard-wrapped prose, all of about one width, are not titles of each other).
_TITLE_TEXT_MIN = 40


def title_lines(document) -> tuple[np.ndarray, np.ndarray]:
    """(end of each title line, start of the text after it).

    A title line, as plain-text collections write a section without a blank line (``Title\nText ...``):
    a line that can be a title (:data:`_TITLE_LINE`), that starts a paragraph or follows a line ending a
    sentence, and whose next line is text (at least :data:`_TITLE_TEXT_MIN` characters and twice the
    title's length). A run of short lines (a list, a table) has no title line but perhaps its first.
    """
    text = document.text
    ends, nexts = [], []
    for a, b in np.asarray(document.paragraphs, dtype=np.int64).reshape(-1, 2).tolist():
        nl = text.find("\n", a, b)
        prev_ends = True  # a paragraph's first line follows a paragraph break
        start = a
        while 0 <= nl:
            line = text[start:nl].rstrip()
            nxt = _NONWS.search(text, nl, b)
            if nxt is None:
                break
            following = text.find("\n", nxt.start(), b)
            if following < 0:
                following = b
            next_line = text[nxt.start():following].rstrip()
            if (prev_ends and _TITLE_LINE.fullmatch(line)
                    and len(next_line) >= max(_TITLE_TEXT_MIN, 2 * len(line.strip()))):
                ends.append(start + len(line))
                nexts.append(nxt.start())
            prev_ends = bool(_ENDS_SENTENCE.search(line))
            start = nl + 1
            nl = text.find("\n", start, b)
    return np.asarray(ends, dtype=np.int64), np.asarray(nexts, dtype=np.int64)


def heading_paragraphs(document) -> np.ndarray:
    """Indices of the document's paragraphs that are headings: the heading of a section, or in a document
    without sections a heading-like plain-text paragraph (:data:`_PLAIN_HEADING`)."""
    par = np.asarray(document.paragraphs, dtype=np.int64).reshape(-1, 2)
    sections = getattr(document, "sections", None)
    if sections:
        heads = {(s.heading_start, s.heading_end) for s in sections}
        return np.array([i for i, (a, b) in enumerate(par.tolist()) if (a, b) in heads], dtype=np.int64)
    text = document.text
    return np.array([i for i, (a, b) in enumerate(par.tolist()) if b - a <= 200 and _PLAIN_HEADING.match(text[a:b])],
                    dtype=np.int64)


class Splitter:
    """Per-call state: the text, its size measure and lazily built token atoms."""

    def __init__(self, document, unit: str = "chars", source: TokenSource | None = None,
                 glue_titles: bool = False):
        self.doc = document
        #: Title lines (:func:`title_lines`) are glued to their text too, and no cut of any separator
        #: (not only the paragraph-level ones) falls between a heading or title line and the text after it.
        self.glue_titles = bool(glue_titles)
        self.text: str = document.text
        self.n = len(self.text)
        self.unit = unit
        self.source = source
        self._atoms: Atoms | None = None
        self._glued: tuple[np.ndarray, np.ndarray] | None = None

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
            return _core.chunk_trim_bounds(self.text, B)
        c = self.atoms.tokens_before(B)
        return c - self.atoms.lead_at(B), c

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

    def _heading_gaps(self) -> tuple[np.ndarray, np.ndarray]:
        """(end of each heading paragraph, start of the paragraph after it): no paragraph cut falls between."""
        if self._glued is None:
            par = np.asarray(self.doc.paragraphs, dtype=np.int64).reshape(-1, 2)
            h = heading_paragraphs(self.doc)
            h = h[h + 1 < len(par)]
            ends, nexts = par[h, 1], par[h + 1, 0]
            if self.glue_titles:
                t_ends, t_nexts = title_lines(self.doc)
                ends, nexts = np.concatenate([ends, t_ends]), np.concatenate([nexts, t_nexts])
                order = np.argsort(ends, kind="stable")
                ends, nexts = ends[order], nexts[order]
            self._glued = (ends, nexts)
        return self._glued

    def size_of(self, a: int, b: int) -> int:
        """The size of the span ``(a, b)`` in this splitter's unit (characters after trimming, or tokens)."""
        lo, hi = self.values(np.array([a, b], dtype=np.int64))
        return int(hi[1] - lo[0])

    def move_headings(self, spans: np.ndarray, limit: int | None = None) -> np.ndarray:
        """``spans`` (trimmed, in order) with headings that end a chunk moved to the chunk after it, and a
        chunk made only of headings joined to the next one, where the next chunk stays within ``limit``
        (None: always); overlapping spans are left as they are."""
        ends, nexts = self._heading_gaps()
        if not len(ends) or len(spans) < 2:
            return spans
        par = np.asarray(self.doc.paragraphs, dtype=np.int64).reshape(-1, 2)
        head_start = dict(zip(ends.tolist(), par[np.searchsorted(par[:, 1], ends), 0].tolist()))
        out = [list(x) for x in spans.tolist()]
        keep = [True] * len(out)
        for i in range(len(out) - 1):
            a, b = out[i]
            if b > out[i + 1][0]:
                continue  # overlapping chunks
            cut = None
            while b in head_start and head_start[b] > a:
                cut = head_start[b]
                b = self.last_nonws_end(cut, a)
            if b in head_start and head_start[b] <= a:  # only headings: join the next chunk
                if limit is None or self.size_of(a, out[i + 1][1]) <= limit:
                    out[i + 1][0] = a
                    keep[i] = False
            elif cut is not None and (limit is None or self.size_of(cut, out[i + 1][1]) <= limit):
                out[i][1], out[i + 1][0] = b, cut
        return np.asarray([x for x, k in zip(out, keep) if k], dtype=np.int64).reshape(-1, 2)

    def _glue_headings(self, cuts: np.ndarray) -> np.ndarray:
        """``cuts`` without those between a heading and the paragraph after it: a heading is never alone."""
        ends, nexts = self._heading_gaps()
        if not len(ends) or not len(cuts):
            return cuts
        k = np.searchsorted(ends, cuts, side="right") - 1
        inside = (k >= 0) & (cuts <= nexts[np.maximum(k, 0)])
        return cuts[~inside]

    def cuts(self, sep: str, lo: int, hi: int) -> np.ndarray:
        """Cut positions for one separator inside (lo, hi).

        A string separator cuts right after each of its occurrences (it stays
        with the text before it); :data:`SENTENCE` and :data:`PARAGRAPH` cut at
        the starts of the document's sentences and paragraphs. Paragraph-level
        separators (:data:`PARAGRAPH`, ``"\n\n"``) never cut between a heading
        and the paragraph after it.
        """
        if sep == SENTENCE or sep == PARAGRAPH:
            spans = self.doc.sentences if sep == SENTENCE else self.doc.paragraphs
            starts = np.asarray(spans, dtype=np.int64).reshape(-1, 2)[:, 0]
            a = np.searchsorted(starts, lo, side="right")
            b = np.searchsorted(starts, hi, side="left")
            glue = sep == PARAGRAPH or self.glue_titles
            return self._glue_headings(starts[a:b]) if glue else starts[a:b]
        occ = _core.chunk_find_all(self.text, sep, lo, hi)
        occ += len(sep)
        occ = occ[occ < hi]
        return self._glue_headings(occ) if sep == "\n\n" or self.glue_titles else occ

    # -- packing -------------------------------------------------------------

    def pack(
        self,
        B: np.ndarray,
        size: int,
        out: Spans,
        overlap: int = 0,
        lo_v: np.ndarray | None = None,
        hi_v: np.ndarray | None = None,
    ) -> None:
        """Greedily join consecutive pieces of ``B`` into spans of at most ``size``.

        A piece bigger than ``size`` on its own is emitted whole. With
        ``overlap``, the next span starts at the earliest boundary whose tail
        of the previous span measures at most ``overlap``.
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
                out.append((int(Bl[i]), int(Bl[i + 1])))
                i += 1
                continue
            out.append((int(Bl[i]), int(Bl[j])))
            if j >= m or hi_v[j] >= hi_v[m]:  # nothing left to measure
                break
            if overlap > 0:
                # earliest start sharing at most `overlap` with this span that
                # still leaves room for the next piece (else the next span
                # would add nothing)
                # (sorted start values: with token leads lo_v is not monotone, hi_v is the plain count)
                ref = hi_v if self.unit == "tokens" else lo_v
                k = int(ref.searchsorted(max(hi_v[j] - overlap, hi_v[j + 1] - size), side="left"))
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

    def level_cuts(self, sep: str):
        """A level for the native packer: sentence/paragraph starts as an array, else the separator itself."""
        if sep == SENTENCE or sep == PARAGRAPH or sep == "\n\n" or (self.glue_titles and sep == "\n"):
            return np.ascontiguousarray(self.cuts(sep, 0, self.n + 1))
        return sep

    def split_ranges(self, ranges: list, seps: tuple, size: int, keep_oversize: bool = False):
        """Recursive splitting of each (lo, hi) range, in order (native packer).

        Each range that does not fit is cut on ``seps[0]``, its pieces are
        joined up to ``size``, pieces still too big are split with the next
        separator, and finally by characters or tokens (a separator that does
        not occur in a piece is skipped). With ``keep_oversize``, pieces are
        cut on the first separator that occurs only, and a piece still too big
        is kept whole. Returns untrimmed ``(K, 2)`` spans.
        """
        levels = [self.level_cuts(sep) for sep in seps]
        if self.unit == "chars":
            starts = cum = lead = None
        else:
            starts, cum, lead = self.atoms.starts, self.atoms.cum, self.atoms.lead
        arr = np.asarray(ranges, dtype=np.int64).reshape(-1, 2)
        if lead is None:
            return _core.chunk_recursive_pack(self.text, arr, levels, size, starts, cum, keep_oversize)
        return _core.chunk_recursive_pack(self.text, arr, levels, size, starts, cum, keep_oversize, lead)

    # -- output --------------------------------------------------------------

    def finish(self, spans: Spans) -> np.ndarray:
        """Trim every span, drop empty ones, return an ``(K, 2)`` int64 array."""
        if len(spans) == 0:
            return np.zeros((0, 2), dtype=np.int64)
        arr = np.asarray(spans, dtype=np.int64).reshape(-1, 2)
        s, _ = _core.chunk_trim_bounds(self.text, arr[:, 0])
        _, e = _core.chunk_trim_bounds(self.text, arr[:, 1])
        keep = (s < arr[:, 1]) & (e > s)
        return np.stack([s[keep], e[keep]], axis=1)
