"""Reading document files safely: size limit, binary detection, strict decoding.

:func:`read_text_file` checks, in this order: the file exists and is a regular
file (found without opening it: a FIFO, a socket or a device is refused, never read);
its size is at most ``max_bytes`` (checked with ``stat`` before reading, and
again while reading, so a growing file or a device never hangs the reader);
it is not empty; it holds no NUL byte and few control characters (binary);
it decodes strictly (the error names the byte offset); the text is not
whitespace only.

Which encoding (:func:`decode_bytes`): an ``encoding`` given wins for every
file. Without one, each file is read in the first of

1. its byte order mark (UTF-8, UTF-16 or UTF-32, little or big endian);
2. for HTML, the charset it declares in its first 1024 bytes, as browsers
   look for it: ``<meta charset="...">``, ``<meta http-equiv="Content-Type"
   content="...; charset=...">`` or an XML declaration's
   ``encoding="..."``. The labels ``iso-8859-1``, ``latin1`` and
   ``us-ascii`` are read as windows-1252, as every browser reads them (the
   same letters, and the quotes and dashes in 0x80-0x9F that pages so labelled
   hold); a declared UTF-16 in a page whose declaration was readable as ASCII
   is read as UTF-8, as browsers do. An unknown label is ignored with a
   warning, and bytes that are not valid in the declared charset go on to
   detection with a warning;
3. UTF-8;
4. when UTF-8 fails, the guess of charset-normalizer, with a warning naming
   it (windows-1252 is preferred when charset-normalizer rates it as
   coherent as its first guess and at most :data:`PREFER_CP1252_CHAOS` more
   chaotic: on short Western text it often ranks a Baltic or Central
   European code page first). No guess: :class:`EncodingError`.

A file with NUL bytes and no UTF-16/32 byte order mark is binary, whatever
it declares. The document id of a file comes from its path only, never from
how its bytes were decoded.
"""

from __future__ import annotations

import codecs
import os
import re
import warnings
from pathlib import Path

from .. import settings
from .._files import path_kind
from .._validate import check_int
from ..errors import BinaryInputError, ConfigError, EmptyInputError, EncodingError, InputError, InputTooLargeError

__all__ = [
    "DEFAULT_MAX_INPUT_BYTES",
    "FORMATS",
    "max_input_bytes",
    "bom_encoding",
    "decode_bytes",
    "declared_encoding",
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


#: Byte order marks, longest first (a UTF-32 LE mark starts like a UTF-16 LE one).
_BOMS = ((codecs.BOM_UTF32_LE, "utf-32-le"), (codecs.BOM_UTF32_BE, "utf-32-be"), (codecs.BOM_UTF8, "utf-8"),
         (codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be"))
#: How many bytes of an HTML file are searched for its declared charset (the HTML standard's prescan).
DECLARATION_BYTES = 1024
_META_CHARSET = re.compile(rb"""<meta\s[^>]*?charset\s*=\s*["']?\s*([A-Za-z0-9._:()+-]+)""", re.I)
_XML_ENCODING = re.compile(rb"""^\s*<\?xml\s[^>]*?encoding\s*=\s*["']([A-Za-z0-9._:()+-]+)["']""", re.I)
#: Labels browsers read as windows-1252 (WHATWG Encoding Standard).
_AS_CP1252 = {"iso-8859-1", "iso8859-1", "iso_8859-1", "latin1", "latin-1", "l1", "us-ascii", "ascii",
              "iso-ir-100", "cp819", "ibm819", "csisolatin1", "windows-1252", "cp1252", "x-cp1252"}


def bom_encoding(data: bytes) -> str | None:
    """The codec of ``data``'s byte order mark (``"utf-8"``, ``"utf-16-le"`` ...), or None without one."""
    for bom, codec in _BOMS:
        if data.startswith(bom):
            return codec
    return None


def declared_encoding(data: bytes, name: str = "input") -> str | None:
    """The charset an HTML (or XHTML) file declares in its first :data:`DECLARATION_BYTES` bytes, as a
    Python codec name, or None (see the module docstring for the rules; an unknown label warns)."""
    head = data[:DECLARATION_BYTES]
    m = _XML_ENCODING.match(head) or _META_CHARSET.search(head)
    if m is None:
        return None
    label = m.group(1).decode("ascii").strip().lower()
    if label in _AS_CP1252:
        return "cp1252"
    try:
        codec = codecs.lookup(label).name
    except LookupError:
        warnings.warn(f"{name}: declares the unknown charset {label!r}; ignored", UserWarning, stacklevel=4)
        return None
    if codec.startswith(("utf-16", "utf-32")):  # the declaration was readable as ASCII: not UTF-16
        return "utf-8"
    return codec


def _decode_cp1252(data: bytes) -> str:
    """windows-1252 as browsers read it: the five bytes it leaves undefined are the C1 controls latin-1 gives."""
    return data.decode("cp1252", errors="_momoka_c1")


def _c1(err: UnicodeError) -> tuple[str, int]:
    if not isinstance(err, UnicodeDecodeError):
        raise err
    return err.object[err.start : err.end].decode("latin-1"), err.end


codecs.register_error("_momoka_c1", _c1)


#: charset-normalizer's guess gives way to windows-1252 when it rates windows-1252 as coherent and at most this
#: much more chaotic (its ``chaos`` is a 0-1 ratio): on short Western text it often ranks a Baltic or Central
#: European code page first by a few hundredths, reading "à" as "ą".
PREFER_CP1252_CHAOS = 0.15


def _guess(data: bytes) -> str | None:
    """charset-normalizer's guess for ``data`` (windows-1252 preferred among likely guesses), or None."""
    from charset_normalizer import from_bytes  # start-up: charset_normalizer, only for a file that is not UTF-8

    results = list(from_bytes(data))
    if not results:
        return None
    best = results[0]
    likely = [r.encoding for r in results
              if r.chaos <= best.chaos + PREFER_CP1252_CHAOS and r.coherence >= best.coherence]
    return "cp1252" if "cp1252" in likely else best.encoding


def _text_of(data: bytes, codec: str, name: str) -> str:
    return _decode_cp1252(data) if codec == "cp1252" else _decode(data, codec, name)


def _auto(data: bytes, name: str, format: str | None) -> str:
    """Decode ``data`` without an encoding given: BOM, declaration, UTF-8, detection (module docstring)."""
    bom = bom_encoding(data)
    if bom is not None:
        body = data[len(codecs.BOM_UTF8) :] if bom == "utf-8" else data
        codec = "utf-8" if bom == "utf-8" else bom.rsplit("-", 1)[0]  # utf-16 / utf-32 read their own mark
        return _decode(body, codec, name)
    check_binary(data, name)
    declared = declared_encoding(data, name) if format == "html" else None
    if declared is not None:
        try:
            return _text_of(data, declared, name)
        except EncodingError as e:
            fallback = f"invalid {declared} at byte offset {e.offset}"
    else:
        fallback = None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        pass
    else:
        if fallback is not None:
            warnings.warn(f"{name}: declares {declared} but is not ({fallback}); read as utf-8", UserWarning,
                          stacklevel=3)
        return text
    guess = _guess(data)
    if guess is None:  # the EncodingError with the offset of the first byte that is not UTF-8
        return _decode(data, "utf-8", name)
    text = _text_of(data, guess, name)
    why = f"declares {declared} but is not ({fallback})" if fallback else "is not UTF-8 and declares no encoding"
    warnings.warn(f"{name}: {why}; read as {guess}, guessed by charset-normalizer "
                  f"(give the encoding to choose: momoka index --encoding ...; in Python encoding=...)",
                  UserWarning, stacklevel=3)
    return text


def decode_bytes(data: bytes, encoding: str | None = None, name: str = "input", format: str | None = None) -> str:
    """Check and decode in-memory bytes like :func:`read_text_file` does for a file.

    ``encoding`` given: strictly in it (a UTF-8 byte order mark is skipped). None: the byte order mark,
    the charset an HTML file (``format="html"``) declares, UTF-8, else charset-normalizer's guess with a
    warning (see the module docstring).
    """
    if encoding is not None:
        try:
            codec = codecs.lookup(encoding).name  # normalised: "utf-8", "utf-16", "iso8859-1" ...
        except LookupError:
            raise ConfigError(f"unknown encoding {encoding!r}") from None
    if not data:
        raise EmptyInputError(f"{name}: empty")
    if encoding is None:
        text = _auto(data, name, format)
    else:
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
    path: str | os.PathLike[str], encoding: str | None = None, max_bytes: int | None = None, *,
    format: str | None = None,
) -> str:
    """Read a text file strictly (see the module docstring for the checks, the encoding and the errors);
    ``format`` (default: from the extension) says whether an HTML declaration is looked for."""
    fmt = format if format is not None else resolve_format(path)
    return decode_bytes(read_file_bytes(path, max_bytes), encoding, str(Path(path)), fmt)
