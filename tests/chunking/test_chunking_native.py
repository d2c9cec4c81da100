"""The native chunking kernels against plain Python, and the Python fallbacks against native."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from momoka import _core
from momoka.chunking import FixedChunker, ParagraphChunker, RecursiveChunker, StructureChunker, _engine, _tokens
from momoka.text import Document

from .conftest import doc_text, markdown_text

native = pytest.mark.skipif(not hasattr(_core, "chunk_word_starts"), reason="native chunking kernels not built")


@native
def test_whitespace_is_str_isspace_for_every_code_point():
    # each code point between two letters: a word boundary iff Python calls it whitespace
    cps = [c for c in range(0x110000) if not (0xD800 <= c <= 0xDFFF)]
    text = "".join("a" + chr(c) for c in cps) + "a"
    starts = _core.chunk_word_starts(text)
    boundary = set((starts[1:] - 1).tolist())  # the whitespace sits just before each later word
    expected = {2 * k + 1 for k, c in enumerate(cps) if chr(c).isspace()}
    assert boundary == expected


@native
@settings(max_examples=60, deadline=None)
@given(doc_text, st.lists(st.integers(-3, 200), max_size=20))
def test_trim_bounds_and_find_all_match_python(text, cuts):
    lo, hi = _core.chunk_trim_bounds(text, np.array(cuts, dtype=np.int64))
    n = len(text)
    for c, a, b in zip(cuts, lo.tolist(), hi.tolist()):
        c = min(max(c, 0), n)
        rest = text[c:]
        assert a == c + (len(rest) - len(rest.lstrip()))
        assert b == len(text[:c].rstrip())
    for sep in (" ", "\n\n", "e.", "東京"):
        got = _core.chunk_find_all(text, sep, 0, n).tolist()
        ref = [i for i in range(n) if text.startswith(sep, i)]
        assert got == ref


@native
@settings(max_examples=40, deadline=None)
@given(doc_text, st.integers(1, 30), st.sampled_from(["tokens", "chars"]))
def test_python_fallback_gives_the_same_chunks(text, size, unit):
    doc = Document(text)
    chunkers = [
        RecursiveChunker(size, unit=unit),
        RecursiveChunker(size, separators=("e", ". ", "\n"), unit=unit),
        FixedChunker(size, unit=unit),
        FixedChunker(size, unit=unit, align="sentence"),
        ParagraphChunker(size, unit=unit),
        StructureChunker(size, unit=unit),
    ]
    fast = [c.spans(doc).tolist() for c in chunkers]
    mp = pytest.MonkeyPatch()
    try:
        mp.setattr(_engine, "_native_trim", None)
        mp.setattr(_engine, "_native_find", None)
        mp.setattr(_engine, "_native_pack", None)
        mp.setattr(_tokens, "_native_word_starts", None)
        slow = [c.spans(doc).tolist() for c in chunkers]
    finally:
        mp.undo()
    assert fast == slow


@settings(max_examples=30, deadline=None)
@given(markdown_text, st.integers(1, 30))
def test_structure_python_fallback(text, size):
    doc = Document.from_markdown(text)
    fast = StructureChunker(size, unit="chars").spans(doc).tolist()
    mp = pytest.MonkeyPatch()
    try:
        mp.setattr(_engine, "_native_trim", None)
        mp.setattr(_engine, "_native_find", None)
        mp.setattr(_engine, "_native_pack", None)
        slow = StructureChunker(size, unit="chars").spans(doc).tolist()
    finally:
        mp.undo()
    assert fast == slow


@native
@settings(max_examples=60, deadline=None)
@given(doc_text)
def test_word_ids_match_python_words(text):
    starts, ends, ids, first = _core.chunk_word_ids(text)
    words = text.split()
    assert [text[a:b] for a, b in zip(starts.tolist(), ends.tolist())] == words
    order = list(dict.fromkeys(words))  # distinct words in order of first appearance
    assert ids.tolist() == [order.index(w) for w in words]
    assert [words[k] for k in first.tolist()] == order


@native
@settings(max_examples=30, deadline=None)
@given(doc_text, st.integers(1, 12))
def test_word_counting_fallback_same_chunks(text, size):
    doc = Document(text)
    ch = FixedChunker(size, tokenizer=list)  # one token per character of each word
    fast = ch.spans(doc).tolist()
    mp = pytest.MonkeyPatch()
    try:
        mp.setattr(_tokens, "_native_word_ids", None)
        slow = ch.spans(doc).tolist()
    finally:
        mp.undo()
    assert fast == slow


@native
@settings(max_examples=30, deadline=None)
@given(doc_text, st.integers(2, 12), st.integers(0, 11))
def test_offsets_tokenizer_fallback_same_chunks(bytelevel_tokenizer, text, size, overlap):
    overlap = overlap % size
    doc = Document(text)
    ch = FixedChunker(size, overlap=overlap, tokenizer=bytelevel_tokenizer)
    fast = ch.spans(doc).tolist()
    mp = pytest.MonkeyPatch()
    try:
        mp.setattr(_tokens, "_native_trim", None)
        mp.setattr(_engine, "_native_trim", None)
        mp.setattr(_engine, "_native_pack", None)
        slow = ch.spans(doc).tolist()
    finally:
        mp.undo()
    assert fast == slow
