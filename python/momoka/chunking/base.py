"""The chunker contract, and the base class of the classic chunkers.

**The contract** (:class:`Chunker`) is what every chunker keeps, the classic ones of this package
(one module each: :mod:`~momoka.chunking.fixed`, :mod:`~momoka.chunking.sentence`,
:mod:`~momoka.chunking.paragraph`, :mod:`~momoka.chunking.recursive`,
:mod:`~momoka.chunking.structure`) and the method packages' (``sections``, ``llm``, ``ppl``, ``msp``,
``meta``, ``moc``): one call, ``chunker(document) -> list[Chunk]``, a ``name`` and ``params()``.

**The classic chunkers** derive from :class:`ClassicChunker`, which adds the coverage contract and
the size limits. Sizes are measured either in characters (``unit="chars"``: the length of the
chunk's span) or in tokens (``unit="tokens"``: tokens starting inside the span, counted by the
``tokenizer``; whitespace tokens by default). Every classic chunker also takes ``max_embed_tokens``
with ``embed_tokenizer`` (an embedder's ``tokenizers.Tokenizer``): a second limit, in the embedder's
own tokens with its special tokens included, that a chunk over it is split further to keep, with the
chunker's own separators (:meth:`ClassicChunker.spans`).
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import numpy as np

from .._validate import check_int
from ..errors import ConfigError, InputError
from ._hf_tokens import HFSource
from ._splitter import SENTENCE, Splitter
from ._tokens import TokenSource, _is_hf_tokenizer

__all__ = ["Chunker", "ClassicChunker"]


@runtime_checkable
class Chunker(Protocol):
    """The chunker contract: ``chunker(document) -> list[Chunk]``.

    Every chunker has:

    * ``name`` -- a short name saying which chunker it is (the name it is registered under in
      :mod:`momoka.registry`; the ``moc`` entry builds a ``meta`` chunker with its router on). An index
      records it for a chunker passed as an object;
    * ``__call__(document)`` -- takes a :class:`momoka.text.Document` (the classic chunkers also read a
      ``str`` as a plain-text document) and returns its chunks: :class:`momoka.text.Chunk` objects in document order, each with
      exact offsets (``document.text[c.start:c.end] == c.text``) and the paragraph, sentence and section
      indices :func:`momoka.text.make_chunks` fills;
    * ``params()`` -- its settings as a dict that JSON can hold (what a store's manifest records for a
      chunker passed as an object; a chunker given by name is recorded with the options it was given,
      from which a reopened index rebuilds it).

    And, where it has them: ``batch(documents) -> list[list[Chunk]]``, the chunks of several documents
    at once (the index calls it instead of one call per document: an LLM chunker sends one batch of
    requests); ``estimate(documents) -> dict``, what running it would cost, without running it
    (``momoka index --estimate``); ``stats``, its counts (a :class:`momoka.stats.Stats`).

    ``isinstance(obj, Chunker)`` checks the three members' presence. :meth:`momoka.Index.build` also
    takes any callable ``document -> list[Chunk]`` (recorded under its class name, without params).
    """

    name: str

    def __call__(self, document: Any) -> list:
        """The chunks of ``document``, in document order, with exact offsets."""
        ...

    def params(self) -> dict:
        """The chunker's parameters, as recorded in a store's manifest."""
        ...


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


class ClassicChunker(Chunker):
    """The base class of the classic chunkers (fixed, sentence, paragraph, recursive, structure).

    It keeps the :class:`Chunker` contract with the coverage contract on top: the chunks, in order,
    tile every non-whitespace character of ``document.text`` exactly once (chunks start and end on
    non-whitespace; only whitespace lies between two chunks), unless an overlap was asked for, in
    which case consecutive chunks may share text but still leave no gap. A subclass implements
    :meth:`_spans`, returning ``(start, end)`` pairs in document order computed with the
    :class:`~momoka.chunking._splitter.Splitter` (whitespace around them is trimmed here); this class
    adds the size limits every classic chunker keeps (a tokenizer's re-encoding, ``max_embed_tokens``)
    and the placement of headings.
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
