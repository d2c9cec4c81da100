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

Control characters are repaired (:func:`repair_text`). pypdf maps a glyph
whose font gives no Unicode for it to its code in the font's encoding, and
TeX's text fonts (OT1) keep the ligatures and accents at the codes of C0
controls: "fi" comes out as U+000C (a form feed, ``the \\x0crst``), "fl" as
U+000D (a carriage return), "ff", "ffi", "ffl" as U+000B, U+000E, U+000F,
and the dieresis in "für" as U+007F. pypdf itself never writes these
characters (it writes ``\\n`` between lines), so in a page's text they are
glyph codes, never whitespace; the rules:

- U+000B-U+000F is the ligature ff, fi, fl, ffi, ffl when a lowercase
  letter follows it (inside a word or at its start: ``\\x0crst`` is
  "first", ``speci\\x0ced`` "specified"), or when a lowercase letter
  precedes it and whitespace, punctuation or the end of the page follows
  (at a word's end: ``sta\\x0b`` is "staff");
- U+0012, U+0013, U+0016, U+0017 and U+007F between two letters are the
  accents grave, acute, macron, ring and dieresis on the letter after them
  (``f\\x7fur`` is "für", ``E\\x13en`` "Eén"), composed with it (NFC);
- U+000B, U+000C and U+000D that stand alone between whitespace (a line
  break, a space, or the page's start or end on each side) are real
  whitespace and kept, as are tab and line feed;
- every other control character (U+0000-U+001F, U+007F) is a glyph pypdf
  could not name, a math symbol of TeX's math fonts (``0 \\x14 k``, where
  TeX printed "≤") or a piece of a drawing, and becomes U+FFFD, the
  replacement character, which search treats as a separator.

Letters and marks are Unicode's (``str.isalpha``, ``str.islower``). Real
ligature characters (U+FB01 "ﬁ") are text and stay; search folds them
(see :mod:`momoka.store.bm25`).
"""

from __future__ import annotations

import io
import logging
import re
import unicodedata
import warnings

from ..errors import ConfigError, EncryptedInputError, NoTextLayerError, ParseError
from .model import Section

__all__ = ["PAGE_SEPARATOR", "parse_pdf", "repair_text"]

PAGE_SEPARATOR = "\n\n"

#: TeX's OT1 ligature codes, as pypdf gives them when the font does not say what they are.
OT1_LIGATURES = {"\x0b": "ff", "\x0c": "fi", "\x0d": "fl", "\x0e": "ffi", "\x0f": "ffl"}
#: TeX's OT1 accent codes pypdf gives between letters, as combining marks (the caron, breve and cedilla codes,
#: U+0014, U+0015, U+0018, are the math fonts' "≤", "≥" and "∼" too often to be read as accents).
OT1_ACCENTS = {"\x12": "\u0300", "\x13": "\u0301", "\x16": "\u0304", "\x17": "\u030a", "\x7f": "\u0308"}
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_EDGE_SPACE = " \t\n"


def _repair(text: str, i: int) -> str:
    c = text[i]
    prev = text[i - 1] if i > 0 else ""
    nxt = text[i + 1] if i + 1 < len(text) else ""
    if c in OT1_LIGATURES:
        if (nxt.isalpha() and nxt.islower()) or (
                prev.isalpha() and prev.islower() and not nxt.isalpha() and not _CONTROLS.match(nxt or "a")):
            return OT1_LIGATURES[c]
        if c in "\x0b\x0c\x0d" and (prev == "" or prev in _EDGE_SPACE) and (nxt == "" or nxt in _EDGE_SPACE):
            return c  # real whitespace (a form feed between paragraphs)
        return "\ufffd"
    if c in OT1_ACCENTS and prev.isalpha() and nxt.isalpha():
        return ""  # composed with the next letter by the caller
    return "\ufffd"


def repair_text(text: str) -> str:
    """``text`` (one page of pypdf's output) with its control characters repaired: TeX's ligature codes
    become the letters they stand for, its accent codes accented letters, real whitespace stays, and any
    other control character becomes U+FFFD (the rules are in the module docstring)."""
    if not _CONTROLS.search(text):
        return text
    out, last = [], 0
    for m in _CONTROLS.finditer(text):
        i = m.start()
        out.append(text[last:i])
        rep = _repair(text, i)
        if rep == "" and i + 1 < len(text):  # an accent: the next letter with its mark, composed
            out.append(unicodedata.normalize("NFC", text[i + 1] + OT1_ACCENTS[text[i]]))
            last = i + 2
            continue
        out.append(rep)
        last = i + 1
    out.append(text[last:])
    return "".join(out)


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
            pages = [repair_text(p.extract_text() or "").strip() for p in reader.pages]
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
