"""Real PDFs with known page contents, written with pypdf's own objects (no PDF library beyond the reader's).

``make_pdf([["line 1 of page 1", "line 2 of page 1"], ["line 1 of page 2"]])`` gives the bytes of a PDF
whose page ``p`` shows those lines in Helvetica, one text line each; ``pypdf``'s ``extract_text()`` reads
each page back as its lines joined by newlines (the tests that use it check that first), so a test knows
the page of every word it wrote. Lines are Latin-1 text without ligatures.
"""

from __future__ import annotations

import io

__all__ = ["make_pdf"]


def _escape(line: str) -> str:
    return line.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def make_pdf(pages: list[list[str]], *, title: str | None = None) -> bytes:
    """The bytes of a PDF with one page per entry of ``pages``, each showing its lines top to bottom
    (an empty list gives a page without text); ``title``: the document information title."""
    from pypdf import PdfWriter
    from pypdf.generic import DictionaryObject, NameObject, StreamObject

    w = PdfWriter()
    font = w._add_object(DictionaryObject({
        NameObject("/Type"): NameObject("/Font"), NameObject("/Subtype"): NameObject("/Type1"),
        NameObject("/BaseFont"): NameObject("/Helvetica"), NameObject("/Encoding"): NameObject("/WinAnsiEncoding")}))
    for lines in pages:
        page = w.add_blank_page(612, 792)
        ops = ["BT", "/F1 11 Tf", "14 TL", "72 740 Td"] + [f"({_escape(x)}) Tj T*" for x in lines] + ["ET"]
        content = StreamObject()
        content.set_data("\n".join(ops).encode("latin-1"))
        page[NameObject("/Contents")] = w._add_object(content)
        page[NameObject("/Resources")] = DictionaryObject(
            {NameObject("/Font"): DictionaryObject({NameObject("/F1"): font})})
    if title is not None:
        w.add_metadata({"/Title": title})
    buf = io.BytesIO()
    w.write(buf)
    return buf.getvalue()


# ---------------------------------------------------------------- a corpus of every type with known pages and sections

#: The word every line of page ``p`` (1-based) of ``manual.pdf`` starts and ends with.
MARKERS = ("aardvark", "bison", "camel", "dingo", "emu", "ferret")
_WORDS = ("lanterns", "boats", "nets", "gulls", "storms", "tides", "ropes", "anchors", "sails")
_LINES = (4, 2, 5, 1, 3, 4)
#: The lines of each page of ``manual.pdf``.
PAGES = tuple(tuple(f"The {m} counts {_WORDS[(p * 3 + j) % len(_WORDS)]} near the harbor, says the {m}."
                    for j in range(_LINES[p])) for p, m in enumerate(MARKERS))
#: Each paragraph of the structured documents, with the heading path it was written under.
SECTIONS = {
    "guide/intro": [
        (("Intro Guide", "Setup"), "Setting up the harbor needs lanterns on every pier and boats tied with "
                                   "double knots before the first evening of the season begins."),
        (("Intro Guide", "Setup"), "The setup crew also checks the ropes, the chains and the fuel of the "
                                   "small pilot boat that guides ships through the channel."),
        (("Intro Guide", "Storms"), "When storms come the harbor closes its nets and every keeper walks the "
                                    "breakwater twice an hour until the wind drops again."),
        (("Intro Guide", "Storms"), "After a storm the gulls return first, then the fishing fleet, and the "
                                    "harbor master writes the damage into the red book."),
    ],
    "guide/faq": [
        (("Harbor FAQ", "Tides"), "Tides move the boats in the harbor twice a day, and the pilots time "
                                  "every departure to the high water mark on the old stone stairs."),
        (("Harbor FAQ", "Sails"), "Sails are mended in the long shed by the north pier, where the sail "
                                  "makers keep canvas, thread and wax for the whole winter."),
    ],
    "report": [
        (("Harbor Report", "Anchors"), "The anchors of the harbor hold the boats through the winter gales, "
                                       "and each one is lifted and painted every spring."),
        (("Harbor Report", "Costs"), "The costs of the harbor rose with the price of rope, paint and fuel, "
                                     "while the income from moorings stayed the same."),
    ],
}
NOTES = "Harbor notes\n\nThe gulls and the sails of the harbor are counted by the keeper every morning.\n"


def write_corpus(folder) -> dict:
    """Write ``manual.pdf`` (:data:`PAGES`), ``guide/intro.md``, ``guide/faq.html``, ``report.docx``
    (:data:`SECTIONS`) and ``notes.txt`` into ``folder``; returns doc id -> file type."""
    from pathlib import Path

    import docx

    root = Path(folder)
    (root / "guide").mkdir(parents=True, exist_ok=True)
    (root / "manual.pdf").write_bytes(make_pdf([list(p) for p in PAGES]))
    md, last = [], None
    for path, text in SECTIONS["guide/intro"]:
        if path[:1] != (last or ())[:1]:
            md.append(f"# {path[0]}")
        if path != last:
            md.append(f"## {path[1]}")
        md.append(text)
        last = path
    (root / "guide" / "intro.md").write_text("\n\n".join(md) + "\n")
    body = "".join(f"<h2>{path[1]}</h2><p>{text}</p>" for path, text in SECTIONS["guide/faq"])
    (root / "guide" / "faq.html").write_text(f"<html><head><title>Harbor FAQ</title></head><body>"
                                             f"<h1>Harbor FAQ</h1>{body}</body></html>")
    d = docx.Document()
    d.add_heading("Harbor Report", 1)
    for path, text in SECTIONS["report"]:
        d.add_heading(path[1], 2)
        d.add_paragraph(text)
    d.save(root / "report.docx")
    (root / "notes.txt").write_text(NOTES)
    return {"manual": "pdf", "guide/intro": "markdown", "guide/faq": "html", "report": "docx", "notes": "text"}


def expected_pages(text: str) -> tuple[int | None, int | None]:
    """The pages of ``manual.pdf`` a passage of it came from, read from the markers it holds: the page of
    its first marker word and of its last (every line of page p starts and ends with ``MARKERS[p - 1]``)."""
    import re

    found = [MARKERS.index(w.lower()) + 1 for w in re.findall(r"[A-Za-z]+", text) if w.lower() in MARKERS]
    return (found[0], found[-1]) if found else (None, None)


def expected_section(doc_id: str, text: str) -> tuple[str, ...] | None:
    """The heading path the passage's first paragraph of :data:`SECTIONS` was written under (a passage that
    starts with a heading line is under the section that heading opens)."""
    stripped = text.lstrip()
    for path, para in SECTIONS.get(doc_id, ()):
        for heading in path[::-1]:
            if stripped.startswith(heading):
                return path[: path.index(heading) + 1] if heading != path[-1] else path
    first = min(((text.find(para[:40]), path) for path, para in SECTIONS.get(doc_id, ()) if para[:40] in text),
                default=None)
    return None if first is None else first[1]
