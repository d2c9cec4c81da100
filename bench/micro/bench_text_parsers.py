"""Markdown and HTML readers: momoka's hand-written ones beside markdown-it-py, lxml and selectolax.

Real files that Debian and CPython ship: the Node.js API docs (``/usr/share/doc/nodejs/api``, the same
pages as ``.md`` and as ``.html``), valgrind's and libffi's HTML manuals and the Sphinx-built IDLE help
of the standard library. Each reader runs over the whole set, best of 5; MB/s counts UTF-8 bytes (10^6).
What each one does differs, which the table in docs/text.md says: momoka builds the readable text with
exact offsets, paragraph spans and sections; markdown-it-py only tokenises (block tokens with line maps,
inline tokens); lxml and selectolax only build a tree and take its text (no blocks, no offsets). Run:

    PYTHONPATH=python python bench/micro/bench_text_parsers.py
"""

from __future__ import annotations

import glob
import sysconfig
import time
from pathlib import Path


def _files(patterns: list[str]) -> list[str]:
    out = []
    for p in patterns:
        out.extend(sorted(glob.glob(p)))
    return [Path(f).read_text(encoding="utf-8", errors="replace") for f in out]


def _best(fn, docs, repeat=5) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        for d in docs:
            fn(d)
        best = min(best, time.perf_counter() - t)
    return best


def main() -> None:
    from momoka.text.html import parse_html
    from momoka.text.markdown import parse_markdown

    md = _files(["/usr/share/doc/nodejs/api/*.md"])
    html = _files(["/usr/share/doc/nodejs/api/*.html", "/usr/share/doc/valgrind/html/*.html",
                   "/usr/share/doc/libffi8/html/*.html",
                   str(Path(sysconfig.get_paths()["stdlib"]) / "idlelib" / "help.html")])
    rows = []

    def run(kind, docs, name, fn):
        if not docs:
            return
        mb = sum(len(d.encode("utf-8")) for d in docs) / 1e6
        s = _best(fn, docs)
        rows.append((kind, name, len(docs), mb, s, mb / s))

    run("Markdown", md, "momoka parse_markdown (text, offsets, sections)", parse_markdown)
    try:
        from markdown_it import MarkdownIt

        mdit = MarkdownIt("commonmark")
        run("Markdown", md, "markdown-it-py parse (tokens only)", mdit.parse)
    except ImportError:
        pass
    run("HTML", html, "momoka parse_html (text, offsets, sections)", parse_html)
    try:
        import lxml.etree
        import lxml.html

        from momoka.text.html import _Parser

        def lxml_fed(d: str):
            """momoka's HTML reader fed by lxml's tree instead of html.parser: the same text, offsets and
            sections (checked below), parsed by libxml2."""
            p = _Parser()
            for ev, el in lxml.etree.iterwalk(lxml.html.document_fromstring(d), events=("start", "end")):
                if isinstance(el.tag, str):
                    if ev == "start":
                        p.handle_starttag(el.tag, list(el.attrib.items()))
                        if el.text:
                            p.handle_data(el.text)
                        continue
                    p.handle_endtag(el.tag)
                if ev == "end" and el.tail:
                    p.handle_data(el.tail)
            return p.finish()

        same = sum(lxml_fed(d).text == parse_html(d).text for d in html)
        print(f"lxml-fed reader: the same text as momoka's on {same} of {len(html)} files")
        run("HTML", html, "momoka's reader fed by lxml (text, offsets, sections)", lxml_fed)
        run("HTML", html, "lxml.html text_content (tree + text only)",
            lambda d: lxml.html.document_fromstring(d).text_content())
    except ImportError:
        pass
    try:
        from selectolax.lexbor import LexborHTMLParser

        run("HTML", html, "selectolax (lexbor) body.text (tree + text only)", lambda d: LexborHTMLParser(d).body.text())
    except ImportError:
        pass
    print(f"| input | reader | files | MB | s (best of 5) | MB/s |\n|---|---|---:|---:|---:|---:|")
    for kind, name, n, mb, s, rate in rows:
        print(f"| {kind} | {name} | {n} | {mb:.2f} | {s:.3f} | {rate:.1f} |")


if __name__ == "__main__":
    main()
