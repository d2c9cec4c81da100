"""momoka.chunking: chunkers that cut a :class:`momoka.text.Document` into chunks.

Every chunker is a class called as ``chunker(document) -> list[Chunk]``; the
chunks tile the document's non-whitespace text exactly once, with exact
offsets. Pick one by name with :func:`get_chunker`::

    from momoka.chunking import get_chunker
    chunks = get_chunker("recursive", size=256)(document)
"""

from ._splitter import PARAGRAPH, SENTENCE, title_lines
from ._tokens import WhitespaceTokenizer, resolve_tokenizer
from .chunkers import (
    Chunker,
    FixedChunker,
    ParagraphChunker,
    RecursiveChunker,
    SentenceChunker,
    StructureChunker,
)
from .by_name import available_chunkers, chunker_summaries, get_chunker
from .headers import context_headers, with_header

__all__ = [
    "Chunker",
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
    "context_headers",
    "with_header",
]
