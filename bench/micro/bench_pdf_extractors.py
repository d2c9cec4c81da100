"""PDF text extractors on real TeX-made and other PDFs: pypdf beside pdfminer.six and pypdfium2.

The PDFs are the ones Debian's documentation packages ship (glpk-doc, camlidl-doc, libtasn1-doc,
shared-mime-info, fontconfig, nettle-dev, valgrind, bzip2, zlib1g-dev; gzipped ones are unpacked into a
temporary folder). For each extractor and file: milliseconds per page (best of 3), characters, control
characters left (C0 other than tab and newline, and DEL; pdfium's "\\r\\n" line ends count as one newline),
glyphs lost (U+FFFD, and pdfminer's "(cid:N)" for a glyph it cannot name), ligature characters
(U+FB00-U+FB06), and how often some words that TeX typesets with a ligature come out whole ("first",
"field", "file", "flow", "specified", "different", "efficient", counted after NFKC so that a ligature
character counts as right).
pypdf is measured as it comes and after momoka's repair (:func:`momoka.text.pdf.repair_text`). Run:

    PYTHONPATH=python python bench/micro/bench_pdf_extractors.py [PDF ...]

pdfminer.six and pypdfium2 are not momoka dependencies; install them to measure them.
"""

from __future__ import annotations

import glob
import gzip
import io
import logging
import re
import sys
import tempfile
import time
import unicodedata
from pathlib import Path

DEFAULT = ["/usr/share/doc/glpk-doc/*.pdf", "/usr/share/doc/camlidl/*.pdf", "/usr/share/doc/libtasn1-doc/*.pdf",
           "/usr/share/doc/shared-mime-info/*.pdf", "/usr/share/doc/*/*.pdf.gz"]
WORDS = ("first", "field", "file", "flow", "specified", "different", "efficient")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_LIG = re.compile("[\ufb00-\ufb06]")
_CID = re.compile(r"\(cid:\d+\)")


def _pdfs(args: list[str], tmp: Path) -> list[Path]:
    out = []
    for pat in args or DEFAULT:
        for f in sorted(glob.glob(pat)):
            if f.endswith(".gz"):
                if not f.endswith(".pdf.gz"):
                    continue
                dst = tmp / Path(f).name[:-3]
                dst.write_bytes(gzip.decompress(Path(f).read_bytes()))
                out.append(dst)
            else:
                out.append(Path(f))
    return out


def pypdf_pages(data: bytes) -> list[str]:
    import pypdf

    return [p.extract_text() or "" for p in pypdf.PdfReader(io.BytesIO(data)).pages]


def pypdf_repaired(data: bytes) -> list[str]:
    from momoka.text.pdf import repair_text

    return [repair_text(t) for t in pypdf_pages(data)]


def pdfminer_pages(data: bytes) -> list[str]:
    from pdfminer.high_level import extract_pages
    from pdfminer.layout import LTTextContainer

    return ["".join(el.get_text() for el in page if isinstance(el, LTTextContainer))
            for page in extract_pages(io.BytesIO(data))]


def pdfium_pages(data: bytes) -> list[str]:
    import pypdfium2 as pdfium

    doc = pdfium.PdfDocument(data)
    try:
        return [doc[i].get_textpage().get_text_range() for i in range(len(doc))]
    finally:
        doc.close()


EXTRACTORS = {"pypdf": pypdf_pages, "pypdf + repair": pypdf_repaired, "pdfminer.six": pdfminer_pages,
              "pypdfium2": pdfium_pages}


def measure(fn, data: bytes) -> tuple[float, list[str]]:
    best, pages = float("inf"), []
    for _ in range(3):
        t = time.perf_counter()
        pages = fn(data)
        best = min(best, time.perf_counter() - t)
    return best, pages


def main() -> None:
    logging.getLogger("pypdf").setLevel(logging.ERROR)
    logging.getLogger("pdfminer").setLevel(logging.ERROR)
    with tempfile.TemporaryDirectory() as tmp:
        files = _pdfs(sys.argv[1:], Path(tmp))
        totals: dict[str, list[float]] = {}
        print("| file | pages | extractor | ms/page | chars | controls | glyphs lost | ligature chars | "
              + " | ".join(WORDS) + " |")
        for f in files:
            data = f.read_bytes()
            for name, fn in EXTRACTORS.items():
                try:
                    s, pages = measure(fn, data)
                except ImportError:
                    continue
                text = "\n\n".join(pages).replace("\r\n", "\n")
                folded = unicodedata.normalize("NFKC", text).lower()
                words = [len(re.findall(rf"\b{w}", folded)) for w in WORDS]
                row = [len(pages), 1000 * s / max(len(pages), 1), len(text), len(_CONTROL.findall(text)),
                       text.count("\ufffd") + len(_CID.findall(text)), len(_LIG.findall(text)), *words]
                t = totals.setdefault(name, [0.0] * (len(row) + 1))
                t[0] += s
                for k, v in enumerate(row):
                    t[k + 1] += v
                print(f"| {f.name} | {row[0]} | {name} | {row[1]:.1f} | " + " | ".join(str(v) for v in row[2:]) + " |")
        print()
        print("| extractor | pages | ms/page | chars | controls | glyphs lost | ligature chars | " + " | ".join(WORDS) + " |")
        for name, t in totals.items():
            print(f"| {name} | {int(t[1])} | {1000 * t[0] / t[1]:.1f} | " + " | ".join(str(int(v)) for v in t[3:]) + " |")


if __name__ == "__main__":
    main()
