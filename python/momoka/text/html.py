"""HTML to readable text with exact offsets, on the standard library's ``html.parser``.

h1-h6 become sections (their text is a paragraph of its own); p, li, dt, dd,
blockquote, div and the other block elements become paragraphs; ``pre`` keeps
its whitespace; a table becomes one paragraph with a row per line and cells
joined by `` | `` (a caption is a row of its own); ``br`` is a line break;
script, style, noscript, template, svg and math are dropped; character
references are decoded. ``<title>`` gives the title.

Navigation is not text: ``<nav>``, elements with ``role="navigation"``, the
navigation blocks documentation generators write (Sphinx's ``related`` and
``sphinxsidebar``, texinfo's ``nav-panel``, DocBook's ``navheader`` /
``navfooter``, skip links) and blocks made only of texinfo's ``Next: ...,
Previous: ..., Up: ... [Index]`` links are dropped, and so is a link inside a
heading whose text is only a glyph (Sphinx's ``¶`` header link, the ``#``
anchors of Node.js and GitHub pages).
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

from ..errors import InputError, ParseError
from ._build import Builder, ParsedDocument

__all__ = ["parse_html"]

_SKIP = {"script", "style", "noscript", "template", "svg", "math", "iframe", "object"}
_BLOCK = {
    "address", "article", "aside", "blockquote", "body", "center", "dd", "details", "dialog", "div", "dl",
    "dt", "fieldset", "figcaption", "figure", "footer", "form", "header", "hgroup", "hr", "html", "li",
    "main", "menu", "nav", "ol", "p", "section", "summary", "ul", "head", "option", "legend",
}
_HEADINGS = {"h1": 1, "h2": 2, "h3": 3, "h4": 4, "h5": 5, "h6": 6}
_VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}
_WS = re.compile(r"[ \t\n\r\f\v]+")
#: Classes of navigation-only elements (dropped with their content).
NAV_CLASSES = frozenset({"related", "sphinxsidebar", "sphinxsidebarwrapper", "nav-panel", "navheader", "navfooter",
                         "skip-to-content", "skip-link"})
#: What a heading's permalink shows: a link inside a heading with only these characters is dropped.
_ANCHOR_GLYPHS = re.compile(r"^[\s¶#§🔗\uf0c1]+$")
#: A block that is only texinfo navigation: "Next: A, Previous: B, Up: C   [Contents][Index]" (two labels,
#: or labels and bracketed links; "Next: we build it." is text).
_NAV_LABEL = r"(?:(?:Next|Previous|Prev|Up|Forward|Back)\s*:[^:\n]*?(?:,\s*|\s+|$))"
_NAV_LINE = re.compile(rf"^(?:{_NAV_LABEL}{{2,}}(?:\[[^\]\n]*\]\s*)*|{_NAV_LABEL}+(?:\[[^\]\n]*\]\s*)+)$")


def _is_navigation(tag: str, attrs: list[tuple[str, str | None]]) -> bool:
    if tag == "nav":
        return True
    for k, v in attrs:
        if k == "role" and v == "navigation":
            return True
        if k == "class" and v and NAV_CLASSES.intersection(v.split()):
            return True
    return False


class _Parser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.b = Builder()
        self.buf: list[str] = []  # current block (inline text; "\n" for <br>)
        self.skip = 0
        self.pre = 0
        self.in_title = False
        self.title: list[str] = []
        self.heading: int = 0  # level of the open heading, 0 when none
        self.table = 0
        self.rows: list[str] = []
        self.cells: list[str] = []
        self.cell: list[str] | None = None
        self.caption = False
        self.drop: str | None = None  # the navigation element being dropped, with its content
        self.drop_depth = 0
        self.anchor: int | None = None  # where the text of a link inside a heading starts in buf

    # -- helpers -------------------------------------------------------------

    def _flush(self) -> None:
        raw = "".join(self.buf)
        self.buf = []
        if self.pre:
            self.b.block(raw)
            return
        lines = [" ".join(x.split()) for x in raw.split("\n")]
        text = "\n".join(x for x in lines if x)
        if not text or (not self.heading and _NAV_LINE.match(text)):
            return
        if self.heading:
            # one heading per <hN>: text after a block inside an unclosed
            # heading ("<h1>Title<p>body") is body text
            self.b.heading(text, self.heading)
            self.heading = 0
        else:
            self.b.block(text)

    def _end_cell(self) -> None:
        if self.cell is not None:
            self.cells.append(" ".join("".join(self.cell).split()))
            self.cell = None

    def _end_row(self) -> None:
        self._end_cell()
        if any(self.cells):
            self.rows.append(" | ".join(self.cells))
        self.cells = []

    # -- parser callbacks ------------------------------------------------------

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self.drop is not None:
            if tag == self.drop and tag not in _VOID:
                self.drop_depth += 1
            return
        if not self.skip and tag not in _VOID and _is_navigation(tag, attrs):
            self._flush()
            self.drop, self.drop_depth = tag, 1
            return
        if tag == "a" and self.heading and not self.skip:
            self.anchor = len(self.buf)
        if tag in _SKIP:
            if tag not in _VOID:
                self.skip += 1
            return
        if self.skip:
            return
        if tag == "title":
            self.in_title = True
            return
        if self.table:
            if tag == "table":
                self.table += 1
            elif tag == "tr":
                self._end_row()
            elif tag in ("td", "th"):
                self._end_cell()
                self.cell = []
            elif tag == "caption":
                self._end_row()
                self.cell = []
                self.caption = True
            elif tag == "br" and self.cell is not None:
                self.cell.append(" ")
            return
        if tag == "table":
            self._flush()
            self.table = 1
            self.rows, self.cells, self.cell = [], [], None
            return
        if tag == "br":
            self.buf.append("\n")
            return
        if tag in _HEADINGS:
            self._flush()
            self.heading = _HEADINGS[tag]
            return
        if tag == "pre":
            self._flush()
            self.pre += 1
            return
        if tag in _BLOCK:
            self._flush()

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        # <br/>, <hr/>, <img/>: no content, never opens a skipped region
        if tag in _SKIP or self.skip or self.drop is not None:
            return
        if tag == "br":
            if self.table:
                if self.cell is not None:
                    self.cell.append(" ")
            else:
                self.buf.append("\n")
        elif tag in _BLOCK and not self.table:
            self._flush()

    def handle_endtag(self, tag: str) -> None:
        if self.drop is not None:
            if tag == self.drop:
                self.drop_depth -= 1
                if self.drop_depth == 0:
                    self.drop = None
            return
        if tag == "a" and self.anchor is not None:
            if self.heading and _ANCHOR_GLYPHS.match("".join(self.buf[self.anchor :])):
                del self.buf[self.anchor :]  # a permalink glyph, not part of the heading
            self.anchor = None
        if tag in _SKIP:
            if self.skip and tag not in _VOID:
                self.skip -= 1
            return
        if self.skip:
            return
        if tag == "title":
            self.in_title = False
            return
        if self.table:
            if tag == "table":
                self.table -= 1
                if self.table == 0:
                    self._end_row()
                    self.b.block("\n".join(self.rows))
                    self.rows = []
            elif tag in ("td", "th"):
                self._end_cell()
            elif tag == "tr":
                self._end_row()
            elif tag == "caption" and self.caption:
                self._end_row()
                self.caption = False
            return
        if tag in _HEADINGS:
            if self.heading:
                self._flush()
                self.heading = 0
            return
        if tag == "pre":
            if self.pre:
                self._flush()
                self.pre -= 1
            return
        if tag in _BLOCK:
            self._flush()

    def handle_data(self, data: str) -> None:
        if self.skip or self.drop is not None:
            return
        if self.in_title:
            self.title.append(data)
            return
        if self.table:
            if self.cell is None:
                if not data.strip():
                    return
                self.cell = []  # stray text in a table: a cell of its own
            self.cell.append(data)
            return
        if self.pre:
            self.buf.append(data)
        else:
            self.buf.append(_WS.sub(" ", data))

    def finish(self) -> ParsedDocument:
        self.close()
        if self.table:
            self._end_row()
            self.b.block("\n".join(self.rows))
            self.table = 0
        self._flush()
        title = " ".join("".join(self.title).split()) or None
        return self.b.finish(title)


def parse_html(html: str) -> ParsedDocument:
    """Parse HTML into readable text, paragraph spans, sections and a title."""
    if not isinstance(html, str):
        raise InputError(f"HTML input must be str, got {type(html).__name__}")
    p = _Parser()
    try:
        p.feed(html)
        return p.finish()
    except (AssertionError, ValueError) as e:  # html.parser's own failures
        raise ParseError(f"HTML could not be parsed: {e}") from e
