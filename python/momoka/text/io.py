"""Reading document files safely: size limit, binary detection, strict decoding.

:func:`read_text_file` checks, in this order: the file exists and is a regular
file (found without opening it: a FIFO, a socket or a device is refused, never read);
its size is at most ``max_bytes`` (checked with ``stat`` before reading, and
again while reading, so a growing file or a device never hangs the reader);
it is not empty; it holds no NUL byte and few control characters (binary);
it decodes strictly in ``encoding`` (the error names the byte offset); the
text is not whitespace only.
"""

from __future__ import annotations

import codecs
import os
from pathlib import Path

from .. import settings
from .._files import path_kind
from .._validate import check_int
from ..errors import BinaryInputError, ConfigError, EmptyInputError, EncodingError, InputError, InputTooLargeError

__all__ = [
    "DEFAULT_MAX_INPUT_BYTES",
    "FORMATS",
    "max_input_bytes",
    "read_file_bytes",
    "read_text_file",
    "resolve_format",
    "check_binary",
]

#: Default limit on the size of one input file: 100 MiB. Override per call
#: (``max_bytes=``) or with the ``MOMOKA_MAX_INPUT_BYTES`` environment variable.
DEFAULT_MAX_INPUT_BYTES: int = settings.default("MOMOKA_MAX_INPUT_BYTES")

#: File extension to parser format.
FORMATS = {
    ".txt": "text",
    ".text": "text",
    ".md": "markdown",
    ".markdown": "markdown",
    ".mdown": "markdown",
    ".mkd": "markdown",
    ".html": "html",
    ".htm": "html",
    ".xhtml": "html",
    ".pdf": "pdf",
    ".docx": "docx",
}
_FORMAT_NAMES = {"text": "text", "txt": "text", "plain": "text", "markdown": "markdown", "md": "markdown", "html": "html", "htm": "html",
                 "pdf": "pdf", "docx": "docx"}

# bytes that do not occur in text: C0 controls other than \t \n \v \f \r and ESC, plus DEL
_CONTROL = bytes(c for c in range(32) if c not in (9, 10, 11, 12, 13, 27)) + b"\x7f"
#: Fraction of control bytes (in the first 64 KiB) above which a file is binary.
CONTROL_RATIO_LIMIT = 0.05
_SAMPLE = 64 * 1024


def max_input_bytes(max_bytes: int | None = None) -> int:
    """The effective size limit: ``max_bytes``, else ``$MOMOKA_MAX_INPUT_BYTES``, else the default."""
    if max_bytes is not None:
        return check_int(max_bytes, "max_bytes", minimum=0)
    return settings.get_int("MOMOKA_MAX_INPUT_BYTES")


def resolve_format(path: str | os.PathLike[str], format: str | None = None) -> str:
    """``"text"``, ``"markdown"``, ``"html"``, ``"pdf"`` or ``"docx"``: ``format`` if given, else from the
    extension (default text)."""
    if format is not None:
        f = _FORMAT_NAMES.get(str(format).lower().lstrip("."))
        if f is None:
            raise ConfigError(f"unknown document format {format!r}; use one of: text, markdown, html, pdf, docx")
        return f
    return FORMATS.get(Path(path).suffix.lower(), "text")


def check_binary(data: bytes, name: str = "input") -> None:
    """Raise :class:`BinaryInputError` when ``data`` holds a NUL byte or too many control bytes."""
    nul = data.find(b"\x00")
    if nul >= 0:
        raise BinaryInputError(f"{name}: looks binary (NUL byte at offset {nul}), not text")
    sample = data[:_SAMPLE]
    if sample:
        controls = len(sample) - len(sample.translate(None, _CONTROL))
        if controls / len(sample) > CONTROL_RATIO_LIMIT:
            raise BinaryInputError(
                f"{name}: looks binary ({controls} control bytes in the first {len(sample)}), not text"
            )


def _decode(data: bytes, encoding: str, name: str) -> str:
    if codecs.lookup(encoding).name == "utf-8" and data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8) :]
        base = len(codecs.BOM_UTF8)
    else:
        base = 0
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as e:
        off = base + e.start
        bad = data[e.start : min(e.end, e.start + 4)]
        raise EncodingError(
            f"{name}: invalid {encoding} at byte offset {off} (bytes {bad.hex(' ')}); "
            f"give the file's encoding (momoka index --encoding latin-1; in Python encoding='latin-1')",
            offset=off,
        ) from None


def decode_bytes(data: bytes, encoding: str = "utf-8", name: str = "input") -> str:
    """Check and decode in-memory bytes like :func:`read_text_file` does for a file."""
    try:
        codec = codecs.lookup(encoding).name  # normalised: "utf-8", "utf-16", "iso8859-1" ...
    except LookupError:
        raise ConfigError(f"unknown encoding {encoding!r}") from None
    if not data:
        raise EmptyInputError(f"{name}: empty")
    if codec == "utf-8" and data[:2] in (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE):
        raise EncodingError(f"{name}: starts with a UTF-16 byte order mark; pass encoding='utf-16'", offset=0)
    if not codec.startswith(("utf-16", "utf-32")):  # NUL bytes are normal there
        check_binary(data, name)
    text = _decode(data, encoding, name)
    if not text or text.isspace():
        raise EmptyInputError(f"{name}: holds only whitespace")
    return text


def read_file_bytes(path: str | os.PathLike[str], max_bytes: int | None = None) -> bytes:
    """The bytes of a file, checked like :func:`read_text_file` checks them (exists, size limit, not empty)."""
    p = Path(path)
    name = str(p)
    limit = max_input_bytes(max_bytes)
    kind = path_kind(p)  # never opens a FIFO, a socket or a device (a FIFO open would block)
    if kind == "missing":
        raise InputError(f"{name}: no such file")
    if kind == "directory":
        raise InputError(f"{name}: is a directory, not a file")
    if kind.startswith("not accessible"):
        raise InputError(f"{name}: {kind}")
    if kind != "file":
        raise InputError(f"{name}: is {kind}, not a regular file")
    try:
        st = p.stat()
    except OSError as e:
        raise InputError(f"{name}: cannot access ({e.strerror})") from None
    if st.st_size > limit:
        raise InputTooLargeError(
            f"{name}: {st.st_size} bytes is above the input limit of {limit} bytes "
            "(raise it with max_bytes= or MOMOKA_MAX_INPUT_BYTES)"
        )
    try:
        with open(p, "rb") as f:
            data = f.read(limit + 1)  # never more than the limit, even if the file grows
    except OSError as e:
        raise InputError(f"{name}: cannot read ({e.strerror})") from None
    if len(data) > limit:
        raise InputTooLargeError(
            f"{name}: more than {limit} bytes, above the input limit "
            "(raise it with max_bytes= or MOMOKA_MAX_INPUT_BYTES)"
        )
    if not data:
        raise EmptyInputError(f"{name}: file is empty")
    return data


def read_text_file(
    path: str | os.PathLike[str], encoding: str = "utf-8", max_bytes: int | None = None
) -> str:
    """Read a text file strictly (see the module docstring for the checks and errors)."""
    return decode_bytes(read_file_bytes(path, max_bytes), encoding, str(Path(path)))
