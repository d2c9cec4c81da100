"""PDF (pypdf) and Word (python-docx) documents: text, pages, sections, exact offsets and clear errors."""

from __future__ import annotations

import glob
import json
import io
import re
import shutil
import xml.etree.ElementTree as ET
import zipfile

import pytest
from momoka.chunking import get_chunker
from momoka.cli import main
from momoka.errors import EncryptedInputError, NoTextLayerError, ParseError
from momoka.text import Document

pypdf = pytest.importorskip("pypdf")
docx = pytest.importorskip("docx")

# PDFs that Debian packages ship (made by TeX and by DocBook tools, not here)
REAL_PDFS = sorted(glob.glob("/usr/share/doc/libtasn1-doc/libtasn1.pdf")
                   + glob.glob("/usr/share/doc/shared-mime-info/shared-mime-info-spec.pdf"))
W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"


def _real_pdf(i=0):
    if len(REAL_PDFS) <= i:
        pytest.skip("the Debian-shipped PDFs (libtasn1-doc, shared-mime-info) are not installed")
    return REAL_PDFS[i]


def _outline(reader, items=None):
    """(title, 0-based page) of every outline (bookmark) entry: the PDF's own table of contents."""
    out = []
    for it in reader.outline if items is None else items:
        if isinstance(it, list):
            out.extend(_outline(reader, it))
        else:
            out.append((str(it.title), reader.get_destination_page_number(it)))
    return out


def _squash(s):
    return re.sub(r"\s+", "", s)


@pytest.mark.parametrize("i", [0, 1])
def test_real_pdf_pages_offsets_and_outline(i):
    path = _real_pdf(i)
    doc = Document.from_file(path)
    reader = pypdf.PdfReader(path)
    assert len(doc.pages) == len(reader.pages)
    # each bookmark's title is printed on the page the bookmark points to: the page spans are the right pages
    checked = 0
    for title, page in _outline(reader):
        s, e = doc.pages[page]
        if _squash(title) in _squash(doc.text[s:e]):
            checked += 1
            k = _squash(doc.text).find(_squash(title))  # the first mention is on that page or before it
            assert k < len(_squash(doc.text[:e]))
    assert checked >= 5
    # sections from the outline: (almost) every bookmark, its heading printed on the bookmark's page
    outline = _outline(reader)
    assert len(doc.sections) >= 0.9 * len(outline)
    pages_of = {}
    for title, page in outline:
        pages_of.setdefault(title, set()).add(page + 1)
    for sec in doc.sections:
        assert " ".join(doc.text[sec.heading_start : sec.heading_end].split()) == sec.title
        assert doc.page_at(sec.heading_start) in pages_of[sec.title]
        assert sec.path[-1] == sec.title
    assert max(len(sec.path) for sec in doc.sections) >= 2
    chunks = get_chunker("recursive", size=120)(doc)
    for c in chunks:
        assert doc.text[c.start : c.end] == c.text  # the exact-offset contract
        g = doc.page_at(c.start + len(c.text) - len(c.text.lstrip()))
        s, e = doc.pages[g - 1]
        assert s <= c.start + len(c.text) - len(c.text.lstrip()) < e
    for s, e in doc.paragraphs.tolist():  # no paragraph crosses a page
        g = doc.page_at(s)
        assert e <= doc.pages[g - 1][1]
    assert Document.from_dict(doc.to_dict()).pages.tolist() == doc.pages.tolist()


def _pdf_bytes(**encrypt):
    w = pypdf.PdfWriter()
    w.append(_real_pdf(1))
    if encrypt:
        w.encrypt(algorithm="RC4-128", **encrypt)
    buf = io.BytesIO()
    w.write(buf)
    return buf.getvalue()


def test_pdf_errors(tmp_path):
    data = open(_real_pdf(1), "rb").read()
    for cut in (2000, len(data) // 2, len(data) - 300):  # truncated
        with pytest.raises(ParseError, match="damaged PDF"):
            Document.from_pdf(data[:cut], source="cut.pdf")
    with pytest.raises(ParseError, match="not a PDF"):
        Document.from_pdf(b"hello, not a pdf", source="x.pdf")
    with pytest.raises(EncryptedInputError, match="encrypted"):
        Document.from_pdf(_pdf_bytes(user_password="secret", owner_password="owner"), source="locked.pdf")
    # an empty user password (only an owner password): readable, as every PDF viewer reads it
    assert len(Document.from_pdf(_pdf_bytes(user_password="", owner_password="owner")).text) > 1000
    w = pypdf.PdfWriter()
    for _ in range(3):
        w.add_blank_page(612, 792)
    (tmp_path / "scan.pdf").write_bytes(_write(w))
    with pytest.raises(NoTextLayerError, match="3 page"):
        Document.from_file(tmp_path / "scan.pdf")


def _write(w):
    buf = io.BytesIO()
    w.write(buf)
    return buf.getvalue()


def _make_docx(path):
    d = docx.Document()
    d.add_heading("Annual report", 0)
    d.add_paragraph("This report covers the year. Revenue grew by 12 percent.")
    d.add_heading("Operations", 1)
    d.add_paragraph("The plant in Lyon doubled its output.")
    d.add_paragraph("Shipping moved to rail.", style="List Bullet")
    d.add_heading("Costs", 2)
    t = d.add_table(rows=2, cols=2)
    for (r, c), v in {(0, 0): "item", (0, 1): "cost", (1, 0): "steel", (1, 1): "4.2 M"}.items():
        t.cell(r, c).text = v
    d.add_paragraph("Energy costs fell after the new contract.")
    d.add_heading("Outlook", 1)
    d.add_paragraph("Growth is expected to continue.")
    d.save(path)


def _xml_paragraphs(path):
    """(style id, text) of each body paragraph outside tables, read from word/document.xml directly."""
    root = ET.fromstring(zipfile.ZipFile(path).read("word/document.xml"))
    out = []
    for p in root.find(f"{W}body").findall(f"{W}p"):
        style = p.find(f"{W}pPr/{W}pStyle")
        text = "".join(t.text or "" for t in p.iter(f"{W}t"))
        if text.strip():
            out.append((style.get(f"{W}val") if style is not None else "", text))
    return out


def test_docx_against_its_xml(tmp_path):
    path = tmp_path / "report.docx"
    _make_docx(path)
    doc = Document.from_file(path)
    xml = _xml_paragraphs(path)
    headings = [(t, 1 if s == "Title" else int(s[len("Heading"):])) for s, t in xml if s == "Title" or s.startswith("Heading")]
    assert [(s.title, s.level) for s in doc.sections] == headings
    assert doc.title == "Annual report"
    assert doc.sections[2].path == ("Operations", "Costs")
    paras = [doc.text[s:e] for s, e in doc.paragraphs.tolist()]
    assert [t for t in paras if "|" not in t] == [t for _, t in xml]  # every paragraph, in order, whole
    assert "item | cost\nsteel | 4.2 M" in paras  # the table: a row per line
    chunks = get_chunker("sentence", size=12)(doc)
    assert all(doc.text[c.start : c.end] == c.text for c in chunks)
    assert doc.section_path(doc.text.index("Energy")) == ("Operations", "Costs")
    assert doc.section_path(doc.text.index("Growth")) == ("Outlook",)


def test_docx_errors(tmp_path):
    path = tmp_path / "report.docx"
    _make_docx(path)
    data = path.read_bytes()
    with pytest.raises(ParseError, match="damaged or not a .docx"):
        Document.from_docx(data[: len(data) // 2], source="cut.docx")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("hello.txt", "a zip, not a Word document")
    with pytest.raises(ParseError, match="damaged or not a .docx"):
        Document.from_docx(buf.getvalue(), source="other.docx")
    # Word writes an encrypted .docx as an OLE compound file (its signature, then the encrypted package)
    with pytest.raises(EncryptedInputError, match="encrypted"):
        Document.from_docx(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(504), source="locked.docx")


def test_cli_indexes_pdf_docx_md_html_txt_and_cites_the_page(tmp_path, capsys):
    src = tmp_path / "corpus"
    src.mkdir()
    shutil.copy(_real_pdf(1), src / "mime-spec.pdf")
    _make_docx(src / "report.docx")
    (src / "notes.md").write_text("# Notes\n\nGlaciers carve valleys over millennia.\n")
    (src / "page.html").write_text("<html><body><h1>Owls</h1><p>Owls hunt at night.</p></body></html>")
    (src / "plain.txt").write_text("Penguins cannot fly but swim well.\n")
    store = tmp_path / "s"
    assert main(["index", str(src), "--store", str(store), "--no-dense", "--chunker", "paragraph"]) == 0
    assert "indexed 5 document(s)" in capsys.readouterr().out
    assert main(["query", str(store), "sub-class-of elements: data of this type is also some other type",
                 "-k", "1", "--retriever", "bm25", "--doc", "mime-spec"]) == 0
    head, snippet = capsys.readouterr().out.splitlines()[:2]
    m = re.search(r"mime-spec p\. (\d+) \[\d+:\d+\]", head)
    assert m, head
    page = int(m.group(1))
    assert page > 1
    # the cited page, read on its own by pypdf, holds the passage
    assert _squash(snippet[:200]) in _squash(pypdf.PdfReader(src / "mime-spec.pdf").pages[page - 1].extract_text())
    for q, did in (("Lyon plant output", "report"), ("glaciers valleys", "notes"), ("owls night", "page"),
                   ("penguins swim", "plain")):
        assert main(["query", str(store), q, "-k", "1", "--retriever", "bm25"]) == 0
        head = capsys.readouterr().out.splitlines()[0]
        assert f" {did} [" in head and "p. " not in head, head  # no page for documents without pages


def test_chunk_cli_says_the_page(capsys):
    path = _real_pdf(1)
    assert main(["chunk", path, "--chunker", "paragraph", "--json"]) == 0
    rows = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    reader = pypdf.PdfReader(path)
    assert [r["page"] for r in rows] == sorted(r["page"] for r in rows) and rows[-1]["page"] == len(reader.pages)
    for r in rows[:3] + rows[-3:]:
        assert _squash(r["text"][:200]) in _squash(reader.pages[r["page"] - 1].extract_text())


@pytest.mark.models
def test_ask_cites_the_page_of_a_pdf_passage(tmp_path, capsys, monkeypatch):
    from momoka.errors import ModelNotInstalledError

    try:
        from momoka.models import default_causal_lm

        default_causal_lm()
    except (ImportError, ModelNotInstalledError) as exc:
        pytest.skip(f"causal LM unavailable: {exc}")
    monkeypatch.delenv("MOMOKA_LLM_BASE_URL", raising=False)
    path = _real_pdf(1)
    store = tmp_path / "s"
    assert main(["index", path, "--store", str(store), "--no-dense", "--chunker", "recursive", "--size", "100"]) == 0
    capsys.readouterr()
    # offline, ask quotes evidence sentences: each cites its page too
    assert main(["ask", str(store), "what does a sub-class-of element say about a type?", "--retriever", "bm25",
                 "-k", "2"]) == 0
    quotes = [x for x in capsys.readouterr().out.splitlines() if re.match(r"\[\d+\] ", x)]
    assert quotes and all(re.match(r"\[\d+\] shared-mime-info-spec p\. \d+ \[\d+:\d+\]  ", q) for q in quotes)
    assert main(["ask", str(store), "what does a sub-class-of element say about a type?", "--retriever", "bm25",
                 "-k", "2", "--reader", "local", "-o", "local.max_tokens=8"]) == 0
    lines = [x for x in capsys.readouterr().out.splitlines() if re.match(r"[ *]\[\d+\] ", x)]
    assert len(lines) == 2
    reader = pypdf.PdfReader(path)
    for line in lines:
        m = re.match(r"[ *]\[\d+\] shared-mime-info-spec p\. (\d+) \[\d+:\d+\]  (.*)", line)
        assert m, line
        # the cited page, read on its own by pypdf, holds the start of the passage
        assert _squash(m.group(2)[:80]) in _squash(reader.pages[int(m.group(1)) - 1].extract_text())
