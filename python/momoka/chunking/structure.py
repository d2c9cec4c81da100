"""The ``structure`` chunker: one chunk per smallest section of the document (MC-indexing's content-aware
chunking), long sections split on sentences."""

from __future__ import annotations

from typing import Any

import numpy as np

from .._validate import check_int
from ._splitter import SENTENCE, Splitter
from ._tokens import resolve_tokenizer
from .base import ClassicChunker, _check_unit

__all__ = ["StructureChunker"]


class StructureChunker(ClassicChunker):
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
