"""PDF to readable text with page spans, on ``pypdf`` (the text layer; no OCR).

The text of page ``k`` is ``pypdf``'s ``extract_text()`` of that page,
trimmed; pages are joined by a blank line, so a paragraph never crosses a
page. The page spans are exact offsets into the joined text (a page without
text has an empty span at the place it would be). A PDF encrypted with an
empty user password is read; one that needs a password raises
:class:`~momoka.errors.EncryptedInputError`; one whose pages hold no text
(a scan) :class:`~momoka.errors.NoTextLayerError`; damaged or truncated
bytes :class:`~momoka.errors.ParseError`.

Sections come from the PDF's outline (bookmarks): an entry becomes a
section when its title is printed on the page it points to (found with any
whitespace between its words, at or after the previous heading); the heading
span is that occurrence. Entries whose title is not on their page are left
out; an outline pypdf cannot read is skipped with a warning.
"""

from __future__ import annotations

import io
import logging
import re
import warnings

from ..errors import ConfigError, EncryptedInputError, NoTextLayerError, ParseError
from .model import Section

__all__ = ["PAGE_SEPARATOR", "parse_pdf"]

PAGE_SEPARATOR = "\n\n"


def _pypdf():
    try:
        import pypdf  # start-up: pypdf
    except ImportError:  # a dependency of momoka; missing only in a broken install
        raise ConfigError("reading PDF needs the 'pypdf' package (pip install pypdf)") from None
    return pypdf


def _outline(reader, items=None, level: int = 1) -> list[tuple[str, int, int]]:
    """(title, level, 0-based page) of every outline entry, in reading order."""
    out = []
    for it in reader.outline if items is None else items:
        if isinstance(it, list):
            out.extend(_outline(reader, it, level + 1))
            continue
        page = reader.get_destination_page_number(it)
        title = " ".join(str(it.title or "").split())
        if title and page is not None and page >= 0:
            out.append((title, level, page))
    return out


def _sections(text: str, pages: list[tuple[int, int]], entries: list[tuple[str, int, int]]) -> list[Section]:
    """Sections of the outline ``entries`` whose titles are found on their pages (module docstring)."""
    found = []  # (heading_start, heading_end, level, title)
    after = 0
    for title, level, page in entries:
        if page >= len(pages):
            continue
        s, e = pages[page]
        pattern = r"\s+".join(re.escape(w) for w in title.split())
        m = re.compile(pattern).search(text, max(s, after), e)
        if m is None:
            continue
        found.append((m.start(), m.end(), level, title))
        after = m.end()
    out, stack = [], []  # stack: (level, title)
    for k, (hs, he, level, title) in enumerate(found):
        end = next((f[0] for f in found[k + 1 :] if f[2] <= level), len(text))
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, title))
        out.append(Section(title=title, level=min(level, 6), start=hs, end=end, heading_start=hs, heading_end=he,
                           path=tuple(t for _, t in stack)))
    return out


def parse_pdf(data: bytes, name: str = "input") -> tuple[str, list[tuple[int, int]], str | None, list[Section]]:
    """``(text, page spans, title, sections)`` of the PDF ``data`` (see the module docstring for the errors)."""
    pypdf = _pypdf()
    if not data.lstrip()[:5] == b"%PDF-":
        raise ParseError(f"{name}: not a PDF (no %PDF- header)")
    # pypdf logs recoverable damage as warnings; the errors below say what could not be recovered
    log = logging.getLogger("pypdf")
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        try:
            reader = pypdf.PdfReader(io.BytesIO(data), strict=False)
            if reader.is_encrypted:
                try:
                    ok = reader.decrypt("")
                except pypdf.errors.DependencyError:  # AES without the 'cryptography' package
                    raise EncryptedInputError(f"{name}: the PDF is AES-encrypted; decrypt it first (e.g. qpdf "
                                              "--decrypt), or pip install cryptography if it has no password") from None
                if not ok:
                    raise EncryptedInputError(f"{name}: the PDF is encrypted; decrypt it first (e.g. qpdf --decrypt)")
            pages = [(p.extract_text() or "").strip() for p in reader.pages]
            meta = reader.metadata
            title = str(meta.title).strip() if meta is not None and meta.title else None
            try:
                entries = _outline(reader)
            except Exception as e:  # a broken outline: the text is still good
                warnings.warn(f"{name}: its outline (bookmarks) could not be read ({type(e).__name__}); "
                              "the document has no sections", UserWarning, stacklevel=2)
                entries = []
        except (EncryptedInputError, NoTextLayerError):
            raise
        except pypdf.errors.FileNotDecryptedError:
            raise EncryptedInputError(f"{name}: the PDF is encrypted; decrypt it first (e.g. qpdf --decrypt)") from None
        except Exception as e:  # pypdf raises many types on damaged files (PdfReadError, KeyError, ...)
            raise ParseError(f"{name}: damaged PDF ({type(e).__name__}: {e})") from None
    finally:
        log.setLevel(level)
    if not pages:
        raise ParseError(f"{name}: the PDF has no pages")
    parts, spans, length = [], [], 0
    for text in pages:
        if length and text:
            parts.append(PAGE_SEPARATOR)
            length += len(PAGE_SEPARATOR)
        spans.append((length, length + len(text)))
        parts.append(text)
        length += len(text)
    if length == 0:
        raise NoTextLayerError(f"{name}: none of its {len(pages)} page(s) has a text layer (a scan?); "
                               "run OCR first (e.g. ocrmypdf)")
    text = "".join(parts)
    return text, spans, title or None, _sections(text, spans, entries)
