"""Document model, make_chunks, and the Markdown / HTML parsers with exact offsets."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from momoka.errors import EmptyInputError, InputError
from momoka.text import Chunk, Document, Section, make_chunks


def spans_text(doc: Document, spans: np.ndarray) -> list[str]:
    return [doc.text[a:b] for a, b in spans.tolist()]


# --- plain text ------------------------------------------------------------------


def test_plain_text_structure():
    text = "Dr. Who came. He left.\n\nSecond para here.\nSame para.  \n\n\n  Third."
    doc = Document.from_text(text, title="T", doc_id="d1", source="mem")
    assert (doc.title, doc.doc_id, doc.source, doc.sections) == ("T", "d1", "mem", [])
    assert spans_text(doc, doc.paragraphs) == ["Dr. Who came. He left.", "Second para here.\nSame para.", "Third."]
    assert spans_text(doc, doc.sentences) == ["Dr. Who came.", "He left.", "Second para here.", "Same para.", "Third."]
    assert doc.paragraphs.dtype == np.int64 and doc.paragraphs.shape == (3, 2)
    assert doc.sentences is doc.sentences  # cached
    # containing or following: hand-computed offsets
    assert doc.paragraph_index(0) == 0
    assert doc.paragraph_index(22) == 1  # the blank line after paragraph 0
    assert doc.paragraph_index(len(text) - 1) == 2
    assert doc.paragraph_index(10**6) == 2  # past the end: the last one
    assert doc.sentence_index(len(text) - 1) == 4
    assert doc.sentence_index(13) == 1  # the space between sentence 0 and 1
    assert doc.sentence_index(14) == 1
    assert doc.section_path(5) == ()


def test_document_rejects_bad_text():
    # empty and whitespace-only text: nothing to index
    with pytest.raises(EmptyInputError):
        Document("")
    with pytest.raises(EmptyInputError):
        Document(" \n\t ")
    # bytes: must be decoded first
    with pytest.raises(InputError, match="decode"):
        Document(b"abc")  # type: ignore[arg-type]


def test_given_paragraphs_are_trimmed_and_checked():
    text = "aaa bbb\n  ccc ddd  "
    doc = Document(text, paragraphs=[(0, 8), (8, len(text))])
    assert spans_text(doc, doc.paragraphs) == ["aaa bbb", "ccc ddd"]
    # a sentence never crosses a given paragraph boundary (no terminator here)
    assert spans_text(doc, doc.sentences) == ["aaa bbb", "ccc ddd"]
    with pytest.raises(InputError):
        Document(text, paragraphs=[(0, 100)])  # outside the text
    with pytest.raises(InputError):
        Document(text, paragraphs=[(4, 10), (0, 3)])  # not sorted
    with pytest.raises(InputError):
        Document(text, paragraphs=[(0.5, 2)])  # not integers


def test_sections_and_paths():
    text = "A\n\nintro\n\nB\n\nbody b\n\nC\n\nbody c\n\nD\n\nbody d"
    # hand-built: A (level 1) holds B (2) which holds C (3); D (level 2) follows B inside A
    off = {w: text.index(w) for w in ["A", "intro", "B", "body b", "C", "body c", "D", "body d"]}
    secs = [
        Section("A", 1, 0, len(text), 0, 1, ("A",)),
        Section("B", 2, off["B"], off["body c"] + 6, off["B"], off["B"] + 1, ("A", "B")),
        Section("C", 3, off["C"], off["body c"] + 6, off["C"], off["C"] + 1, ("A", "B", "C")),
        Section("D", 2, off["D"], len(text), off["D"], off["D"] + 1, ("A", "D")),
    ]
    doc = Document(text, sections=reversed(secs))
    assert [s.title for s in doc.sections] == ["A", "B", "C", "D"]
    assert doc.section_path(off["intro"]) == ("A",)
    assert doc.section_path(off["body b"]) == ("A", "B")
    assert doc.section_path(off["body c"] + 3) == ("A", "B", "C")
    assert doc.section_path(off["body c"] + 7) == ("A",)  # the gap between C's end and D
    assert doc.section_path(off["body d"]) == ("A", "D")
    assert doc.section_at(off["C"]).title == "C"
    with pytest.raises(InputError):
        Document(text, sections=[Section("X", 1, 0, len(text) + 5, 0, 1, ("X",))])


# --- make_chunks ---------------------------------------------------------------


def test_make_chunks_fields():
    doc = Document.from_markdown("# Top\n\nFirst one. Second one.\n\n## Sub\n\nThird one.", doc_id="m")
    t = doc.text
    assert t == "Top\n\nFirst one. Second one.\n\nSub\n\nThird one."
    spans = [(0, t.index("Second")), (t.index("Second") - 1, len(t))]
    chunks = make_chunks(doc, spans, start_index=5, metadata=[{"k": 1}, {}])
    c0, c1 = chunks
    assert isinstance(c0, Chunk)
    assert (c0.text, c0.start, c0.index, c0.paragraph, c0.sentence, c0.section) == (
        "Top\n\nFirst one. ",
        0,
        5,
        0,
        0,
        ("Top",),
    )
    assert c0.metadata == {"k": 1} and c0.doc_id == "m"
    # c1 starts on a space: attributed to its first non-whitespace char ("Second one.")
    assert (c1.paragraph, c1.sentence, c1.section, c1.index) == (1, 2, ("Top",), 6)
    c2 = make_chunks(doc, np.array([[t.index("Third"), len(t)]]))[0]
    assert (c2.paragraph, c2.sentence, c2.section, c2.index) == (3, 4, ("Top", "Sub"), 0)
    assert all(doc.text[c.start : c.end] == c.text for c in chunks)
    assert make_chunks(doc, []) == []


def test_make_chunks_rejects_bad_spans():
    doc = Document("abc def")
    for bad in ([(0, 100)], [(-1, 3)], [(3, 3)], [(4, 2)]):
        with pytest.raises(InputError):
            make_chunks(doc, bad)
    with pytest.raises(InputError):
        make_chunks(doc, [(0, 1, 2)])
    with pytest.raises(InputError):
        make_chunks(doc, [(0, 1), (2,)])  # ragged
    with pytest.raises(InputError):
        make_chunks(doc, [("a", "b")])  # not integers
    with pytest.raises(InputError):
        make_chunks(doc, [(0, 3)], metadata=[{}, {}])


# --- Markdown --------------------------------------------------------------------

MD = """\
---
author: someone
---
Guide Title
===========

Intro with *emphasis*, **strong**, `code`, a [link](http://x.org "t") and ![alt](i.png).

## Setup #

1. Install it.
2. Run it:
   - fast
   - safe

```python
x = 1

y = 2
```

| Name | Value |
|------|------:|
| a    | 1     |

Sub part
--------
> Quoted line
> continues.

***

Last \\*literal\\* words.
"""

MD_TEXT = (
    "Guide Title\n\n"
    "Intro with emphasis, strong, code, a link and alt.\n\n"
    "Setup\n\n"
    "1. Install it.\n2. Run it:\n   - fast\n   - safe\n\n"
    "x = 1\n\ny = 2\n\n"
    "Name | Value\na | 1\n\n"
    "Sub part\n\n"
    "Quoted line\ncontinues.\n\n"
    "Last *literal* words."
)


def test_markdown_structure_exact():
    doc = Document.from_markdown(MD, doc_id="g")
    assert doc.text == MD_TEXT
    assert doc.title == "Guide Title"
    blocks = MD_TEXT.split("\n\n")
    # the code block holds a blank line but stays one paragraph
    expected = blocks[:4] + ["x = 1\n\ny = 2"] + blocks[6:]
    assert spans_text(doc, doc.paragraphs) == expected
    # sections: exact offsets into the readable text
    secs = {s.title: s for s in doc.sections}
    assert list(secs) == ["Guide Title", "Setup", "Sub part"]
    g, s, p = secs["Guide Title"], secs["Setup"], secs["Sub part"]
    assert (g.level, g.start, g.end, g.heading_end) == (1, 0, len(MD_TEXT), len("Guide Title"))
    assert (s.level, s.path) == (2, ("Guide Title", "Setup"))
    assert MD_TEXT[s.heading_start : s.heading_end] == "Setup"
    assert MD_TEXT[s.start : s.end] == "Setup\n\n1. Install it.\n2. Run it:\n   - fast\n   - safe\n\nx = 1\n\ny = 2\n\nName | Value\na | 1"
    assert MD_TEXT[p.start : p.end] == "Sub part\n\nQuoted line\ncontinues.\n\nLast *literal* words."
    assert doc.section_path(MD_TEXT.index("safe")) == ("Guide Title", "Setup")
    assert doc.section_path(MD_TEXT.index("Intro")) == ("Guide Title",)
    # sentences stay inside paragraphs
    sents = spans_text(doc, doc.sentences)
    assert "1. Install it." in sents and "Quoted line\ncontinues." in sents


def test_markdown_atx_variants_and_title():
    doc = Document.from_markdown("### Deep ###\n\ntext\n\n# Main\n\nmore\n#not heading")
    assert doc.text == "Deep\n\ntext\n\nMain\n\nmore\n#not heading"
    assert doc.title == "Main"  # the first level-1 heading
    assert [(s.title, s.level, s.path) for s in doc.sections] == [("Deep", 3, ("Deep",)), ("Main", 1, ("Main",))]
    # an explicit title wins
    assert Document.from_markdown("# A\n\nb", title="Given").title == "Given"


def test_markdown_only_headings_is_empty():
    # documented: headings without any body text are refused (nothing to retrieve)
    with pytest.raises(EmptyInputError, match="only headings"):
        Document.from_markdown("# One\n\n## Two\n\nThree\n=====\n")
    with pytest.raises(EmptyInputError):
        Document.from_markdown("")
    with pytest.raises(EmptyInputError):
        Document.from_markdown("\n\n---\n\n")  # a thematic break only


# --- HTML ------------------------------------------------------------------------

HTML = """<!DOCTYPE html>
<html><head><title> The  Page </title><style>p { color: red }</style>
<script>var x = "<p>not text</p>";</script></head>
<body>
<h1>Main &amp; Co</h1>
<p>Hello <b>bold</b>   world.<br>Next line.</p>
<ul><li>one</li><li>two <i>it</i></li></ul>
<h2>Data</h2>
<table><caption>Tab</caption><tr><th>k</th><th>v</th></tr><tr><td>a</td><td><p>1</p></td></tr></table>
<pre>  code
    indented</pre>
<div>tail<noscript>hidden</noscript></div>
</body></html>"""


def test_html_structure_exact():
    doc = Document.from_html(HTML)
    expected = [
        "Main & Co",
        "Hello bold world.\nNext line.",
        "one",
        "two it",
        "Data",
        "Tab\nk | v\na | 1",
        "code\n    indented",
        "tail",
    ]
    assert spans_text(doc, doc.paragraphs) == expected
    assert "not text" not in doc.text and "color" not in doc.text and "hidden" not in doc.text
    assert doc.title == "The Page"
    main, data = doc.sections
    assert (main.title, main.level, main.start, main.end) == ("Main & Co", 1, 0, len(doc.text))
    assert (data.path, doc.text[data.heading_start : data.heading_end]) == (("Main & Co", "Data"), "Data")
    assert doc.section_path(doc.text.index("tail")) == ("Main & Co", "Data")
    assert doc.section_path(doc.text.index("two")) == ("Main & Co",)
    # pre keeps its leading indentation in the text; the span is trimmed
    assert "  code\n    indented" in doc.text


def test_html_title_falls_back_to_h1_and_fragments_parse():
    doc = Document.from_html("<h1>Head</h1><p>Para one. Para two.</p>")
    assert doc.title == "Head" and doc.text == "Head\n\nPara one. Para two."
    # text outside any element (no <body>) still counts
    doc = Document.from_html("<html><head><title>T</title></head>stray text</html>")
    assert doc.text == "stray text" and doc.title == "T"


def test_html_without_body_text():
    # a head only: no text at all
    with pytest.raises(EmptyInputError):
        Document.from_html("<html><head><title>Only a title</title><script>x()</script></head></html>")
    with pytest.raises(EmptyInputError, match="only headings"):
        Document.from_html("<h1>A</h1><h2>B</h2>")
    with pytest.raises(EmptyInputError):
        Document.from_html("")


# --- random documents: exact offsets everywhere ----------------------------------------

_w = st.text(alphabet="abcxyzABC\u00e9\u4e2d\U0001F600", min_size=1, max_size=7)
_words = st.lists(_w, min_size=1, max_size=8).map(" ".join)
_sentence = st.tuples(_words, st.sampled_from([".", "!", "?", ""])).map("".join)
_para = st.lists(_sentence, min_size=1, max_size=4).map(" ".join)
_block = st.one_of(
    st.tuples(st.just("h"), st.integers(1, 4), _words),
    st.tuples(st.just("p"), _para),
    st.tuples(st.just("list"), st.lists(_words, min_size=1, max_size=4)),
    st.tuples(st.just("code"), st.lists(_words, min_size=1, max_size=3)),
    st.tuples(st.just("table"), st.lists(st.lists(_words, min_size=2, max_size=2), min_size=1, max_size=3)),
)


def _render(blocks) -> tuple[str, str, list[tuple[str, int]]]:
    """Markdown source, the readable text an independent reading predicts, and its headings."""
    md, text, heads = [], [], []
    for b in blocks:
        if b[0] == "h":
            md.append("#" * b[1] + " " + b[2])
            text.append(b[2])
            heads.append((b[2], b[1]))
        elif b[0] == "p":
            md.append(b[1])
            text.append(b[1])
        elif b[0] == "list":
            md.append("\n".join("- " + x for x in b[1]))
            text.append("\n".join("- " + x for x in b[1]))
        elif b[0] == "code":
            md.append("```\n" + "\n\n".join(b[1]) + "\n```")
            text.append("\n\n".join(b[1]))
        else:
            rows = b[1]
            md.append("\n".join(["| h1 | h2 |", "|---|---|"] + ["| " + " | ".join(r) + " |" for r in rows]))
            text.append("\n".join(["h1 | h2"] + [" | ".join(r) for r in rows]))
    return "\n\n".join(md) + "\n", "\n\n".join(text), heads


def _ref_path(doc: Document, off: int) -> tuple[str, ...]:
    best = None
    for s in doc.sections:
        if s.start <= off < s.end and (best is None or s.start >= best.start):
            best = s
    return best.path if best else ()


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    # two lists in a row would be one (loose) Markdown list: keep them apart
    st.lists(_block, min_size=1, max_size=8).filter(
        lambda bs: not any(a[0] == b[0] == "list" for a, b in zip(bs, bs[1:]))
    ),
    st.data(),
)
def test_random_markdown_offsets(blocks, data):
    md, expected_text, heads = _render(blocks)
    if all(b[0] == "h" for b in blocks):
        with pytest.raises(EmptyInputError):
            Document.from_markdown(md)
        return
    doc = Document.from_markdown(md)
    t = doc.text
    assert t == expected_text
    assert [(s.title, s.level) for s in sorted(doc.sections, key=lambda s: s.start)] == heads
    for s in doc.sections:
        assert t[s.heading_start : s.heading_end] == s.title
        assert s.path[-1] == s.title
        assert t[s.start : s.end] == t[s.start : s.end].strip()
    prev = 0
    for a, b in doc.paragraphs.tolist():
        assert prev <= a < b and t[a:b] == t[a:b].strip()
        prev = b
    for a, b in doc.sentences.tolist():
        assert any(p0 <= a and b <= p1 for p0, p1 in doc.paragraphs.tolist())
    # chunks of random spans: exact text, indices by brute force
    n = len(t)
    spans = data.draw(
        st.lists(st.tuples(st.integers(0, n - 1), st.integers(1, n)).filter(lambda x: x[0] < x[1]), max_size=10)
    )
    for c, (a, b) in zip(make_chunks(doc, spans), spans):
        assert (c.start, c.end, c.text) == (a, b, t[a:b])
        stripped = t[a:b].lstrip()
        first = a + (len(t[a:b]) - len(stripped)) if stripped else a
        ref_p = next((k for k, (_, pe) in enumerate(doc.paragraphs.tolist()) if pe > first), len(doc.paragraphs) - 1)
        ref_s = next((k for k, (_, se) in enumerate(doc.sentences.tolist()) if se > first), len(doc.sentences) - 1)
        assert (c.paragraph, c.sentence, c.section) == (ref_p, ref_s, _ref_path(doc, first))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["h1", "h2", "h3", "p", "li", "pre"]), _para), min_size=1, max_size=8))
def test_random_html_offsets(elems):
    html = "<html><body>" + "".join(f"<{tag}>{txt}</{tag}>" for tag, txt in elems) + "</body></html>"
    if all(tag.startswith("h") for tag, _ in elems):
        with pytest.raises(EmptyInputError):
            Document.from_html(html)
        return
    doc = Document.from_html(html)
    assert spans_text(doc, doc.paragraphs) == [txt for _, txt in elems]
    assert doc.text == "\n\n".join(txt for _, txt in elems)
    assert [s.title for s in sorted(doc.sections, key=lambda s: s.start)] == [txt for tag, txt in elems if tag.startswith("h")]


def test_html_unclosed_heading_and_nested_lists():
    # an unclosed <h1>: the text after the next block is body text, not heading
    doc = Document.from_html("<h1>Title<p>body text</p><ul><li>a<ul><li>b</li></ul>c</li></ul>")
    assert spans_text(doc, doc.paragraphs) == ["Title", "body text", "a", "b", "c"]
    assert [s.title for s in doc.sections] == ["Title"]


def test_markdown_crlf_line_endings():
    doc = Document.from_markdown("# T\r\n\r\nline one\r\nline two\r\n\r\n* a\r\n* b\r\n")
    assert doc.text == "T\n\nline one\nline two\n\n* a\n* b"
    assert doc.paragraphs.tolist() == [[0, 1], [3, 20], [22, 29]]


def test_sections_must_be_section_objects():
    with pytest.raises(InputError):
        Document("abc", sections=[("A", 1, 0, 3)])  # type: ignore[list-item]


@settings(max_examples=100, deadline=None)
@given(st.text(min_size=1, max_size=200).filter(lambda t: not t.isspace()), st.data())
def test_random_plain_text_chunks(text, data):
    doc = Document.from_text(text)
    n = len(text)
    spans = data.draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(1, n)).filter(lambda x: x[0] < x[1]), max_size=8))
    paras = doc.paragraphs.tolist()
    sents = doc.sentences.tolist()
    for c, (a, b) in zip(make_chunks(doc, spans, start_index=3), spans):
        assert c.text == text[a:b] and (c.start, c.end) == (a, b)
        first = next((k for k in range(a, b) if not text[k].isspace()), a)
        # brute force: the paragraph / sentence containing or following `first`
        assert c.paragraph == next((k for k, (_, e) in enumerate(paras) if e > first), len(paras) - 1)
        assert c.sentence == next((k for k, (_, e) in enumerate(sents) if e > first), len(sents) - 1)
        assert c.section == ()


def test_dict_round_trip():
    import json

    doc = Document.from_markdown("# A\n\nx y.\n\n## B\n\n- one\n- two", doc_id="d", source="s.md")
    back = Document.from_dict(json.loads(json.dumps(doc.to_dict())))
    assert (back.text, back.title, back.doc_id, back.source) == (doc.text, "A", "d", "s.md")
    assert back.sections == doc.sections
    assert back.paragraphs.tolist() == doc.paragraphs.tolist() == [[0, 1], [3, 7], [9, 10], [12, 23]]
    with pytest.raises(InputError):
        Document.from_dict({"title": "no text"})
    with pytest.raises(EmptyInputError):
        Document.from_dict({"text": "  "})
