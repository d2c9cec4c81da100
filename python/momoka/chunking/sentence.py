"""The ``sentence`` chunker: chunks of ``n`` consecutive sentences."""

from __future__ import annotations

from typing import Any

import numpy as np

from .._validate import check_int
from ._splitter import SENTENCE, Splitter
from .base import ClassicChunker, _check_overlap

__all__ = ["SentenceChunker"]


class SentenceChunker(ClassicChunker):
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
