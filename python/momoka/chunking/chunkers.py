"""The chunkers: one class each, every one called as ``chunker(document) -> list[Chunk]``.

All chunkers share one contract: the chunks, in order, tile every
non-whitespace character of ``document.text`` exactly once (chunks start and
end on non-whitespace; only whitespace lies between two chunks), unless an
overlap was asked for, in which case consecutive chunks may share text but
still leave no gap. Offsets are exact: ``document.text[c.start:c.end] == c.text``.
Chunk objects are built by :func:`momoka.text.make_chunks`, which fills the
paragraph, sentence and section indices.

Sizes are measured either in characters (``unit="chars"``: the length of the
chunk's span) or in tokens (``unit="tokens"``: tokens starting inside the
span, counted by the ``tokenizer``; whitespace tokens by default).
"""

from __future__ import annotations

import re
from typing import Any, Sequence

import numpy as np

from .._validate import check_int
from ..errors import ConfigError, InputError
from ._engine import PARAGRAPH, SENTENCE, Splitter
from ._tokens import TokenSource, resolve_tokenizer

__all__ = [
    "looks_hard_wrapped",
    "Chunker",
    "FixedChunker",
    "SentenceChunker",
    "ParagraphChunker",
    "RecursiveChunker",
    "StructureChunker",
    "SENTENCE",
    "PARAGRAPH",
]

_UNITS = ("tokens", "chars")
#: Packing rounds that learn the counts of chunks' first words (then :meth:`fit` re-cuts what is left over).
_REFINE_ROUNDS = 8


def _check_overlap(overlap: Any, size: int, what: str = "size") -> int:
    overlap = check_int(overlap, "overlap", minimum=0)
    if overlap >= size:
        raise ConfigError(f"overlap ({overlap}) must be smaller than {what} ({size})")
    return overlap


def _check_unit(unit: Any, tokenizer: Any) -> str:
    if unit not in _UNITS:
        raise ConfigError(f"unit must be one of {', '.join(_UNITS)}; got {unit!r}")
    if unit == "chars" and tokenizer is not None:
        raise ConfigError("a tokenizer is only used with unit='tokens'")
    return unit


def _as_document(document: Any):
    from .. import text as _text  # start-up: momoka.text

    if isinstance(document, str):
        return _text.Document.from_text(document)
    if not hasattr(document, "text") or not isinstance(getattr(document, "text"), str):
        raise InputError(f"expected a momoka.text.Document (or a str), got {type(document).__name__}")
    return document


class Chunker:
    """Base class: ``chunker(document)`` returns the document's chunks.

    Subclasses implement :meth:`_spans`, returning (start, end) pairs in
    document order (whitespace around them is trimmed here).
    """

    name = "base"
    unit = "chars"
    _source: TokenSource | None = None
    #: A heading that would end a chunk (or be one alone) goes to the chunk after it, where that chunk
    #: still fits :meth:`_heading_limit` (the paragraph and recursive chunkers; the fixed and sentence
    #: baselines cut by count only, the structure chunker has ``merge_headings``).
    keep_headings_with_text = False

    def __call__(self, document) -> list:
        """Chunk ``document`` (a :class:`momoka.text.Document`, or a str read as plain text)."""
        from .. import text as _text  # start-up: momoka.text

        document = _as_document(document)
        return _text.make_chunks(document, self.spans(document))

    def spans(self, document) -> np.ndarray:
        """The chunks' ``(start, end)`` offsets as a ``(K, 2)`` int64 array, without building Chunks."""
        document = _as_document(document)
        sp = Splitter(document, self.unit, self._source)
        if sp.n == 0:
            return np.zeros((0, 2), dtype=np.int64)
        spans = self._headings(sp, sp.finish(self._spans(sp)))
        limit = self._token_limit()
        fit = getattr(self._source, "fit", None)
        if limit is not None and fit is not None:
            # a tokenizer's contract: every chunk re-encodes to at most `limit` tokens
            for _ in range(_REFINE_ROUNDS):  # the leads of the words that start chunks
                if not self._source.refine(sp.atoms, spans):
                    break
                spans = self._headings(sp, sp.finish(self._spans(sp)))
            spans = fit(sp.text, spans, limit, sp.atoms)
        return spans

    def _headings(self, sp: Splitter, spans: np.ndarray) -> np.ndarray:
        if not self.keep_headings_with_text:
            return spans
        return sp.move_headings(spans, self._heading_limit())

    def _heading_limit(self) -> int | None:
        """The size (in :attr:`unit`) a chunk that takes a heading must stay within (None: no limit)."""
        return getattr(self, "size", None)

    def _token_limit(self) -> int | None:
        """The token limit every chunk keeps (None: the chunker may keep an oversized piece whole)."""
        return None

    def _spans(self, sp: Splitter) -> list:  # pragma: no cover - abstract
        raise NotImplementedError

    def params(self) -> dict:
        """The chunker's parameters (as recorded in a store's manifest)."""
        return {}

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.params().items())
        return f"{type(self).__name__}({args})"


class FixedChunker(Chunker):
    """Fixed-size chunks of ``size`` tokens or characters, with optional ``overlap``.

    ``unit="tokens"`` (default) cuts at token starts (word starts with the
    default whitespace tokenizer), so each chunk holds at most ``size``
    tokens; ``unit="chars"`` cuts every ``size`` characters (a chunk never
    exceeds ``size`` characters). With ``align="sentence"`` chunks are made
    of whole sentences packed up to ``size`` and a sentence is never cut; a
    sentence longer than ``size`` becomes a chunk of its own (this is the
    fixed-length baseline of MC-indexing). ``overlap`` (same unit, smaller
    than ``size``) makes consecutive chunks share their last/first part;
    with ``align="sentence"`` the shared part is whole sentences.
    """

    name = "fixed"

    def __init__(
        self,
        size: int = 256,
        overlap: int = 0,
        unit: str = "tokens",
        tokenizer: Any = None,
        align: str | None = None,
    ):
        self.size = check_int(size, "size", minimum=1)
        self.overlap = _check_overlap(overlap, self.size)
        self.unit = _check_unit(unit, tokenizer)
        if align not in (None, "sentence"):
            raise ConfigError(f"align must be None or 'sentence', got {align!r}")
        self.align = align
        self.tokenizer = tokenizer
        self._source = resolve_tokenizer(tokenizer) if unit == "tokens" else None

    def params(self) -> dict:
        return {"size": self.size, "overlap": self.overlap, "unit": self.unit, "align": self.align}

    def _token_limit(self) -> int | None:
        return self.size if self.unit == "tokens" and self.align is None else None

    def _spans(self, sp: Splitter) -> list:
        out: list = []
        lo, hi = sp.first_nonws(0, sp.n), sp.n
        if self.overlap == 0:
            if self.align == "sentence":
                return sp.split_ranges([(lo, hi)], (SENTENCE,), self.size, keep_oversize=True)
            return sp.split_ranges([(lo, hi)], (), self.size)
        if self.align == "sentence":
            B = sp.bounds(sp.cuts(SENTENCE, lo, hi), lo, hi)
            sp.pack(B, self.size, out, overlap=self.overlap)
        else:
            sp.hard_split(lo, hi, self.size, out, self.overlap)
        return out


class SentenceChunker(Chunker):
    """Chunks of ``n`` consecutive sentences; consecutive chunks share ``overlap`` sentences."""

    name = "sentence"

    def __init__(self, n: int = 3, overlap: int = 0):
        self.n = check_int(n, "n", minimum=1)
        self.overlap = _check_overlap(overlap, self.n, "n")

    def params(self) -> dict:
        return {"n": self.n, "overlap": self.overlap}

    def _spans(self, sp: Splitter) -> list:
        out: list = []
        lo, hi = sp.first_nonws(0, sp.n), sp.n
        B = sp.bounds(sp.cuts(SENTENCE, lo, hi), lo, hi)
        idx = np.arange(B.size, dtype=np.int64)
        sp.pack(B, self.n, out, overlap=self.overlap, lo_v=idx, hi_v=idx)
        return out


class ParagraphChunker(Chunker):
    """One chunk per paragraph of the document (a heading joins the paragraph after it).

    With ``size``, consecutive paragraphs are merged while the merged chunk
    stays within ``size`` (tokens or characters); a paragraph longer than
    ``size`` is still kept whole (use :class:`RecursiveChunker` or
    :class:`StructureChunker` to split long paragraphs).
    """

    name = "paragraph"
    keep_headings_with_text = True

    def __init__(self, size: int | None = None, unit: str = "tokens", tokenizer: Any = None):
        self.size = None if size is None else check_int(size, "size", minimum=1)
        self.unit = _check_unit(unit, tokenizer)
        self.tokenizer = tokenizer
        self._source = resolve_tokenizer(tokenizer) if unit == "tokens" else None

    def params(self) -> dict:
        return {"size": self.size, "unit": self.unit}

    def _spans(self, sp: Splitter) -> list:
        lo, hi = sp.first_nonws(0, sp.n), sp.n
        B = sp.bounds(sp.cuts(PARAGRAPH, lo, hi), lo, hi)
        if self.size is None:
            Bl = B.tolist()
            return list(zip(Bl[:-1], Bl[1:]))
        return sp.split_ranges([(lo, hi)], (PARAGRAPH,), self.size, keep_oversize=True)


_SENTENCE_END = re.compile(r"[.!?:;][\"')\]]*$")
_CELL_GAP = re.compile(r" {3,}|\t|\|")


def _check_separators(separators: Any) -> tuple:
    if isinstance(separators, str) or not isinstance(separators, Sequence) or not separators:
        raise ConfigError("separators must be a non-empty sequence of strings (or SENTENCE / PARAGRAPH)")
    for s in separators:
        if not isinstance(s, str) or s == "":
            raise ConfigError(f"every separator must be a non-empty string, got {s!r}")
    return tuple(separators)


class RecursiveChunker(Chunker):
    """Recursive splitting over a separator hierarchy, under a size limit.

    The text is cut after each occurrence of the first separator and the
    pieces are joined greedily while they fit in ``size``; a piece still too
    big is split the same way with the next separator, and so on; what is
    still too big after the last separator is cut by characters or tokens.
    :data:`SENTENCE` and :data:`PARAGRAPH` stand for the document's own
    sentence and paragraph boundaries. Every chunk fits in ``size`` except a
    single token (``unit="tokens"``) bigger than the limit.
    """

    name = "recursive"
    keep_headings_with_text = True
    DEFAULT_SEPARATORS = ("\n\n", "\n", SENTENCE, " ")
    #: For hard-wrapped prose (lines cut at ~70 characters inside sentences): sentences before line breaks,
    #: chosen per document by ``hard_wrap``. Not for every document: on all of the shared sets' documents
    #: it costs 10.3 points of complete coverage at 5,000 characters on DragonBall and 13.8 on Qasper
    #: (tables and lists whose lines carry no sentence end), docs/chunking.md.
    HARD_WRAPPED_SEPARATORS = ("\n\n", SENTENCE, "\n", " ")

    HARD_WRAP_MODES = ("off", "auto", "on")

    def __init__(
        self,
        size: int = 256,
        separators: Sequence[str] = DEFAULT_SEPARATORS,
        unit: str = "tokens",
        tokenizer: Any = None,
        hard_wrap: str = "off",
    ):
        self.size = check_int(size, "size", minimum=1)
        self.separators = _check_separators(separators)
        self.unit = _check_unit(unit, tokenizer)
        self.tokenizer = tokenizer
        self._source = resolve_tokenizer(tokenizer) if unit == "tokens" else None
        if hard_wrap not in self.HARD_WRAP_MODES:
            raise ConfigError(f"hard_wrap must be one of {', '.join(self.HARD_WRAP_MODES)}, not {hard_wrap!r}")
        #: ``"auto"``: a document that :func:`looks_hard_wrapped` is split at sentences before single line
        #: breaks; ``"on"``: every document; ``"off"``: the separators as given. ``momoka index`` and
        #: :meth:`momoka.Index.build` use ``"auto"`` (:func:`momoka.methods.pipeline.chunker_params`); the
        #: class default stays ``"off"`` so stores built before the option chunk new documents as before.
        self.hard_wrap = hard_wrap

    def params(self) -> dict:
        return {"size": self.size, "separators": self.separators, "unit": self.unit, "hard_wrap": self.hard_wrap}

    def _token_limit(self) -> int | None:
        return self.size if self.unit == "tokens" else None

    def separators_for(self, text: str) -> tuple:
        """The separators used for ``text``: a single line break moves after :data:`SENTENCE` where the
        hard-wrap mode says so."""
        seps = self.separators
        if self.hard_wrap == "off" or "\n" not in seps or SENTENCE not in seps:
            return seps
        if self.hard_wrap == "auto" and not looks_hard_wrapped(text):
            return seps
        i, j = seps.index("\n"), seps.index(SENTENCE)
        if i > j:
            return seps
        out = list(seps)
        out.insert(j, out.pop(i))  # the line break goes right after SENTENCE
        return tuple(out)

    def _spans(self, sp: Splitter) -> list:
        return sp.split_ranges([(sp.first_nonws(0, sp.n), sp.n)], self.separators_for(sp.text), self.size)


def looks_hard_wrapped(text: str, *, min_lines: int = 20) -> bool:
    """True for prose hard-wrapped at a fixed width: at least half the non-blank lines 55-80 characters
    long and not table rows, and at least half of those ending inside a sentence (no ``. ! ? : ;``).

    Plain-text licences, RFCs and Gutenberg books are; tables, lists, Markdown and HTML text, and
    documents with one paragraph per line are not (none of the five shared retrieval sets' documents
    is; docs/chunking.md).
    """
    lines = [ln.rstrip() for ln in text.split("\n") if ln.strip()]
    if len(lines) < min_lines:
        return False
    # a table row (runs of spaces, tabs or bars between cells) is not a wrapped line of prose
    wrapped = [ln for ln in lines if 55 <= len(ln) <= 80 and not _CELL_GAP.search(ln.strip())]
    if 2 * len(wrapped) < len(lines):
        return False
    open_ended = sum(1 for ln in wrapped if not _SENTENCE_END.search(ln))
    return 2 * open_ended >= len(wrapped)


class StructureChunker(Chunker):
    """Content-aware chunking on the document's section structure (MC-indexing).

    Each smallest section (a section's own text, from its heading up to its
    first sub-section) becomes one chunk, however short; text before the
    first heading is a section of its own, and a document without sections
    is one section. A section longer than ``max_size`` is split on sentence
    boundaries into chunks packed up to ``max_size`` (a sentence longer than
    the limit is split on spaces, then by characters/tokens). With
    ``merge_headings`` (default), a heading with no text of its own before
    its first sub-section is joined to the chunk that follows instead of
    standing alone.
    """

    name = "structure"
    def __init__(
        self,
        max_size: int = 512,
        unit: str = "tokens",
        tokenizer: Any = None,
        merge_headings: bool = True,
    ):
        self.max_size = check_int(max_size, "max_size", minimum=1)
        self.unit = _check_unit(unit, tokenizer)
        self.tokenizer = tokenizer
        self.merge_headings = bool(merge_headings)
        self._source = resolve_tokenizer(tokenizer) if unit == "tokens" else None

    def params(self) -> dict:
        return {"max_size": self.max_size, "unit": self.unit, "merge_headings": self.merge_headings}

    def _token_limit(self) -> int | None:
        return self.max_size if self.unit == "tokens" else None

    def segments(self, sp: Splitter) -> list:
        """(start, end) of the smallest sections, in order, covering the text."""
        n = sp.n
        heading_end: dict = {}
        for s in getattr(sp.doc, "sections", ()) or ():
            if 0 < s.start < n:
                heading_end[s.start] = max(heading_end.get(s.start, 0), s.heading_end)
            elif s.start <= 0:
                heading_end[0] = max(heading_end.get(0, 0), s.heading_end)
        B = sp.bounds(np.array(sorted(heading_end), dtype=np.int64), 0, n).tolist()
        segs = []
        start = B[0]
        for k in range(len(B) - 1):
            a, b = B[k], B[k + 1]
            if self.merge_headings and k + 1 < len(B) - 1 and a in heading_end:
                _, e = sp.trim(a, b)
                if e <= heading_end[a]:  # heading only: join with what follows
                    continue
            segs.append((start, b))
            start = b
        return segs

    def _spans(self, sp: Splitter) -> list:
        return sp.split_ranges(self.segments(sp), (SENTENCE, " "), self.max_size)
