"""momoka.index: the native BM25 index, the persistent :class:`Store` and the :class:`Index` API."""

from .bm25 import BM25, ENGLISH_STOPWORDS, tokenize

__all__ = ["BM25", "ENGLISH_STOPWORDS", "tokenize"]
