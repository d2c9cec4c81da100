"""The ``fixed`` chunker: chunks of a fixed size in tokens or characters, optionally of whole sentences."""

from __future__ import annotations

from typing import Any

from .._validate import check_int
from ..errors import ConfigError
from ._splitter import SENTENCE, Splitter
from ._tokens import resolve_tokenizer
from .base import ClassicChunker, _check_overlap, _check_unit

__all__ = ["FixedChunker"]


class FixedChunker(ClassicChunker):
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
