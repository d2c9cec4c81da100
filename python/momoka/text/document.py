"""The :class:`Document` and :func:`make_chunks`.

A Document is a readable text plus its structure, all as exact ``str``
offsets into ``Document.text``: sections (headings), paragraphs and
sentences. Chunkers return spans; :func:`make_chunks` turns spans into
:class:`~momoka.text.model.Chunk` objects with the paragraph, sentence and
section indices every later stage uses.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import EmptyInputError, InputError
from .io import read_file_bytes, read_text_file, resolve_format
from .model import Chunk, Section
from .segment import split_paragraphs, split_sentences_within

__all__ = ["Document", "first_line_title", "make_chunks", "page_number"]


def page_number(page_starts: Any, offset: int) -> int:
    """The number (1-based) of the page holding ``offset``, given each page's start offset in page order
    (a page without text starts where the next one's text does, so its number is never returned for text)."""
    return max(int(np.searchsorted(np.asarray(page_starts), offset, side="right")), 1)


def _as_spans(spans: Any, what: str) -> np.ndarray:
    """An (N, 2) int64 array from an (N, 2) array or a sequence of pairs."""
    try:
        arr = np.asarray(spans)
    except (ValueError, TypeError):  # ragged or non-numeric
        raise InputError(f"{what} must be a sequence of (start, end) pairs or an (N, 2) array") from None
    if arr.size == 0:
        return np.zeros((0, 2), dtype=np.int64)
    if arr.ndim != 2 or arr.shape[1] != 2:
        raise InputError(f"{what} must be a sequence of (start, end) pairs or an (N, 2) array, got shape {arr.shape}")
    if not np.issubdtype(arr.dtype, np.integer):
        raise InputError(f"{what} must hold integers, got dtype {arr.dtype}")
    return arr.astype(np.int64, copy=False)


class Document:
    """A document: readable ``text`` with exact-offset structure.

    Parameters
    ----------
    text:
        The readable text (non-empty, not whitespace only:
        :class:`~momoka.errors.EmptyInputError` otherwise).
    title, doc_id, source:
        Optional metadata (``source`` is e.g. the file path). The title is
        never part of ``text``.
    sections:
        :class:`Section` objects with offsets into ``text`` (parsers fill
        them; plain text has none).
    pages:
        Optional ``(G, 2)`` spans of the pages of a paged source (PDF), in
        page order, sorted and inside the text (a page without text has an
        empty span); :meth:`page_at` turns an offset into a page number.
    paragraphs:
        Optional ``(P, 2)`` paragraph spans (parsers give them for Markdown
        and HTML); by default paragraphs are the blank-line separated blocks
        of ``text``. Given spans are trimmed of whitespace and must be
        sorted and disjoint.

    ``paragraphs`` and ``sentences`` are computed lazily and cached; the
    sentence segmenter runs inside each paragraph, so no sentence crosses a
    paragraph boundary.
    """

    __slots__ = ("text", "title", "doc_id", "source", "sections", "pages", "_paragraphs", "_sentences",
                 "_section_map")

    def __init__(
        self,
        text: str,
        title: str | None = None,
        doc_id: str | None = None,
        source: str | None = None,
        sections: Iterable[Section] = (),
        paragraphs: Any = None,
        pages: Any = None,
    ):
        if not isinstance(text, str):
            raise InputError(
                f"Document text must be str, got {type(text).__name__}"
                + ("; decode it first or use Document.from_file" if isinstance(text, (bytes, bytearray)) else "")
            )
        if not text or text.isspace():
            raise EmptyInputError("document text is empty" if not text else "document text is whitespace only")
        self.text = text
        self.title = title
        self.doc_id = doc_id
        self.source = source
        n = len(text)
        secs = list(sections)
        for s in secs:
            if not isinstance(s, Section):
                raise InputError(f"sections must be Section objects, got {type(s).__name__}")
        secs.sort(key=lambda s: (s.start, -s.end, s.level))
        for s in secs:
            if not (0 <= s.start <= s.end <= n and s.start <= s.heading_start <= s.heading_end <= s.end):
                raise InputError(f"section {s.title!r} has offsets outside the text ({s.start}, {s.end}) / length {n}")
        self.sections: list[Section] = secs
        self._sentences: np.ndarray | None = None
        self._section_map: tuple[np.ndarray, np.ndarray] | None = None
        if paragraphs is None:
            self._paragraphs = None
        else:
            self._paragraphs = self._check_paragraphs(_as_spans(paragraphs, "paragraphs"))
        self.pages: np.ndarray | None = None if pages is None else self._check_pages(_as_spans(pages, "pages"))

    # -- structure ---------------------------------------------------------

    def _check_paragraphs(self, p: np.ndarray) -> np.ndarray:
        text = self.text
        n = len(text)
        out = []
        prev_end = 0
        for s, e in p.tolist():
            if not (0 <= s <= e <= n):
                raise InputError(f"paragraph span ({s}, {e}) is outside the text (length {n})")
            seg = text[s:e]
            lead = len(seg) - len(seg.lstrip())
            if lead == len(seg):
                continue  # whitespace only: not a paragraph
            trail = len(seg) - len(seg.rstrip())
            s, e = s + lead, e - trail
            if s < prev_end:
                raise InputError(f"paragraph spans must be sorted and disjoint; ({s}, {e}) starts before {prev_end}")
            out.append((s, e))
            prev_end = e
        if not out:
            raise InputError("no non-empty paragraph span given")
        return np.asarray(out, dtype=np.int64).reshape(-1, 2)

    def _check_pages(self, g: np.ndarray) -> np.ndarray:
        n = len(self.text)
        if not len(g):
            raise InputError("pages must hold at least one (start, end) span")
        if (g[:, 0] < 0).any() or (g[:, 1] > n).any() or (g[:, 0] > g[:, 1]).any() or (g[1:, 0] < g[:-1, 1]).any():
            raise InputError(f"page spans must be sorted, disjoint and inside the text (length {n})")
        return g

    def page_at(self, offset: int) -> int | None:
        """The number (1-based) of the page holding ``offset``, or ``None`` when the document has no pages."""
        return None if self.pages is None else page_number(self.pages[:, 0], offset)

    @property
    def paragraphs(self) -> np.ndarray:
        """``(P, 2)`` int64 array of paragraph spans (sorted, disjoint, trimmed)."""
        if self._paragraphs is None:
            s, e = split_paragraphs(self.text)
            self._paragraphs = np.stack([s, e], axis=1) if len(s) else np.zeros((0, 2), dtype=np.int64)
        return self._paragraphs

    @property
    def sentences(self) -> np.ndarray:
        """``(S, 2)`` int64 array of sentence spans, segmented inside each paragraph."""
        if self._sentences is None:
            p = self.paragraphs
            s, e = split_sentences_within(self.text, p[:, 0], p[:, 1])
            self._sentences = np.stack([s, e], axis=1) if len(s) else np.zeros((0, 2), dtype=np.int64)
        return self._sentences

    @staticmethod
    def _index(spans: np.ndarray, offsets: Any) -> Any:
        # first span whose end is past the offset: it contains the offset or follows it
        idx = np.searchsorted(spans[:, 1], offsets, side="right")
        return np.minimum(idx, max(len(spans) - 1, 0))

    def paragraph_index(self, offset: int) -> int:
        """Index of the paragraph containing ``offset``, or of the next one when
        ``offset`` falls between paragraphs (the last one past the end)."""
        return int(self._index(self.paragraphs, offset))

    def sentence_index(self, offset: int) -> int:
        """Index of the sentence containing ``offset``, or of the next one when
        ``offset`` falls between sentences (the last one past the end)."""
        return int(self._index(self.sentences, offset))

    def _sections_map(self) -> tuple[np.ndarray, np.ndarray]:
        """Boundaries and, per elementary interval, the innermost section index (-1: none)."""
        if self._section_map is None:
            secs = self.sections
            bounds = np.unique(np.asarray([0, len(self.text)] + [x for s in secs for x in (s.start, s.end)], dtype=np.int64))
            label = np.full(len(bounds), -1, dtype=np.int64)
            # sorted by (start, -end): a nested section is painted after its parent
            for k, s in enumerate(secs):
                a = np.searchsorted(bounds, s.start)
                b = np.searchsorted(bounds, s.end)
                label[a:b] = k
            self._section_map = (bounds, label)
        return self._section_map

    def _section_ids(self, offsets: Any) -> Any:
        bounds, label = self._sections_map()
        k = np.searchsorted(bounds, offsets, side="right") - 1
        return label[np.clip(k, 0, len(label) - 1)]

    def section_path(self, offset: int) -> tuple[str, ...]:
        """Heading path (outermost first) of the innermost section containing ``offset``; ``()`` if none."""
        if not self.sections:
            return ()
        k = int(self._section_ids(offset))
        return tuple(self.sections[k].path) if k >= 0 else ()

    def section_at(self, offset: int) -> Section | None:
        """The innermost :class:`Section` containing ``offset``, or ``None``."""
        if not self.sections:
            return None
        k = int(self._section_ids(offset))
        return self.sections[k] if k >= 0 else None

    def __len__(self) -> int:
        return len(self.text)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable view: text, metadata, sections and paragraph spans."""
        return {
            "doc_id": self.doc_id,
            "title": self.title,
            "source": self.source,
            "text": self.text,
            "sections": [
                {
                    "title": s.title,
                    "level": s.level,
                    "start": s.start,
                    "end": s.end,
                    "heading_start": s.heading_start,
                    "heading_end": s.heading_end,
                    "path": list(s.path),
                }
                for s in self.sections
            ],
            "paragraphs": self.paragraphs.tolist(),
            **({"pages": self.pages.tolist()} if self.pages is not None else {}),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Document:
        """Rebuild a document written by :meth:`to_dict` (``InputError`` if malformed)."""
        try:
            sections = [
                Section(
                    title=s["title"],
                    level=int(s["level"]),
                    start=int(s["start"]),
                    end=int(s["end"]),
                    heading_start=int(s["heading_start"]),
                    heading_end=int(s["heading_end"]),
                    path=tuple(s["path"]),
                )
                for s in d.get("sections") or ()
            ]
            paragraphs = d.get("paragraphs")
            return cls(
                d["text"],
                title=d.get("title"),
                doc_id=d.get("doc_id"),
                source=d.get("source"),
                sections=sections,
                paragraphs=paragraphs if paragraphs else None,
                pages=d.get("pages"),
            )
        except (KeyError, TypeError, ValueError) as e:
            if isinstance(e, InputError):
                raise
            raise InputError(f"malformed document dict: {e!r}") from None

    def __repr__(self) -> str:
        return (
            f"Document(doc_id={self.doc_id!r}, title={self.title!r}, chars={len(self.text)}, "
            f"sections={len(self.sections)})"
        )

    # -- constructors ------------------------------------------------------

    @classmethod
    def from_text(
        cls, text: str, title: str | None = None, doc_id: str | None = None, source: str | None = None
    ) -> Document:
        """A plain-text document: paragraphs at blank lines, no sections."""
        return cls(text, title=title, doc_id=doc_id, source=source)

    @classmethod
    def from_markdown(
        cls, text: str, title: str | None = None, doc_id: str | None = None, source: str | None = None
    ) -> Document:
        """Parse Markdown: ATX and Setext headings become sections; lists, code
        fences and tables stay whole as single paragraphs; ``text`` is the
        readable text (no ``#``, emphasis markers, link targets or fences).
        ``title`` defaults to the first level-1 heading.

        Raises :class:`~momoka.errors.EmptyInputError` for empty input and for
        Markdown made only of headings (no body text).
        """
        from .markdown import parse_markdown  # start-up: momoka.text.markdown

        parsed = parse_markdown(text)
        return parsed.to_document(cls, title=title, doc_id=doc_id, source=source, kind="Markdown")

    @classmethod
    def from_html(
        cls, html: str, title: str | None = None, doc_id: str | None = None, source: str | None = None
    ) -> Document:
        """Parse HTML (stdlib ``html.parser``): h1-h6 become sections; p, li,
        pre, blockquote, div ... become paragraphs; a table becomes one
        paragraph with a row per line (cells joined by `` | ``); script, style,
        template and noscript are dropped. ``title`` defaults to ``<title>``,
        else the first ``<h1>``.

        Raises :class:`~momoka.errors.EmptyInputError` when there is no text
        (e.g. only a ``<head>``) or only headings.
        """
        from .html import parse_html  # start-up: momoka.text.html

        parsed = parse_html(html)
        return parsed.to_document(cls, title=title, doc_id=doc_id, source=source, kind="HTML")

    @classmethod
    def from_pdf(
        cls, data: bytes, title: str | None = None, doc_id: str | None = None, source: str | None = None
    ) -> Document:
        """Read the text layer of a PDF (``pypdf``) with its page spans; see :mod:`momoka.text.pdf`.

        Paragraphs are the blank-line separated blocks of each page (pages are
        joined by a blank line); sections come from the outline (bookmarks);
        ``title`` defaults to the PDF's metadata title.
        Raises :class:`~momoka.errors.EncryptedInputError`,
        :class:`~momoka.errors.NoTextLayerError` (a scan) or
        :class:`~momoka.errors.ParseError` (damaged).
        """
        from .pdf import parse_pdf  # start-up: momoka.text.pdf

        text, pages, meta_title, sections = parse_pdf(data, name=source or "input")
        return cls(text, title=title if title is not None else meta_title, doc_id=doc_id, source=source, pages=pages,
                   sections=sections)

    @classmethod
    def from_docx(
        cls, data: bytes, title: str | None = None, doc_id: str | None = None, source: str | None = None
    ) -> Document:
        """Parse a Word .docx file (``python-docx``): headings become sections, paragraphs paragraphs, a
        table one paragraph; see :mod:`momoka.text.docx` for what is read and the errors."""
        from .docx import parse_docx  # start-up: momoka.text.docx

        parsed = parse_docx(data, name=source or "input")
        return parsed.to_document(cls, title=title, doc_id=doc_id, source=source, kind="Word")

    @classmethod
    def from_file(
        cls,
        path: str | os.PathLike[str],
        format: str | None = None,
        encoding: str | None = None,
        doc_id: str | None = None,
        *,
        max_bytes: int | None = None,
    ) -> Document:
        """Read a file and parse it by extension (``.txt``, ``.md``/``.markdown``,
        ``.html``/``.htm``, ``.pdf``, ``.docx``; anything else is plain text), or
        by ``format`` (``"text"``, ``"markdown"``, ``"html"``, ``"pdf"``,
        ``"docx"``; ``encoding`` does not apply to the last two). ``encoding``
        given is used for the file; None (default) reads the file's byte order
        mark, an HTML file's declared charset, else UTF-8, else the guess of
        charset-normalizer with a warning (:mod:`momoka.text.io`).

        The size is checked before reading: files above ``max_bytes``
        (default :data:`momoka.text.io.DEFAULT_MAX_INPUT_BYTES`, 100 MiB, or
        the ``MOMOKA_MAX_INPUT_BYTES`` environment variable) raise
        :class:`~momoka.errors.InputTooLargeError`. Empty and whitespace-only
        files raise :class:`~momoka.errors.EmptyInputError`, binary files
        :class:`~momoka.errors.BinaryInputError`, undecodable bytes
        :class:`~momoka.errors.EncodingError` (with the byte offset).
        ``doc_id`` defaults to the file name without extension; ``source`` is
        the path. A plain-text file's title is its first line when that line
        looks like one (:func:`first_line_title`), as a Markdown file's is its
        first heading.
        """
        p = Path(path)
        fmt = resolve_format(p, format)
        did = doc_id if doc_id is not None else p.stem
        src = str(p)
        if fmt == "pdf":
            return cls.from_pdf(read_file_bytes(p, max_bytes), doc_id=did, source=src)
        if fmt == "docx":
            return cls.from_docx(read_file_bytes(p, max_bytes), doc_id=did, source=src)
        text = read_text_file(p, encoding=encoding, max_bytes=max_bytes, format=fmt)
        if fmt == "markdown":
            return cls.from_markdown(text, doc_id=did, source=src)
        if fmt == "html":
            return cls.from_html(text, doc_id=did, source=src)
        return cls.from_text(text, title=first_line_title(text), doc_id=did, source=src)


#: A plain-text file's first line is its title only when it has at most this many characters ...
TITLE_MAX_CHARS = 100
#: ... and at most this many words.
TITLE_MAX_WORDS = 12


def first_line_title(text: str) -> str | None:
    """The title of a plain-text file: its first non-blank line (whitespace collapsed) when that line looks
    like a title: at most :data:`TITLE_MAX_CHARS` characters and :data:`TITLE_MAX_WORDS` words, a letter in
    it, no ``. , ; : ! ?`` at its end, and more text after it. Else None.

    Licences, READMEs and reports written as plain text open with one ("Mozilla Public License Version
    2.0", "GNU GENERAL PUBLIC LICENSE"); a file that opens with a sentence gets no title.
    """
    body = text.lstrip()
    nl = body.find("\n")
    if nl < 0 or not body[nl:].strip():
        return None
    line = " ".join(body[:nl].split())
    if (not line or len(line) > TITLE_MAX_CHARS or len(line.split()) > TITLE_MAX_WORDS or line[-1] in ".,;:!?"
            or not any(ch.isalpha() for ch in line)):
        return None
    return line


def make_chunks(
    document: Document,
    spans: Any,
    *,
    start_index: int = 0,
    metadata: Sequence[dict[str, Any]] | None = None,
) -> list[Chunk]:
    """Build :class:`Chunk` objects for ``spans`` of ``document``.

    ``spans`` is a sequence of ``(start, end)`` pairs or an ``(N, 2)`` array of
    str offsets with ``0 <= start < end <= len(document.text)`` (overlapping
    spans are allowed). Each chunk gets its exact text, ``index`` (from
    ``start_index``), ``doc_id``, and the paragraph, sentence and section path
    of its first non-whitespace character. ``metadata``, if given, holds one
    dict per span. Raises :class:`~momoka.errors.InputError` for spans outside
    the text or empty spans.
    """
    arr = _as_spans(spans, "spans")
    n = len(document.text)
    if len(arr):
        bad = (arr[:, 0] < 0) | (arr[:, 1] > n) | (arr[:, 0] >= arr[:, 1])
        if bad.any():
            k = int(np.argmax(bad))
            raise InputError(
                f"span {k} ({int(arr[k, 0])}, {int(arr[k, 1])}) is empty or outside the text (length {n})"
            )
    if metadata is not None and len(metadata) != len(arr):
        raise InputError(f"metadata has {len(metadata)} entries for {len(arr)} spans")
    text = document.text
    starts = arr[:, 0].tolist()
    ends = arr[:, 1].tolist()
    texts = [text[s:e] for s, e in zip(starts, ends)]
    first = np.asarray([s + (len(t) - len(t.lstrip())) for s, t in zip(starts, texts)], dtype=np.int64)
    # an all-whitespace span is attributed to its start
    first = np.minimum(first, np.asarray(ends, dtype=np.int64) - 1) if len(first) else first
    para = Document._index(document.paragraphs, first).tolist() if len(first) else []
    sent = Document._index(document.sentences, first).tolist() if len(first) else []
    if document.sections and len(first):
        sec_ids = document._section_ids(first).tolist()
        paths = [tuple(document.sections[k].path) if k >= 0 else () for k in sec_ids]
    else:
        paths = [()] * len(starts)
    doc_id = document.doc_id
    out = []
    for i in range(len(starts)):
        out.append(
            Chunk(
                text=texts[i],
                start=starts[i],
                end=ends[i],
                doc_id=doc_id,
                index=start_index + i,
                paragraph=para[i],
                sentence=sent[i],
                section=paths[i],
                metadata=dict(metadata[i]) if metadata is not None else {},
            )
        )
    return out
