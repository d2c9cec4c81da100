"""The ``paragraph`` chunker: one chunk per paragraph, short ones merged up to a size."""

from __future__ import annotations

from typing import Any

from .._validate import check_int
from ._splitter import PARAGRAPH, Splitter
from ._tokens import resolve_tokenizer
from .base import ClassicChunker, _check_unit

__all__ = ["ParagraphChunker"]


class ParagraphChunker(ClassicChunker):
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
