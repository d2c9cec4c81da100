"""Word (.docx) to readable text with exact offsets, on ``python-docx``.

The body is read in order: a paragraph whose style is ``Title`` or
``Heading N`` opens a section (``Title`` is level 1, ``Heading N`` level N);
other paragraphs are paragraphs (list items keep their text, without the
numbering Word draws); a table is one paragraph with a row per line and cells
joined by `` | `` (as in HTML). Text boxes, headers, footers and comments are
not read. The title is the document's core property ``title``, else the first
``Title``/level-1 heading. A file that is not a .docx zip raises
:class:`~momoka.errors.ParseError`; an encrypted one (Word stores those as an
OLE container) :class:`~momoka.errors.EncryptedInputError`.
"""

from __future__ import annotations

import io
import re

from ..errors import ConfigError, EncryptedInputError, ParseError
from ._build import Builder, ParsedDocument

__all__ = ["parse_docx"]

_OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
_HEADING = re.compile(r"^heading\s*([1-9])$", re.I)


def _heading_level(paragraph) -> int:
    """1-9 for a ``Title`` / ``Heading N`` paragraph (its style or a style it is based on), else 0."""
    style = paragraph.style
    while style is not None:
        name = (style.name or "").strip()
        if name.lower() == "title":
            return 1
        m = _HEADING.match(name)
        if m:
            return int(m.group(1))
        style = style.base_style
    return 0


def parse_docx(data: bytes, name: str = "input") -> ParsedDocument:
    """Parse the bytes of a .docx file into readable text, paragraph spans, sections and a title."""
    try:
        import docx  # start-up: docx
        from docx.table import Table  # start-up: docx.table
    except ImportError:  # a dependency of momoka; missing only in a broken install
        raise ConfigError("reading .docx needs the 'python-docx' package (pip install python-docx)") from None
    if data.startswith(_OLE_MAGIC):
        raise EncryptedInputError(f"{name}: an OLE container, not a .docx zip: an encrypted Word file (remove its "
                                  "password in Word) or an old binary .doc (save it as .docx)")
    try:
        d = docx.Document(io.BytesIO(data))
        b = Builder()
        for item in d.iter_inner_content():
            if isinstance(item, Table):
                rows = [" | ".join(" ".join(c.text.split()) for c in row.cells) for row in item.rows]
                b.block("\n".join(r for r in rows if r.strip(" |")))
                continue
            level = _heading_level(item)
            if level:
                b.heading(item.text, level)
            else:
                b.block(item.text)
        title = (d.core_properties.title or "").strip() or None
    except Exception as e:  # a bad zip, missing parts, broken XML: python-docx raises many types
        raise ParseError(f"{name}: damaged or not a .docx file ({type(e).__name__}: {e})") from None
    return b.finish(title)
