"""The document model: :class:`Document`, :class:`Section` and :class:`Chunk`.

Offsets are Python ``str`` indices (code points) into ``Document.text`` and
are exact: ``document.text[chunk.start:chunk.end] == chunk.text``. Anything
added for retrieval (a title, a summary) lives in other fields.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Section:
    """A section of a structured document.

    ``start``/``end`` delimit the whole section in ``Document.text`` (its
    heading included); ``heading_start``/``heading_end`` delimit the heading
    text alone. ``level`` is 1 for ``#``/``<h1>`` ... 6. ``path`` holds the
    titles from the outermost section down to this one.
    """

    title: str
    level: int
    start: int
    end: int
    heading_start: int
    heading_end: int
    path: tuple[str, ...] = ()


@dataclass(frozen=True)
class Chunk:
    """A contiguous span of a document.

    ``paragraph`` and ``sentence`` are the indices (p_i, s_i) of the
    paragraph and sentence that contain the chunk's first non-whitespace
    character (Momoka eq. 4 uses them). ``section`` is the heading path of
    the innermost section containing that character (``()`` when the
    document has no sections).
    """

    text: str
    start: int
    end: int
    doc_id: str | None
    index: int
    paragraph: int
    sentence: int
    section: tuple[str, ...] = ()
    metadata: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    def __len__(self) -> int:
        return self.end - self.start

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable view of the chunk."""
        d = {
            "doc_id": self.doc_id,
            "index": self.index,
            "start": self.start,
            "end": self.end,
            "paragraph": self.paragraph,
            "sentence": self.sentence,
            "section": list(self.section),
            "text": self.text,
        }
        if self.metadata:
            d["metadata"] = dict(self.metadata)
        return d
