"""momoka.text: the document model (Document, Section, Chunk), parsing and segmentation.

Examples:
    >>> from momoka.text import Document, make_chunks
    >>> doc = Document.from_markdown("# Intro\\n\\nDr. Smith came. He left.")
    >>> doc.sentences.tolist()
    [[0, 5], [7, 22], [23, 31]]
    >>> [c.section for c in make_chunks(doc, [(7, 31)])]
    [('Intro',)]
"""

from .document import Document, make_chunks
from .io import DEFAULT_MAX_INPUT_BYTES, read_text_file
from .model import Chunk, Section
from .segment import get_segmenter, span_sentences, split_paragraphs, split_sentences, split_sentences_within

__all__ = [
    "Chunk",
    "DEFAULT_MAX_INPUT_BYTES",
    "Document",
    "Section",
    "get_segmenter",
    "span_sentences",
    "make_chunks",
    "read_text_file",
    "split_paragraphs",
    "split_sentences",
    "split_sentences_within",
]
