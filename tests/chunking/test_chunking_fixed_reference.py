"""FixedChunker against a slow, plain-Python reference (character by character)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from momoka.chunking import FixedChunker
from momoka.text import Document

from _oracles.chunking import words as ref_words
from .conftest import doc_text


def ref_fixed_tokens(text: str, size: int, overlap: int) -> list[tuple[int, int]]:
    """Words found by scanning characters (:func:`_reference.words`); chunk k = words [k*step, k*step + size)."""
    words = ref_words(text)
    out = []
    step = size - overlap
    k = 0
    while k < len(words):
        last = min(k + size, len(words)) - 1
        out.append((words[k][0], words[last][1]))
        if k + size >= len(words):
            break
        k += step
    return out


def ref_fixed_chars(text: str, size: int) -> list[tuple[int, int]]:
    """Windows of `size` characters, each starting at the next non-whitespace character."""
    out = []
    pos = 0
    n = len(text)
    while True:
        while pos < n and text[pos].isspace():
            pos += 1
        if pos >= n:
            break
        end = min(pos + size, n)
        e = end
        while text[e - 1].isspace():
            e -= 1
        out.append((pos, e))
        pos = end
    return out


@settings(max_examples=80, deadline=None)
@given(doc_text, st.integers(1, 10), st.integers(0, 9))
def test_fixed_tokens_matches_reference(text, size, overlap):
    overlap = overlap % size
    got = FixedChunker(size, overlap=overlap).spans(Document(text)).tolist()
    assert [tuple(x) for x in got] == ref_fixed_tokens(text, size, overlap)


@settings(max_examples=80, deadline=None)
@given(doc_text, st.integers(1, 30))
def test_fixed_chars_matches_reference(text, size):
    got = FixedChunker(size, unit="chars").spans(Document(text)).tolist()
    assert [tuple(x) for x in got] == ref_fixed_chars(text, size)


def test_fixed_on_real_document(shared_data):
    import json

    with open(shared_data / "squad_v1_dev_half_a" / "documents.jsonl", encoding="utf-8") as f:
        text = json.loads(f.readline())["text"]
    doc = Document(text)
    for size, overlap in [(50, 0), (128, 16)]:
        got = [tuple(x) for x in FixedChunker(size, overlap=overlap).spans(doc).tolist()]
        assert got == ref_fixed_tokens(text, size, overlap)
    got = [tuple(x) for x in FixedChunker(300, unit="chars").spans(doc).tolist()]
    assert got == ref_fixed_chars(text, 300)
