"""The native chunking kernels against the plain-Python references of ``tests/_oracles/chunking.py``.

Kernel by kernel on random inputs, and end to end: every chunker run with the
references swapped in for ``momoka._core`` must give the same chunks.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from momoka import _core
from momoka.chunking import FixedChunker, ParagraphChunker, RecursiveChunker, StructureChunker, _splitter, _tokens
from momoka.text import Document

from _oracles import chunking as ref
from .conftest import doc_text, markdown_text

SEPARATORS = (" ", "\n\n", "e.", "東京", "e", ". ", "\n")


def reference_chunks(chunkers, doc) -> list:
    """Spans of each chunker with the reference kernels in place of the native ones."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_splitter, "_core", ref.REFERENCE_CORE)
        mp.setattr(_tokens, "_core", ref.REFERENCE_CORE)
        return [c.spans(doc).tolist() for c in chunkers]


def test_whitespace_is_str_isspace_for_every_code_point():
    # each code point between two letters: a word boundary iff Python calls it whitespace
    cps = [c for c in range(0x110000) if not (0xD800 <= c <= 0xDFFF)]
    text = "".join("a" + chr(c) for c in cps) + "a"
    starts = _core.chunk_word_starts(text)
    boundary = set((starts[1:] - 1).tolist())  # the whitespace sits just before each later word
    expected = {2 * k + 1 for k, c in enumerate(cps) if chr(c).isspace()}
    assert boundary == expected


@settings(max_examples=60, deadline=None)
@given(doc_text, st.lists(st.integers(-3, 200), max_size=20), st.integers(-2, 150), st.integers(-2, 150))
def test_trim_bounds_and_find_all_match_reference(text, cuts, lo, hi):
    got = _core.chunk_trim_bounds(text, np.array(cuts, dtype=np.int64))
    exp = ref.trim_bounds(text, cuts)
    assert [a.tolist() for a in got] == [a.tolist() for a in exp]
    n = len(text)
    for c, a, b in zip(cuts, got[0].tolist(), got[1].tolist()):  # and against str.strip directly
        c = min(max(c, 0), n)
        assert a == c + (len(text[c:]) - len(text[c:].lstrip()))
        assert b == len(text[:c].rstrip())
    for sep in SEPARATORS:
        assert _core.chunk_find_all(text, sep, 0, n).tolist() == [i for i in range(n) if text.startswith(sep, i)]
        assert _core.chunk_find_all(text, sep, lo, hi).tolist() == ref.find_all(text, sep, lo, hi).tolist()


@settings(max_examples=60, deadline=None)
@given(doc_text)
def test_word_starts_and_ids_match_reference(text):
    assert _core.chunk_word_starts(text).tolist() == ref.word_starts(text).tolist()
    starts, ends, ids, first = _core.chunk_word_ids(text)
    words = text.split()
    assert [text[a:b] for a, b in zip(starts.tolist(), ends.tolist())] == words
    assert [a.tolist() for a in (starts, ends, ids, first)] == [a.tolist() for a in ref.word_ids(text)]
    # solo=True: each CJK character is a word of its own (the reference classifies by Unicode name)
    assert _core.chunk_word_starts(text, True).tolist() == ref.word_starts(text, True).tolist()
    got = _core.chunk_word_ids(text, True)
    assert [a.tolist() for a in got] == [a.tolist() for a in ref.word_ids(text, True)]
    assert "".join(text[a:b] for a, b in zip(got[0].tolist(), got[1].tolist())) == "".join(text.split())


frac = st.floats(0, 1)
long_text = st.lists(doc_text, min_size=2, max_size=8).map("".join)  # enough pieces to pack
level = st.one_of(st.sampled_from(SEPARATORS), st.lists(frac, max_size=12))


@settings(max_examples=150, deadline=None)
@example("aa bb cc dd ee ff", [" "], 5, False, False, [(0.0, 1.0)])  # pieces that fit exactly are joined
@example("aa bb cc dd ee ff", [], 2, True, False, [(0.0, 1.0)])
@given(
    long_text,
    st.lists(level, max_size=3),
    st.integers(1, 12),
    st.booleans(),
    st.booleans(),
    st.lists(st.tuples(frac, frac), min_size=1, max_size=3),
)
def test_recursive_pack_matches_reference(text, levels, size, tokens, keep_oversize, ranges):
    n = len(text)

    def at(f):  # a fraction of the text, reaching 2 past either end
        return int(round(f * (n + 4))) - 2

    # cut arrays sorted, as the kernel requires; ranges in order, possibly empty or out of bounds
    levels = [lv if isinstance(lv, str) else np.array(sorted(map(at, lv)), dtype=np.int64) for lv in levels]
    ranges = sorted((min(at(a), at(b)), max(at(a), at(b))) for a, b in ranges)
    starts = cum = None
    if tokens:  # one token per whitespace word
        starts = ref.word_starts(text)
        cum = np.arange(starts.size + 1, dtype=np.int64)
    arr = np.array(ranges, dtype=np.int64)
    got = _core.chunk_recursive_pack(text, arr, levels, size, starts, cum, keep_oversize)
    exp = ref.recursive_pack(text, arr, levels, size, starts, cum, keep_oversize)
    assert ref.trimmed(text, got) == ref.trimmed(text, exp)


@settings(max_examples=200, deadline=None)
@given(long_text, st.lists(level, max_size=3), st.integers(1, 12), st.booleans(), st.data())
def test_recursive_pack_with_leads_matches_reference(text, levels, size, keep_oversize, data):
    # tried: token atoms weighted 1-3 with a lead of -2..+2 tokens when an atom starts a span
    # (a byte-level BPE counts a chunk's first word alone, the others with the space before them)
    n = len(text)
    levels = [lv if isinstance(lv, str) else np.array(sorted(int(f * n) for f in lv), dtype=np.int64)
              for lv in levels]
    starts = ref.word_starts(text)
    w = np.array(data.draw(st.lists(st.integers(1, 3), min_size=starts.size, max_size=starts.size)), dtype=np.int64)
    lead = np.array(data.draw(st.lists(st.integers(-2, 2), min_size=starts.size, max_size=starts.size)),
                    dtype=np.int64)
    lead = np.maximum(lead, 1 - w)  # a word alone still has a token
    cum = np.concatenate([[0], np.cumsum(w)]).astype(np.int64)
    arr = np.array([[0, n]], dtype=np.int64)
    got = _core.chunk_recursive_pack(text, arr, levels, size, starts, cum, keep_oversize, lead)
    exp = ref.recursive_pack(text, arr, levels, size, starts, cum, keep_oversize, lead)
    assert ref.trimmed(text, got) == ref.trimmed(text, exp)


def test_recursive_pack_by_hand():
    text = "aa bb cc dd ee ff"
    whole = np.array([[0, len(text)]], dtype=np.int64)
    got = ref.trimmed(text, _core.chunk_recursive_pack(text, whole, [" "], 5))
    assert [text[a:b] for a, b in got] == ["aa bb", "cc dd", "ee ff"]
    starts = ref.word_starts(text)
    cum = np.arange(starts.size + 1, dtype=np.int64)
    got = ref.trimmed(text, _core.chunk_recursive_pack(text, whole, [], 4, starts, cum))  # 4 words a chunk
    assert [text[a:b] for a, b in got] == ["aa bb cc dd", "ee ff"]
    got = ref.trimmed(text, _core.chunk_recursive_pack(text, whole, ["c"], 4, keep_oversize=True))
    assert [text[a:b] for a, b in got] == ["aa bb c", "c", "dd ee ff"]  # the pieces too big stay whole


@settings(max_examples=40, deadline=None)
@given(doc_text, st.integers(1, 30), st.sampled_from(["tokens", "chars"]))
def test_chunkers_match_reference_kernels(text, size, unit):
    doc = Document(text)
    chunkers = [
        RecursiveChunker(size, unit=unit),
        RecursiveChunker(size, separators=("e", ". ", "\n"), unit=unit),
        FixedChunker(size, unit=unit),
        FixedChunker(size, unit=unit, align="sentence"),
        ParagraphChunker(size, unit=unit),
        StructureChunker(size, unit=unit),
    ]
    assert [c.spans(doc).tolist() for c in chunkers] == reference_chunks(chunkers, doc)


@settings(max_examples=30, deadline=None)
@given(markdown_text, st.integers(1, 30))
def test_structure_chunks_match_reference_kernels(text, size):
    doc = Document.from_markdown(text)
    ch = StructureChunker(size, unit="chars")
    assert [ch.spans(doc).tolist()] == reference_chunks([ch], doc)


@settings(max_examples=30, deadline=None)
@given(doc_text, st.integers(1, 12))
def test_word_counting_matches_reference_kernels(text, size):
    doc = Document(text)
    ch = FixedChunker(size, tokenizer=list)  # one token per character of each word
    assert [ch.spans(doc).tolist()] == reference_chunks([ch], doc)


@settings(max_examples=30, deadline=None)
@given(doc_text, st.integers(2, 12), st.integers(0, 11))
def test_offsets_tokenizer_matches_reference_kernels(bytelevel_tokenizer, text, size, overlap):
    overlap = overlap % size
    doc = Document(text)
    chunkers = [FixedChunker(size, overlap=overlap, tokenizer=bytelevel_tokenizer),
                RecursiveChunker(size, tokenizer=bytelevel_tokenizer)]
    assert [c.spans(doc).tolist() for c in chunkers] == reference_chunks(chunkers, doc)
