"""PDF to readable text with page spans, on ``pypdf`` (the text layer; no OCR).

The text of page ``k`` is ``pypdf``'s ``extract_text()`` of that page,
trimmed; pages are joined by a blank line, so a paragraph never crosses a
page. The page spans are exact offsets into the joined text (a page without
text has an empty span at the place it would be). A PDF encrypted with an
empty user password is read; one that needs a password raises
:class:`~momoka.errors.EncryptedInputError`; one whose pages hold no text
(a scan) :class:`~momoka.errors.NoTextLayerError`; damaged or truncated
bytes :class:`~momoka.errors.ParseError`.
"""

from __future__ import annotations

import io
import logging

from ..errors import ConfigError, EncryptedInputError, NoTextLayerError, ParseError

__all__ = ["PAGE_SEPARATOR", "parse_pdf"]

PAGE_SEPARATOR = "\n\n"


def _pypdf():
    try:
        import pypdf
    except ImportError:  # a dependency of momoka; missing only in a broken install
        raise ConfigError("reading PDF needs the 'pypdf' package (pip install pypdf)") from None
    return pypdf


def parse_pdf(data: bytes, name: str = "input") -> tuple[str, list[tuple[int, int]], str | None]:
    """``(text, page spans, title)`` of the PDF ``data`` (see the module docstring for the errors)."""
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
    return "".join(parts), spans, title or None
