"""momoka.chunking: chunkers that cut a :class:`momoka.text.Document` into chunks.

Every chunker keeps one contract, :class:`Chunker` (:mod:`momoka.chunking.base`): it is called
as ``chunker(document) -> list[Chunk]``, with exact offsets, and has a ``name`` and ``params()``.
The classic chunkers, one module each (``fixed``, ``sentence``, ``paragraph``, ``recursive``,
``structure``), derive from :class:`ClassicChunker`: their chunks tile the document's
non-whitespace text exactly once. Pick one by name with :func:`get_chunker`::

    from momoka.chunking import get_chunker
    chunks = get_chunker("recursive", size=256)(document)
"""

from ._splitter import PARAGRAPH, SENTENCE, title_lines
from ._tokens import WhitespaceTokenizer, resolve_tokenizer
from .base import Chunker, ClassicChunker
from .fixed import FixedChunker
from .paragraph import ParagraphChunker
from .recursive import RecursiveChunker, looks_hard_wrapped
from .sentence import SentenceChunker
from .structure import StructureChunker
from .by_name import available_chunkers, chunker_summaries, get_chunker
from .headers import context_headers, with_header

__all__ = [
    "Chunker",
    "ClassicChunker",
    "FixedChunker",
    "SentenceChunker",
    "ParagraphChunker",
    "RecursiveChunker",
    "StructureChunker",
    "SENTENCE",
    "PARAGRAPH",
    "WhitespaceTokenizer",
    "resolve_tokenizer",
    "get_chunker",
    "available_chunkers",
    "chunker_summaries",
    "title_lines",
    "looks_hard_wrapped",
    "context_headers",
    "with_header",
]
