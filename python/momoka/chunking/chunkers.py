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

Every chunker also takes ``max_embed_tokens`` with ``embed_tokenizer`` (an
embedder's ``tokenizers.Tokenizer``): a second limit, in the embedder's own
tokens with its special tokens included, that a chunk over it is split
further to keep, with the chunker's own separators (:meth:`Chunker.spans`).
"""

from __future__ import annotations

import re
from typing import Any, Sequence

import numpy as np

from .._validate import check_int
from ..errors import ConfigError, InputError
from ._splitter import PARAGRAPH, SENTENCE, Splitter
from ._hf_tokens import HFSource
from ._tokens import TokenSource, _is_hf_tokenizer, resolve_tokenizer

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


def _utf8_lengths(text: str, spans: np.ndarray) -> np.ndarray:
    """UTF-8 bytes of each span of ``text``: a bound on the tokens a byte-level or WordPiece tokenizer makes."""
    s, e = spans[:, 0], spans[:, 1]
    if text.isascii():
        return e - s
    cps = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
    cum = np.zeros(cps.size + 1, dtype=np.int64)
    np.cumsum(1 + (cps >= 0x80) + (cps >= 0x800) + (cps >= 0x10000), out=cum[1:])
    return cum[e] - cum[s]


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
    #: No cut of any separator between a heading or a title line and its text (:class:`RecursiveChunker`'s
    #: ``glue_titles``; the other chunkers keep the paragraph-level rule only).
    glue_titles = False
    #: The embedder's input limit every chunk keeps, in its tokens with its special tokens (None: no limit).
    max_embed_tokens: int | None = None
    _embed: HFSource | None = None
    #: Separators an over-long chunk is split on to fit ``max_embed_tokens`` (then by the embedder's tokens).
    EMBED_SEPARATORS: tuple = ("\n\n", "\n", SENTENCE, " ")

    def __call__(self, document) -> list:
        """Chunk ``document`` (a :class:`momoka.text.Document`, or a str read as plain text)."""
        from .. import text as _text  # start-up: momoka.text

        document = _as_document(document)
        return _text.make_chunks(document, self.spans(document))

    def spans(self, document) -> np.ndarray:
        """The chunks' ``(start, end)`` offsets as a ``(K, 2)`` int64 array, without building Chunks."""
        document = _as_document(document)
        sp = Splitter(document, self.unit, self._source, self.glue_titles)
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
        return self._fit_embedding(sp, spans)

    def _limit_embedding(self, max_embed_tokens: Any, embed_tokenizer: Any) -> None:
        """Set the embedder's limit (both given, or neither)."""
        if max_embed_tokens is None:
            if embed_tokenizer is not None:
                raise ConfigError("embed_tokenizer is only used with max_embed_tokens")
            return
        limit = check_int(max_embed_tokens, "max_embed_tokens", minimum=1)
        if embed_tokenizer is None:
            raise ConfigError("max_embed_tokens needs the embedder's tokenizer (embed_tokenizer=...)")
        if not _is_hf_tokenizer(embed_tokenizer):
            raise ConfigError(f"embed_tokenizer must be a tokenizers.Tokenizer (the embedder's), "
                              f"not {type(embed_tokenizer).__name__}")
        src = HFSource(embed_tokenizer)
        special = len(src.tokenizer.encode("", add_special_tokens=True).ids)
        if limit - special < 1:
            raise ConfigError(f"max_embed_tokens ({limit}) leaves no room for text beside the embedder's "
                              f"{special} special tokens")
        self.max_embed_tokens, self._embed, self._embed_text_limit = limit, src, limit - special

    def _embed_params(self, params: dict) -> dict:
        """``params`` with ``max_embed_tokens`` where it is set (stores built without it record as before)."""
        if self.max_embed_tokens is not None:
            params["max_embed_tokens"] = self.max_embed_tokens
        return params

    def _embed_separators(self, sp: Splitter) -> tuple:
        """The separators an over-long chunk of ``sp``'s document is split on (:attr:`EMBED_SEPARATORS`)."""
        return self.EMBED_SEPARATORS

    def _fit_embedding(self, sp: Splitter, spans: np.ndarray) -> np.ndarray:
        """``spans`` with every chunk over the embedder's limit split further (others unchanged).

        Only chunks of more UTF-8 bytes than the limit are measured in the embedder's tokens (a
        byte-level or WordPiece token holds at least one byte); one over the limit is cut on
        :meth:`_embed_separators` in turn, packed up to the limit, and every piece is checked
        by the tokenizer's re-encoding contract (:meth:`HFSource.fit`), so each chunk encodes to
        at most ``max_embed_tokens`` tokens with the special tokens.
        """
        src = self._embed
        if src is None or len(spans) == 0:
            return spans
        limit = self._embed_text_limit
        cand = np.flatnonzero(_utf8_lengths(sp.text, spans) > limit)
        if cand.size == 0:
            return spans
        se = Splitter(sp.doc, "tokens", src, self.glue_titles)
        over = cand[se.atoms.measure(spans[cand, 0], spans[cand, 1]) > limit]
        if over.size:
            seps = self._embed_separators(sp)
            ranges = spans[over].tolist()
            if bool((spans[1:, 0] >= spans[:-1, 1]).all()):  # disjoint chunks: their pieces in one call
                pieces = se.finish(se.split_ranges(ranges, seps, limit))
                at = np.searchsorted(pieces[:, 0], spans[over, 0]).tolist() + [len(pieces)]
                split = [pieces[at[i]:at[i + 1]] for i in range(len(ranges))]
            else:  # overlapping chunks (an overlap was asked for): each on its own
                split = [se.finish(se.split_ranges([r], seps, limit)) for r in ranges]
            parts, last = [], 0
            for k, piece in zip(over.tolist(), split):
                parts += [spans[last:k], piece]
                last = k + 1
            parts.append(spans[last:])
            spans = np.concatenate(parts).astype(np.int64, copy=False)
        return src.fit(sp.text, spans, limit, se.atoms)

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
        max_embed_tokens: int | None = None,
        embed_tokenizer: Any = None,
    ):
        self.size = check_int(size, "size", minimum=1)
        self.overlap = _check_overlap(overlap, self.size)
        self.unit = _check_unit(unit, tokenizer)
        if align not in (None, "sentence"):
            raise ConfigError(f"align must be None or 'sentence', got {align!r}")
        self.align = align
        self.tokenizer = tokenizer
        self._source = resolve_tokenizer(tokenizer) if unit == "tokens" else None
        self._limit_embedding(max_embed_tokens, embed_tokenizer)

    def params(self) -> dict:
        return self._embed_params({"size": self.size, "overlap": self.overlap, "unit": self.unit, "align": self.align})

    def _embed_separators(self, sp: Splitter) -> tuple:
        return (SENTENCE,) if self.align == "sentence" else ()

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

    def __init__(self, n: int = 3, overlap: int = 0, max_embed_tokens: int | None = None, embed_tokenizer: Any = None):
        self.n = check_int(n, "n", minimum=1)
        self.overlap = _check_overlap(overlap, self.n, "n")
        self._limit_embedding(max_embed_tokens, embed_tokenizer)

    def params(self) -> dict:
        return self._embed_params({"n": self.n, "overlap": self.overlap})

    def _embed_separators(self, sp: Splitter) -> tuple:
        return (SENTENCE, " ")

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

    def __init__(self, size: int | None = None, unit: str = "tokens", tokenizer: Any = None,
                 max_embed_tokens: int | None = None, embed_tokenizer: Any = None):
        self.size = None if size is None else check_int(size, "size", minimum=1)
        self.unit = _check_unit(unit, tokenizer)
        self.tokenizer = tokenizer
        self._source = resolve_tokenizer(tokenizer) if unit == "tokens" else None
        self._limit_embedding(max_embed_tokens, embed_tokenizer)

    def params(self) -> dict:
        return self._embed_params({"size": self.size, "unit": self.unit})

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
        max_embed_tokens: int | None = None,
        embed_tokenizer: Any = None,
        glue_titles: bool = False,
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
        if not isinstance(glue_titles, bool):
            raise ConfigError(f"glue_titles must be true or false, not {glue_titles!r}")
        #: True: no cut falls between a heading or a title line (the first line of a paragraph of several
        #: lines, at most 80 characters, not ending a sentence: ``Battle of Calabria`` over its text) and
        #: the text after it, at any separator, so a title is never a chunk alone or the end of one.
        #: ``momoka index`` and :meth:`momoka.Index.build` use True; the class default stays False so stores
        #: built before the option chunk new documents as before.
        self.glue_titles = glue_titles
        self._limit_embedding(max_embed_tokens, embed_tokenizer)

    def params(self) -> dict:
        params = {"size": self.size, "separators": self.separators, "unit": self.unit, "hard_wrap": self.hard_wrap}
        if self.glue_titles:
            params["glue_titles"] = True
        return self._embed_params(params)

    def _embed_separators(self, sp: Splitter) -> tuple:
        return self.separators_for(sp.text)

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
        max_embed_tokens: int | None = None,
        embed_tokenizer: Any = None,
    ):
        self.max_size = check_int(max_size, "max_size", minimum=1)
        self.unit = _check_unit(unit, tokenizer)
        self.tokenizer = tokenizer
        self.merge_headings = bool(merge_headings)
        self._source = resolve_tokenizer(tokenizer) if unit == "tokens" else None
        self._limit_embedding(max_embed_tokens, embed_tokenizer)

    def params(self) -> dict:
        return self._embed_params({"max_size": self.max_size, "unit": self.unit, "merge_headings": self.merge_headings})

    def _embed_separators(self, sp: Splitter) -> tuple:
        return (SENTENCE, " ")

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
