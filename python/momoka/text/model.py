"""The document model: :class:`Document`, :class:`Section` and :class:`Chunk`.

Offsets are Python ``str`` indices (code points) into ``Document.text`` and
are exact: ``document.text[chunk.start:chunk.end] == chunk.text``. Anything
added for retrieval (a title, a summary) lives in other fields.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
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

    ``tail`` is the text between the chunk's end and the start of the next
    chunk of its document (whitespace, by the chunkers' contract; ``""``
    when the next chunk starts at or before the end), or None when unknown:
    chunkers leave it None, the indexer sets it (:func:`with_tails`) so that
    context assembly can return neighbouring chunks as one exact span.
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
    tail: str | None = field(default=None, compare=False, hash=False)

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


def with_tails(text: str, chunks: Sequence[Chunk]) -> list[Chunk]:
    """``chunks`` of the document ``text``, each with its :attr:`Chunk.tail` set.

    The tail is ``text[chunk.end:next.start]`` where ``next`` is the chunk
    starting next (ties: the longer first), ``""`` when ``next`` starts at
    or before the end (overlapping chunks); the last chunk's tail stays None
    (nothing follows to join), and so does a tail holding anything but
    whitespace (a chunker that leaves text out of every chunk). Order is kept.
    """
    order = sorted(range(len(chunks)), key=lambda i: (chunks[i].start, -chunks[i].end))
    tails: list[str | None] = [None] * len(chunks)
    reach = -1
    for a, b in zip(order, order[1:]):
        reach = max(reach, chunks[a].end)
        nxt = chunks[b].start
        if nxt <= chunks[a].end:
            tails[a] = ""
        elif chunks[a].end == reach:
            gap = text[chunks[a].end:nxt]
            tails[a] = gap if not gap.strip() else None
    return [replace(c, tail=t) if c.tail != t else c for c, t in zip(chunks, tails)]
