"""MC-indexing's content-aware chunker: one chunk per smallest structural division.

The structure is read from the document itself, with offsets into its
unchanged text (so evidence offsets of an evaluation set stay valid):

1. the document's own sections, when a parser gave them (Markdown, HTML files);
2. else headings found in the text: Markdown ATX lines (``## Title``) and
   HTML heading tags (``<h2> Title </h2>``, also the tokenised ``<H2>`` of
   Natural Questions pages);
3. else plain heading lines: a short line (at most ``heading_words`` words, no
   sentence punctuation at its end, starting with a capital or a digit)
   directly followed by a line of body text (Qasper's section names, HotpotQA's
   paragraph titles);
4. else paragraphs (SQuAD's articles: the paragraph is the smallest division).

Headings whose title is empty (NQ's navigation boxes ``<H3> </H3>``) are no
divisions: their text joins the section before them. A heading's trailing
``( edit )`` / ``[edit]`` is not part of its title.

Sections are flat (the paper ignores the hierarchy): each chunk is a section's
own text from its heading up to the next heading of any level. A heading with
no text of its own joins the chunk that follows. Sections whose title matches
``drop`` (References, See also, Notes ... by default) are left out with their
sub-sections, and so is a table of contents (``drop_toc``); this breaks the
usual chunker contract that chunks tile the whole text, on purpose (the paper
drops them to reduce noise). A section longer than the embedder's window stays
one chunk (``max_size=None``); with ``max_size`` sections are cut into
fixed-length pieces (the paper's "FLC within sections" baseline).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...chunking._splitter import Splitter
from ...chunking._tokens import resolve_tokenizer
from ..._validate import check_int
from ...chunking.base import _as_document, _check_unit
from ...chunking.structure import StructureChunker
from ...errors import ConfigError
from ...stats import Stats
from ...text import Document, make_chunks
from ...text.model import Section

__all__ = ["DEFAULT_DROP", "SectionStats", "SectionsChunker", "detect_sections", "heading_title"]

#: Titles of sections dropped by default (case-insensitive, whole title).
DEFAULT_DROP = (r"references|see also|notes|notes and references|external links|further reading|bibliography|"
                r"footnotes|citations|sources|works cited")
#: Titles of a table of contents.
TOC_TITLES = re.compile(r"^(?:table of )?contents$", re.I)
HEADING_MODES = ("auto", "markdown", "html", "lines", "paragraphs")

_MD = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)[ \t]*#*[ \t]*$", re.M)
_HTML = re.compile(r"<h([1-6])(?:\s[^>]*)?>(.{0,400}?)</h\1\s*>", re.I | re.S)
_TAG = re.compile(r"<[^>]{0,200}>")
_EDIT = re.compile(r"\s*[(\[]\s*edit\s*[)\]]\s*$", re.I)
_LINE = re.compile(r"^[^\n]*$", re.M)
_END_PUNCT = ".,;:?!"


def heading_title(raw: str) -> str:
    """A heading's title: tags removed, ``( edit )`` dropped, spaces folded."""
    t = _TAG.sub(" ", raw)
    t = " ".join(t.split())
    return _EDIT.sub("", t).strip()


def _is_heading_line(line: str, max_words: int) -> bool:
    s = line.strip()
    if not s or len(s) > 100 or s[-1] in _END_PUNCT:
        return False
    if not (s[0].isupper() or s[0].isdigit()) or any(c in s for c in "$=\\{}[]|"):
        return False
    words = s.split()
    return len(words) <= max_words and any(ch.isalpha() for ch in s)


def detect_sections(text: str, mode: str = "auto", *, heading_words: int = 10) -> list[Section]:
    """Sections found in ``text`` (offsets into it), flat paths; ``[]`` when none.

    ``mode``: ``"auto"`` (Markdown, else HTML tags, else heading lines),
    ``"markdown"``, ``"html"``, ``"lines"`` or ``"paragraphs"`` (none).
    Untitled headings are skipped (see the module docstring).
    """
    if mode not in HEADING_MODES:
        raise ConfigError(f"headings must be one of {', '.join(HEADING_MODES)}, not {mode!r}")
    heads: list[tuple[int, int, int, str]] = []  # start, heading_end, level, title
    if mode in ("auto", "markdown"):
        heads = [(m.start(), m.end(), len(m.group(1)), heading_title(m.group(2))) for m in _MD.finditer(text)]
    if not heads and mode in ("auto", "html"):
        heads = [(m.start(), m.end(), int(m.group(1)), heading_title(m.group(2))) for m in _HTML.finditer(text)]
    if not heads and mode in ("auto", "lines"):
        lines = [(m.start(), m.end()) for m in _LINE.finditer(text)]
        for i, (a, b) in enumerate(lines[:-1]):
            na, nb = lines[i + 1]
            nxt = text[na:nb].strip()
            if _is_heading_line(text[a:b], heading_words) and len(nxt) > len(text[a:b].strip()) and \
                    not _is_heading_line(nxt, heading_words):
                heads.append((a + (len(text[a:b]) - len(text[a:b].lstrip())), b, 1, " ".join(text[a:b].split())))
    heads = [h for h in heads if h[3]]
    out: list[Section] = []
    stack: list[tuple[int, str]] = []
    for i, (s, he, lvl, title) in enumerate(heads):
        end = len(text)
        for s2, _, l2, _ in heads[i + 1:]:
            if l2 <= lvl:
                end = s2
                break
        while stack and stack[-1][0] >= lvl:
            stack.pop()
        stack.append((lvl, title))
        out.append(Section(title, lvl, s, end, s, he, tuple(t for _, t in stack)))
    return out


@dataclass
class SectionStats(Stats):
    """Counts of a :class:`SectionsChunker`: documents by where their sections came from (``by_parser``, the
    reader's own; ``by_markdown_or_html`` / ``by_lines``, headings detected; ``by_paragraphs``, none found),
    ``sections`` found and ``dropped_sections`` left out."""

    documents: int = 0
    by_parser: int = 0
    by_markdown_or_html: int = 0
    by_lines: int = 0
    by_paragraphs: int = 0
    sections: int = 0
    dropped_sections: int = 0


class SectionsChunker:
    """Content-aware chunks: the smallest structural divisions of a document (MC-indexing §3.2).

    Args:
        headings: where the structure comes from (``"auto"``, ``"markdown"``,
            ``"html"``, ``"lines"``, ``"paragraphs"``; see the module docstring).
        drop: a regular expression matched (case-insensitively, whole title)
            against section titles; matching sections and their sub-sections
            are left out. ``""`` or None keeps everything.
        drop_toc: leave out a "Contents" section.
        max_size: None (default: a section is one chunk however long) or a
            size in ``unit`` to cut sections into fixed-length pieces.
        heading_words: longest plain heading line, in words.

    ``stats`` (:class:`SectionStats`) counts documents by structure source, sections and dropped sections.
    """

    name = "sections"

    def __init__(self, headings: str = "auto", drop: str | None = DEFAULT_DROP, drop_toc: bool = True,
                 max_size: int | None = None, unit: str = "tokens", tokenizer: Any = None,
                 heading_words: int = 10):
        if headings not in HEADING_MODES:
            raise ConfigError(f"headings must be one of {', '.join(HEADING_MODES)}, not {headings!r}")
        try:
            self._drop = re.compile(rf"^(?:{drop})$", re.I) if drop else None
        except re.error as exc:
            raise ConfigError(f"drop is not a valid regular expression: {exc}") from None
        self.headings, self.drop, self.drop_toc = headings, drop or "", bool(drop_toc)
        self.max_size = None if max_size is None else check_int(max_size, "max_size", minimum=1)
        self.unit = _check_unit(unit, tokenizer)
        self.heading_words = check_int(heading_words, "heading_words", minimum=1)
        self._source = resolve_tokenizer(tokenizer) if unit == "tokens" else None
        self._structure = StructureChunker(max_size=1, unit="chars")  # only its segments() is used
        self.stats = SectionStats()

    def params(self) -> dict:
        """The parameters recorded in a store's manifest."""
        return {"headings": self.headings, "drop": self.drop, "drop_toc": self.drop_toc,
                "max_size": self.max_size, "unit": self.unit, "heading_words": self.heading_words}

    def structured(self, document: Any):
        """``(document with sections, how they were found)``: the input itself when it has sections."""
        document = _as_document(document)
        if document.sections and self.headings == "auto":
            return document, "parser"
        secs = [] if self.headings == "paragraphs" else \
            detect_sections(document.text, self.headings, heading_words=self.heading_words)
        if not secs:
            return document, "paragraphs"
        how = "lines" if all(s.level == 1 for s in secs) and not (_MD.search(document.text) or
                                                                   _HTML.search(document.text)) else "markdown_or_html"
        doc = Document(document.text, title=document.title, doc_id=document.doc_id, source=document.source,
                       sections=secs)
        return doc, how

    def dropped(self, document: Any) -> list[tuple[int, int]]:
        """``(start, end)`` of the sections left out (with their sub-sections)."""
        out = []
        for s in getattr(document, "sections", ()) or ():
            title = heading_title(s.title)
            if (self._drop is not None and self._drop.match(title)) or (self.drop_toc and TOC_TITLES.match(title)):
                out.append((s.start, s.end))
        return out

    def spans(self, document: Any) -> tuple[Any, np.ndarray]:
        """``(structured document, (K, 2) spans of the chunks)``."""
        doc, how = self.structured(document)
        sp = Splitter(doc, self.unit, self._source)
        self.stats.documents += 1
        self.stats.count("by_" + how)
        if sp.n == 0:
            return doc, np.zeros((0, 2), dtype=np.int64)
        if how == "paragraphs":
            segs = [tuple(p) for p in np.asarray(doc.paragraphs).tolist()]
        else:
            segs = self._structure.segments(sp)
        drop = self.dropped(doc)
        self.stats.sections += len(segs)
        if drop:
            keep = [(a, b) for a, b in segs if not any(s <= a and b <= e for s, e in drop)]
            self.stats.dropped_sections += len(segs) - len(keep)
            segs = keep
        if self.max_size is not None:
            segs = sp.split_ranges(segs, (), self.max_size)
        return doc, sp.finish(segs)

    def __call__(self, document: Any) -> list:
        """The chunks of ``document`` (section paths filled from the structure found)."""
        doc, spans = self.spans(document)
        return make_chunks(doc, spans)

    def __repr__(self) -> str:
        return "SectionsChunker(" + ", ".join(f"{k}={v!r}" for k, v in self.params().items()) + ")"
