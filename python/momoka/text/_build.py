"""Assembling the readable text of a parsed (Markdown / HTML) document.

Parsers emit blocks in reading order: headings (with a level) and body
blocks (paragraphs, lists, tables, code). The builder joins them with blank
lines into ``text`` and records exact offsets: every block is one paragraph
span, every heading opens a :class:`Section` that runs to the end of the last
block before the next heading of the same or a higher level.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import EmptyInputError
from .model import Section

BLOCK_SEPARATOR = "\n\n"
_LEADING_BLANK_LINES = re.compile(r"^(?:[^\S\r\n]*(?:\r\n|\r|\n))+")


@dataclass
class ParsedDocument:
    """The result of a parser: readable text, paragraph spans, sections and a title guess."""

    text: str
    paragraphs: np.ndarray
    sections: list[Section]
    title: str | None
    body_blocks: int

    def to_document(self, cls: Any, *, title: str | None, doc_id: str | None, source: str | None, kind: str) -> Any:
        """Build a :class:`Document` (``cls``), refusing inputs without body text."""
        if not self.text:
            raise EmptyInputError(f"{kind} input holds no text")
        if self.body_blocks == 0:
            raise EmptyInputError(
                f"{kind} input has only headings ({len(self.sections)}), no body text"
            )
        return cls(
            self.text,
            title=title if title is not None else self.title,
            doc_id=doc_id,
            source=source,
            sections=self.sections,
            paragraphs=self.paragraphs,
        )


@dataclass
class _Open:
    title: str
    level: int
    start: int
    heading_end: int
    path: tuple[str, ...]


@dataclass
class Builder:
    """Collects blocks; call :meth:`heading` / :meth:`block`, then :meth:`finish`."""

    parts: list[str] = field(default_factory=list)
    length: int = 0
    spans: list[tuple[int, int]] = field(default_factory=list)
    sections: list[Section] = field(default_factory=list)
    stack: list[_Open] = field(default_factory=list)
    body_blocks: int = 0
    first_h1: str | None = None
    last_end: int = 0

    def _append(self, text: str) -> tuple[int, int] | None:
        # trailing whitespace and leading blank lines are dropped; leading
        # indentation of the first line is kept (code) but left out of the
        # span; whitespace-only blocks are dropped
        t = _LEADING_BLANK_LINES.sub("", text.rstrip())
        if not t:
            return None
        if self.parts:
            self.parts.append(BLOCK_SEPARATOR)
            self.length += len(BLOCK_SEPARATOR)
        lead = len(t) - len(t.lstrip())
        start = self.length + lead
        self.parts.append(t)
        self.length += len(t)
        self.spans.append((start, self.length))
        self.last_end = self.length
        return start, self.length

    def _close(self, level: int) -> None:
        while self.stack and self.stack[-1].level >= level:
            o = self.stack.pop()
            self.sections.append(
                Section(
                    title=o.title,
                    level=o.level,
                    start=o.start,
                    end=max(self.last_end, o.heading_end),
                    heading_start=o.start,
                    heading_end=o.heading_end,
                    path=o.path,
                )
            )

    def heading(self, title: str, level: int) -> None:
        """A heading of ``level`` (1-6); its text becomes its own paragraph."""
        title = " ".join(title.split())
        if not title:
            return
        self._close(level)
        span = self._append(title)
        assert span is not None
        if level == 1 and self.first_h1 is None:
            self.first_h1 = title
        path = tuple(o.title for o in self.stack) + (title,)
        self.stack.append(_Open(title, level, span[0], span[1], path))

    def block(self, text: str) -> None:
        """A body block (paragraph, list, table, code): one paragraph span."""
        if self._append(text) is not None:
            self.body_blocks += 1

    def finish(self, title: str | None = None) -> ParsedDocument:
        """Close every open section and return the :class:`ParsedDocument`."""
        self._close(0)
        self.sections.sort(key=lambda s: (s.start, -s.end, s.level))
        spans = np.asarray(self.spans, dtype=np.int64).reshape(-1, 2)
        return ParsedDocument(
            text="".join(self.parts),
            paragraphs=spans,
            sections=self.sections,
            title=title if title else self.first_h1,
            body_blocks=self.body_blocks,
        )
