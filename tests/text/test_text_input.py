"""Bad input files: each case gets a clear momoka.errors exception (what was tried is in each test)."""

from __future__ import annotations

import os

import pytest

from momoka.errors import (
    BinaryInputError,
    ConfigError,
    EmptyInputError,
    EncodingError,
    InputError,
    InputTooLargeError,
    MomokaError,
    ParseError,
)
from momoka.text import DEFAULT_MAX_INPUT_BYTES, Document
from momoka.text.io import decode_bytes, max_input_bytes, resolve_format


def write(tmp_path, name, data: bytes):
    p = tmp_path / name
    p.write_bytes(data)
    return p


def test_format_by_extension_and_override(tmp_path):
    md = "# Head\n\nBody *text*."
    for name, text in [("a.md", "Head\n\nBody text."), ("a.markdown", "Head\n\nBody text."), ("a.txt", md), ("a", md)]:
        doc = Document.from_file(write(tmp_path, name, md.encode()))
        assert doc.text == text
    p = write(tmp_path, "page.htm", b"<title>T</title><h1>H</h1><p>x &lt; y</p>")
    doc = Document.from_file(p)
    assert (doc.text, doc.title, doc.doc_id, doc.source) == ("H\n\nx < y", "T", "page", str(p))
    # override: a .txt file parsed as Markdown, and an explicit doc_id
    doc = Document.from_file(write(tmp_path, "notes.txt", md.encode()), format="markdown", doc_id="n1")
    assert (doc.text, doc.doc_id, doc.title) == ("Head\n\nBody text.", "n1", "Head")
    # an unknown format name is a configuration error
    with pytest.raises(ConfigError):
        Document.from_file(p, format="rtf")
    with pytest.raises(ParseError, match="not a PDF"):  # an HTML file read as PDF
        Document.from_file(p, format="pdf")
    assert resolve_format("x.HTML") == "html" and resolve_format("x.rst") == "text"


def test_missing_file_and_directory(tmp_path):
    # a path that does not exist, and a directory
    with pytest.raises(InputError, match="no such file"):
        Document.from_file(tmp_path / "nope.txt")
    with pytest.raises(InputError, match="directory"):
        Document.from_file(tmp_path)


def test_empty_file(tmp_path):
    # a zero-byte file
    with pytest.raises(EmptyInputError, match="empty"):
        Document.from_file(write(tmp_path, "e.txt", b""))


def test_whitespace_only_file(tmp_path):
    # spaces, tabs, newlines (and a non-breaking space) only
    with pytest.raises(EmptyInputError, match="whitespace"):
        Document.from_file(write(tmp_path, "w.txt", " \t\n\r\n\u00a0\n".encode()))


def test_binary_file(tmp_path):
    # a PNG-like header (holds NUL bytes)
    with pytest.raises(BinaryInputError, match="NUL"):
        Document.from_file(write(tmp_path, "img.txt", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"))
    # no NUL, but mostly control bytes
    with pytest.raises(BinaryInputError, match="control"):
        Document.from_file(write(tmp_path, "ctl.md", bytes(range(1, 32)) * 10 + b"some text"))
    # a few control characters in real text are fine (form feed, ESC, a stray \x01)
    doc = Document.from_file(write(tmp_path, "ok.txt", b"Page one.\x0c\nPage two.\x1b[0m and \x01 more text here"))
    assert doc.text.startswith("Page one.")


def test_invalid_utf8_reports_byte_offset(tmp_path):
    # a Latin-1 encoded "café" after 10 ASCII bytes: the invalid byte 0xE9 is at offset 13
    # (an encoding given is used strictly; without one, such a file is guessed: tests/text/test_text_encodings.py)
    data = b"0123456789caf\xe9 au lait"
    with pytest.raises(EncodingError) as ei:
        Document.from_file(write(tmp_path, "l1.txt", data), encoding="utf-8")
    assert ei.value.offset == 13
    assert "byte offset 13" in str(ei.value)
    # the same bytes decode with the right encoding
    assert Document.from_file(tmp_path / "l1.txt", encoding="latin-1").text == data.decode("latin-1")
    # a truncated multi-byte sequence at the end
    with pytest.raises(EncodingError) as ei:
        Document.from_file(write(tmp_path, "trunc.txt", "abc \u20ac".encode()[:-1]), encoding="utf-8")
    assert ei.value.offset == 4
    # a UTF-8 BOM is skipped; offsets after it count the BOM bytes
    assert Document.from_file(write(tmp_path, "bom.txt", b"\xef\xbb\xbfHello.")).text == "Hello."
    with pytest.raises(EncodingError) as ei:
        Document.from_file(write(tmp_path, "bom2.txt", b"\xef\xbb\xbfab\xff"), encoding="utf-8")
    assert ei.value.offset == 5
    # UTF-16 read as UTF-8: a clear hint instead of a binary / NUL error
    with pytest.raises(EncodingError, match="utf-16"):
        Document.from_file(write(tmp_path, "u16.txt", "hi there".encode("utf-16")), encoding="utf-8")
    assert Document.from_file(tmp_path / "u16.txt", encoding="utf-16").text == "hi there"
    with pytest.raises(ConfigError):
        Document.from_file(tmp_path / "u16.txt", encoding="no-such-codec")


def test_too_large_file_refused_before_reading(tmp_path, monkeypatch):
    # a sparse 200 MB file: refused from its size alone (no 200 MB read, no hang)
    big = tmp_path / "big.txt"
    with open(big, "wb") as f:
        f.truncate(200 * 1024 * 1024)
    assert DEFAULT_MAX_INPUT_BYTES < 200 * 1024 * 1024
    with pytest.raises(InputTooLargeError, match="limit"):
        Document.from_file(big)
    # a small explicit limit, and the environment variable
    small = write(tmp_path, "s.txt", b"x" * 100)
    with pytest.raises(InputTooLargeError):
        Document.from_file(small, max_bytes=99)
    assert Document.from_file(small, max_bytes=100).text == "x" * 100
    monkeypatch.setenv("MOMOKA_MAX_INPUT_BYTES", "50")
    assert max_input_bytes() == 50
    with pytest.raises(InputTooLargeError):
        Document.from_file(small)
    monkeypatch.setenv("MOMOKA_MAX_INPUT_BYTES", "lots")
    with pytest.raises(ConfigError):
        Document.from_file(small)
    with pytest.raises(ConfigError):
        max_input_bytes(-1)


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="needs /dev/zero")
def test_endless_device_does_not_hang():
    # /dev/zero reports size 0 but never ends: a device is refused before it is opened (so is a FIFO,
    # whose open would block: tests/store/test_special_paths.py)
    with pytest.raises(InputError, match=r"/dev/zero: is a character device, not a regular file"):
        Document.from_file("/dev/zero", max_bytes=1024)


def test_html_without_body_file(tmp_path):
    # only a <head>: no text to index
    p = write(tmp_path, "h.html", b"<html><head><title>T</title><style>a{}</style></head></html>")
    with pytest.raises(EmptyInputError):
        Document.from_file(p)
    # no <body> element but text: parsed
    p = write(tmp_path, "h2.html", b"<html><head><title>T</title></head><p>Hi.</p></html>")
    assert Document.from_file(p).text == "Hi."


def test_markdown_only_headings_file(tmp_path):
    # documented behaviour: a Markdown file of headings only has no body text
    p = write(tmp_path, "toc.md", b"# Chapter 1\n\n## Section 1.1\n\n# Chapter 2\n")
    with pytest.raises(EmptyInputError, match="no body text"):
        Document.from_file(p)


def test_all_errors_are_momoka_errors():
    for exc in (EmptyInputError, BinaryInputError, EncodingError, InputTooLargeError, ConfigError):
        assert issubclass(exc, MomokaError)
    with pytest.raises(EmptyInputError):
        decode_bytes(b"")


def test_plain_text_title_is_a_title_like_first_line(tmp_path):
    from momoka.text.document import first_line_title

    # hand-made cases: a title line, then sentences, numbers, long lines and single lines that are not
    assert first_line_title("   Mozilla Public License Version 2.0\n==================\n\n1. Definitions") == \
        "Mozilla Public License Version 2.0"
    assert first_line_title("\n\n  GNU GENERAL   PUBLIC LICENSE\n  Version 3\n") == "GNU GENERAL PUBLIC LICENSE"
    assert first_line_title("The harbor opened in 1850.\nShips came.") is None  # a sentence
    assert first_line_title("Dear all,\nthe meeting moved.") is None
    assert first_line_title("2024-01-05\nNotes of the day.") is None  # no letter
    assert first_line_title("Only one line without a break") is None
    assert first_line_title("A Title\n   \n") is None  # nothing after it
    assert first_line_title(" ".join(["word"] * 13) + "\nbody") is None  # 13 words
    assert first_line_title("x" * 101 + "\nbody") is None
    assert first_line_title(" ".join(["word"] * 12) + "\nbody") == " ".join(["word"] * 12)
    # read from a file: plain text gets it, and the explicit formats keep their own rules
    doc = Document.from_file(write(tmp_path, "LICENSE", b"Apache License\nVersion 2.0, January 2004\n\nTERMS"))
    assert doc.title == "Apache License" and doc.text.startswith("Apache License")
    assert Document.from_file(write(tmp_path, "s.txt", b"It rained. Then it stopped.\nMore.")).title is None
    assert Document.from_text("Apache License\nVersion 2.0").title is None  # text given directly: as given
