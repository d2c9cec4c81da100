"""momoka.text: the document model (Document, Section, Chunk), parsing and segmentation."""

from .model import Chunk, Section

__all__ = ["Chunk", "Section"]
