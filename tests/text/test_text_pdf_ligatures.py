"""PDFs typeset with TeX: pypdf's control-character ligatures and accents repaired, real ligatures searchable.

A PDF made here reproduces what pypdf does with a TeX font that maps no Unicode (the codes of TeX's OT1
encoding come out as C0 controls); the real PDFs are the ones Debian's glpk-doc and camlidl-doc ship
(skipped when not installed). The expected text is written by hand.
"""

from __future__ import annotations

import glob
import io
import re
import unicodedata

import pytest
from momoka import Index
from momoka.text import Document
from momoka.text.pdf import repair_text

pypdf = pytest.importorskip("pypdf")
from pypdf.generic import DecodedStreamObject, DictionaryObject, NameObject  # noqa: E402

CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
# PDFs where pypdf gives "fi" as U+000C (dvipdfmx output of glpk-doc's LaTeX manuals)
TEX_PDFS = sorted(glob.glob("/usr/share/doc/glpk-doc/*.pdf"))
# a pdfTeX PDF with real ligature characters (U+FB01 ...)
LIGATURE_PDFS = sorted(glob.glob("/usr/share/doc/camlidl/camlidl-*.pdf"))


def _tex_like_pdf(lines: list[bytes]) -> bytes:
    """One page in a Type 1 font without a ToUnicode map (as TeX's Computer Modern fonts are embedded),
    each line a PDF string of raw font codes."""
    w = pypdf.PdfWriter()
    page = w.add_blank_page(612, 792)
    font = DictionaryObject({NameObject("/Type"): NameObject("/Font"), NameObject("/Subtype"): NameObject("/Type1"),
                             NameObject("/BaseFont"): NameObject("/CMR10")})
    page[NameObject("/Resources")] = DictionaryObject(
        {NameObject("/Font"): DictionaryObject({NameObject("/F1"): w._add_object(font)})})
    body = b" 0 -20 Td ".join(b"(" + line + b") Tj" for line in lines)
    content = DecodedStreamObject()
    content.set_data(b"BT /F1 12 Tf 72 700 Td " + body + b" ET")
    page[NameObject("/Contents")] = w._add_object(content)
    buf = io.BytesIO()
    w.write(buf)
    return buf.getvalue()


def test_tex_ligature_codes_become_letters():
    data = _tex_like_pdf([b"The \\014rst \\015ow is speci\\014ed; the sta\\013 left \\016ve o\\017ine.",
                          b"f\\177ur Ope, E\\023en, 0 \\024 k \\000 1"])
    raw = pypdf.PdfReader(io.BytesIO(data)).pages[0].extract_text()
    assert "\x0crst" in raw  # what pypdf gives: the problem this repairs
    doc = Document.from_pdf(data, source="tex.pdf")
    assert doc.text == ("The first flow is specified; the staff left ffive offline.\n"
                        "f\u00fcr Ope, E\u00e9n, 0 \ufffd k \ufffd 1")
    assert not CONTROLS.search(doc.text)


def test_repair_rules():
    assert repair_text("the \x0crst \x0dow") == "the first flow"  # at a word's start
    assert repair_text("speci\x0ced, e\x0eciency, wa\x0fe") == "specified, efficiency, waffle"  # inside
    assert repair_text("sta\x0b. and bu\x0b") == "staff. and buff"  # at a word's end
    assert repair_text("caf\x13e") == "caf\x13e".replace("\x13e", "\u00e9") == "caf\u00e9"  # acute, composed
    assert repair_text("one\n\x0c\ntwo") == "one\n\x0c\ntwo"  # a real form feed between paragraphs stays
    assert repair_text("\x0c") == "\x0c"
    assert repair_text("GG\x0e\x0e\x0e") == "GG\ufffd\ufffd\ufffd"  # not after a lowercase letter: a drawing
    assert repair_text("x \x14 y, \x00 1") == "x \ufffd y, \ufffd 1"  # math symbols pypdf cannot name
    assert repair_text("\x0cA") == "\ufffdA"  # no ligature before a capital
    text = "plain text, no controls"
    assert repair_text(text) is text


@pytest.mark.parametrize("path", TEX_PDFS[:3] or [None])
def test_real_tex_pdfs_have_no_control_characters(path):
    if path is None:
        pytest.skip("the Debian glpk-doc PDFs are not installed")
    raw = "\n".join(p.extract_text() or "" for p in pypdf.PdfReader(path).pages)
    doc = Document.from_file(path)
    assert not CONTROLS.search(doc.text)
    if "speci\x0ced" in raw:  # each "speci\x0ced" of pypdf's text is a "specified" of ours
        assert doc.text.count("specified") == raw.count("speci\x0ced") + raw.count("specified")


def test_real_tex_pdf_typed_first_finds_it():
    paths = [p for p in TEX_PDFS if "\x0crst" in "".join(pg.extract_text() or "" for pg in pypdf.PdfReader(p).pages)]
    if not paths:
        pytest.skip("no Debian glpk-doc PDF with pypdf's U+000C ligature is installed")
    doc = Document.from_file(paths[0])
    ix = Index.build([doc], embedder=None, progress=False, chunker="paragraph")
    # a line with "first" (pypdf's "\x0crst"), typed as a reader would
    m = next(x for x in re.finditer(r"[^.\n]*\bfirst\b[^.\n]*", doc.text) if len(x.group().split()) >= 6)
    hits = ix.search(m.group(), k=3, retriever="bm25", assemble=False)
    assert any(h.start <= m.start() < h.end for h in hits)
    for h in hits:
        assert doc.text[h.start : h.end] == h.text
    ix.close()


def test_real_ligature_characters_are_kept_and_found_by_typed_words():
    if not LIGATURE_PDFS:
        pytest.skip("the Debian camlidl-doc PDF is not installed")
    doc = Document.from_file(LIGATURE_PDFS[0])
    assert "\ufb01" in doc.text  # the stored text keeps the ligature character
    ix = Index.build([doc], embedder=None, progress=False, chunker="paragraph")
    # a sentence holding "ﬁ", typed as a reader would (the ligature written out)
    m = next(re.finditer(r"[^.\n]*\w\ufb01\w[^.\n]*", doc.text))
    typed = unicodedata.normalize("NFKC", m.group())
    assert "\ufb01" not in typed
    hits = ix.search(typed, k=3, retriever="bm25", assemble=False)
    assert any(h.start <= m.start() < h.end for h in hits)
    for h in hits:
        assert doc.text[h.start : h.end] == h.text
    ix.close()
