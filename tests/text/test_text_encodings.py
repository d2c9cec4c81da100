"""Per-file encodings: a byte order mark, an HTML page's declared charset, UTF-8, else a guess with a warning.

The files are written here with Python's own codecs (the reference for what each byte means); the text a
reader must get is the string that was encoded.
"""

from __future__ import annotations

import json
import warnings

import pytest
from momoka import Index
from momoka.cli import main
from momoka.errors import BinaryInputError
from momoka.text import Document

FRENCH = ("Le café de la gare était fermé ce matin-là. Nous avons marché jusqu'à l'hôtel, où l'on sert une "
          "crème brûlée délicieuse et un thé à la menthe; le garçon nous a dit « à bientôt ».")
HTML_BODY = f"<h1>Le café</h1>\n<p>{FRENCH}</p>\n"


def _no_warnings(fn):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return fn()


@pytest.mark.parametrize("head", [
    '<meta charset="ISO-8859-1">',
    "<meta charset=iso-8859-1>",
    '<meta http-equiv="Content-Type" content="text/html; charset=ISO-8859-1">',
    '<META CONTENT="text/html; charset=latin1" HTTP-EQUIV="content-type">',
])
def test_html_declaring_latin1_is_read_in_it(tmp_path, head):
    page = f"<!DOCTYPE html>\n<html><head>{head}<title>Café</title></head><body>{HTML_BODY}</body></html>"
    p = tmp_path / "page.html"
    p.write_bytes(page.encode("iso-8859-1"))
    doc = _no_warnings(lambda: Document.from_file(p))
    assert doc.title == "Café"
    assert doc.text == "Le café\n\n" + FRENCH
    # an encoding given still wins: the same bytes read as cp1250 differ exactly where cp1250 differs
    assert Document.from_file(p, encoding="cp1250").text == ("Le café\n\n" + FRENCH).encode("latin-1").decode("cp1250")


def test_declared_latin1_is_read_as_windows_1252_as_browsers_do(tmp_path):
    text = "He said \u201cit\u2019s fine\u201d \u2013 the caf\u00e9 was open."
    p = tmp_path / "q.html"
    p.write_bytes(f'<meta charset="iso-8859-1"><p>{text}</p>'.encode("cp1252"))
    assert _no_warnings(lambda: Document.from_file(p)).text == text


def test_xml_declaration_is_honoured(tmp_path):
    p = tmp_path / "page.xhtml"
    page = ('<?xml version="1.0" encoding="ISO-8859-15"?>\n<html xmlns="http://www.w3.org/1999/xhtml"><body>'
            "<p>Le prix est de 5 \u20ac, payé à l'œuvre.</p></body></html>")
    p.write_bytes(page.encode("iso-8859-15"))
    assert _no_warnings(lambda: Document.from_file(p)).text == "Le prix est de 5 \u20ac, payé à l'œuvre."


def test_declared_charset_that_does_not_fit_warns_and_guesses(tmp_path):
    p = tmp_path / "wrong.html"
    p.write_bytes(f'<meta charset="utf-8"><p>{FRENCH}</p>'.encode("cp1252"))
    with pytest.warns(UserWarning, match=r"declares utf-8 but is not .*read as cp1252"):
        assert Document.from_file(p).text == FRENCH
    # a UTF-8 page labelled latin-1 is read as the label says (as a browser does); an encoding given wins
    page = f'<meta charset="iso-8859-1"><p>{FRENCH}</p>'.encode()
    p.write_bytes(page)
    assert Document.from_file(p).text == Document.from_html(page.decode("cp1252")).text != FRENCH
    assert Document.from_file(p, encoding="utf-8").text == FRENCH


@pytest.mark.parametrize("codec", ["utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-8-sig"])
def test_byte_order_marks(tmp_path, codec):
    p = tmp_path / "bom.txt"
    data = FRENCH.encode(codec)
    if codec in ("utf-16-le", "utf-16-be"):  # these codecs write no mark: add it
        data = "\ufeff".encode(codec) + data
    p.write_bytes(data)
    assert _no_warnings(lambda: Document.from_file(p)).text == FRENCH
    # in HTML too, before any declaration
    h = tmp_path / "bom.html"
    mark = "\ufeff" if codec in ("utf-16-le", "utf-16-be") else ""
    h.write_bytes((mark + f'<meta charset="iso-8859-1"><p>{FRENCH}</p>').encode(codec))
    assert _no_warnings(lambda: Document.from_file(h)).text == FRENCH


@pytest.mark.parametrize("codec", ["cp1252", "latin-1"])
def test_undeclared_western_text_is_guessed_with_a_warning(tmp_path, codec):
    p = tmp_path / "notes.txt"
    p.write_bytes(("Carnet de route\n\n" + FRENCH + "\n").encode(codec))
    with pytest.warns(UserWarning, match=r"notes\.txt: is not UTF-8 and declares no encoding; read as cp1252"):
        doc = Document.from_file(p)
    assert doc.text == "Carnet de route\n\n" + FRENCH + "\n"
    assert doc.title == "Carnet de route"


def test_undeclared_other_scripts_are_guessed(tmp_path):
    czech = ("Příliš žluťoučký kůň úpěl ďábelské ódy. Čeština je krásný jazyk, který se píše latinkou s háčky "
             "a čárkami.\n")
    russian = "Съешь же ещё этих мягких французских булок, да выпей чаю. Русский язык богат и красив.\n"
    for name, text, codec in (("cz.txt", czech, "cp1250"), ("ru.txt", russian, "cp1251")):
        p = tmp_path / name
        p.write_bytes(text.encode(codec))
        with pytest.warns(UserWarning, match=f"read as {codec}"):
            assert Document.from_file(p).text == text


def test_binary_files_still_get_the_binary_error(tmp_path):
    p = tmp_path / "blob.txt"
    p.write_bytes(bytes(range(256)) * 8)
    with pytest.raises(BinaryInputError, match="looks binary"):
        Document.from_file(p)
    h = tmp_path / "blob.html"
    h.write_bytes(b'<meta charset="iso-8859-1">' + bytes(range(256)) * 8)
    with pytest.raises(BinaryInputError, match="looks binary"):
        Document.from_file(h)


def test_ids_do_not_depend_on_decoding_and_readding_is_unchanged(tmp_path):
    p = tmp_path / "page.html"
    p.write_bytes(f'<meta charset="ISO-8859-1"><p>{FRENCH}</p>'.encode("iso-8859-1"))
    ix = Index.build([p], embedder=None, progress=False)
    assert ix.corpus.doc_ids == ["page"]
    ix.add([p], existing="skip", encoding="latin-1")  # the same text, decoded by the given encoding
    assert ix.report.unchanged == ["page"] and ix.corpus.doc_ids == ["page"]
    ix.close()


def test_cli_indexes_a_latin1_html_page_without_a_flag(tmp_path, capsys):
    src = tmp_path / "site"
    src.mkdir()
    (src / "cafe.html").write_bytes(
        f'<html><head><meta http-equiv="Content-Type" content="text/html; charset=ISO-8859-1">'
        f"<title>Café</title></head><body>{HTML_BODY}</body></html>".encode("iso-8859-1"))
    store = tmp_path / "s"
    assert main(["index", str(src), "--store", str(store), "--no-dense", "--chunker", "paragraph"]) == 0
    assert "indexed 1 document(s)" in capsys.readouterr().out
    assert main(["query", str(store), "crème brûlée", "-k", "1", "--retriever", "bm25", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    text = "".join(m["text"] for m in out["items"][0]["members"])
    assert "crème brûlée délicieuse" in text


def test_unknown_or_utf16_labels(tmp_path):
    p = tmp_path / "odd.html"
    p.write_bytes(f'<meta charset="x-no-such-charset"><p>{FRENCH}</p>'.encode())
    with pytest.warns(UserWarning, match="unknown charset 'x-no-such-charset'; ignored"):
        assert Document.from_file(p).text == FRENCH
    # a page whose "utf-16" label was readable as ASCII is not UTF-16 (browsers read it as UTF-8)
    p.write_bytes(f'<meta charset="utf-16"><p>{FRENCH}</p>'.encode())
    assert _no_warnings(lambda: Document.from_file(p)).text == FRENCH
    # a declaration in a plain-text file is text, not a declaration
    t = tmp_path / "note.txt"
    t.write_bytes(f'<meta charset="iso-8859-1">\n\n{FRENCH}'.encode())
    assert _no_warnings(lambda: Document.from_file(t)).text.endswith(FRENCH)
