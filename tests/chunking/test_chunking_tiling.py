"""Coverage contract on random documents, for every chunker and unit.

Every chunker must tile the non-whitespace characters exactly once (or, with
overlap, at least once with no gap), with exact offsets, and keep its size
limit as measured independently here (len(), str.split()).
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from momoka.chunking import (
    FixedChunker,
    ParagraphChunker,
    RecursiveChunker,
    SentenceChunker,
    StructureChunker,
)
from momoka.text import Document

from .conftest import check_tiling, doc_text, markdown_text, size_of

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(doc_text, st.integers(1, 12), st.integers(0, 11), st.sampled_from(["tokens", "chars"]))
def test_fixed_tiles(text, size, overlap, unit):
    overlap = overlap % size
    doc = Document(text)
    chunks = FixedChunker(size, overlap=overlap, unit=unit)(doc)
    check_tiling(text, chunks, overlap=overlap > 0)
    for c in chunks:
        assert size_of(text, c, unit) <= size


@SETTINGS
@given(doc_text, st.integers(1, 12), st.integers(0, 11), st.sampled_from(["tokens", "chars"]))
def test_fixed_sentence_aligned_never_cuts_a_sentence(text, size, overlap, unit):
    overlap = overlap % size
    doc = Document(text)
    chunks = FixedChunker(size, overlap=overlap, unit=unit, align="sentence")(doc)
    check_tiling(text, chunks, overlap=overlap > 0)
    sents = [tuple(s) for s in doc.sentences.tolist()]
    starts = {c.start for c in chunks}
    ends = {c.end for c in chunks}
    for a, b in sents:
        core = text[a:b].strip()
        if not core:
            continue
        a2 = a + (len(text[a:b]) - len(text[a:b].lstrip()))
        # no chunk boundary falls strictly inside a sentence
        assert not any(a2 < s < a2 + len(core) for s in starts)
        assert not any(a2 < e < a2 + len(core) for e in ends)
    for c in chunks:
        measured = size_of(text, c, unit)
        inside = [s for s in sents if c.start <= s[0] and s[1] <= c.end or (s[0] <= c.start and c.end <= s[1])]
        assert measured <= size or len(inside) <= 1  # only a lone long sentence may exceed


@SETTINGS
@given(doc_text, st.integers(1, 5), st.integers(0, 4))
def test_sentence_chunker_tiles(text, n, overlap):
    overlap = overlap % n
    doc = Document(text)
    chunks = SentenceChunker(n, overlap=overlap)(doc)
    check_tiling(text, chunks, overlap=overlap > 0)
    starts = doc.sentences[:, 0].tolist()
    for c in chunks:
        assert sum(1 for s in starts if c.start <= s < c.end) <= n


@SETTINGS
@given(doc_text, st.one_of(st.none(), st.integers(1, 30)), st.sampled_from(["tokens", "chars"]))
def test_paragraph_chunker_tiles(text, size, unit):
    doc = Document(text)
    chunks = ParagraphChunker(size=size, unit=unit)(doc)
    check_tiling(text, chunks)
    para_starts = set(doc.paragraphs[:, 0].tolist())
    for c in chunks[1:]:
        assert c.start in para_starts  # chunks start on paragraph starts


@SETTINGS
@given(doc_text, st.integers(1, 40), st.sampled_from(["tokens", "chars"]))
def test_recursive_tiles_and_fits(text, size, unit):
    doc = Document(text)
    chunks = RecursiveChunker(size, unit=unit)(doc)
    check_tiling(text, chunks)
    for c in chunks:
        assert size_of(text, c, unit) <= size


@SETTINGS
@given(doc_text, st.integers(1, 40))
def test_recursive_custom_separators(text, size):
    doc = Document(text)
    chunks = RecursiveChunker(size, separators=(".", ","), unit="chars")(doc)
    check_tiling(text, chunks)
    assert all(len(c.text) <= size for c in chunks)


@SETTINGS
@given(markdown_text, st.integers(1, 40), st.sampled_from(["tokens", "chars"]), st.booleans())
def test_structure_tiles_and_respects_sections(text, size, unit, merge):
    doc = Document.from_markdown(text)
    chunks = StructureChunker(size, unit=unit, merge_headings=merge)(doc)
    check_tiling(doc.text, chunks)
    for c in chunks:
        assert size_of(doc.text, c, unit) <= size
    # a chunk crosses a section start only when merging headings, and then
    # everything before that start in the chunk is heading text
    heads = [(t.start, t.heading_end) for t in doc.sections]
    for s in doc.sections:
        for c in chunks:
            if c.start < s.start < c.end:
                assert merge
                for i in range(c.start, s.start):
                    if not doc.text[i].isspace():
                        assert any(a <= i < b for a, b in heads)
