"""Token counting with a ``tokenizers.Tokenizer`` and with plain callables.

Sizes are checked against the tokenizer itself (encoding each chunk, or the
whole text with offsets), not against the chunkers' own counts.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from momoka.chunking import FixedChunker, RecursiveChunker, StructureChunker, WhitespaceTokenizer
from momoka.text import Document

from .conftest import check_tiling, doc_text

SETTINGS = settings(max_examples=40, deadline=None)


def n_tokens(tok, s: str) -> int:
    return len(tok.encode(s, add_special_tokens=False).ids)


@SETTINGS
@given(text=doc_text, size=st.integers(1, 15))
def test_wordpiece_fixed_chunks_fit_and_are_maximal(wordlevel_tokenizer, text, size):
    # tried: fixed chunks on random text; each chunk is re-encoded by the tokenizer itself
    tok = wordlevel_tokenizer
    doc = Document(text)
    chunks = FixedChunker(size, tokenizer=tok)(doc)
    check_tiling(text, chunks)

    def whole_words(c) -> bool:  # the chunk starts and ends on whitespace-word boundaries
        return (c.start == 0 or text[c.start - 1].isspace()) and (c.end == len(text) or text[c.end].isspace())

    for k, c in enumerate(chunks):
        cnt = n_tokens(tok, c.text)
        assert cnt <= size or len(c.text) == 1  # only one character may exceed the limit
        if k + 1 < len(chunks) and whole_words(c) and whole_words(chunks[k + 1]):
            nxt_word = chunks[k + 1].text.split()[0]
            assert cnt + n_tokens(tok, nxt_word) > size  # greedy: the next word did not fit


@SETTINGS
@given(text=doc_text, size=st.integers(1, 20))
def test_bytelevel_bpe_counts_tokens_in_context(bytelevel_tokenizer, text, size):
    tok = bytelevel_tokenizer
    doc = Document(text)
    chunks = RecursiveChunker(size, tokenizer=tok)(doc)
    check_tiling(text, chunks)
    enc = tok.encode(text, add_special_tokens=False)
    starts = [a for a, b in enc.offsets if b > a]
    for c in chunks:
        inside = sum(1 for s in starts if c.start <= s < c.end)
        # a token starting on whitespace between two chunks is counted on one side or the
        # other; the tokens starting inside a chunk must fit in any case
        assert inside <= size or len(c.text.split()) == 1


def test_callable_returning_lists_counts_characters():
    # a "tokenizer" that makes one token per character: sizes are sums of word lengths
    text = "aa bbb c dddd ee"
    chunks = FixedChunker(6, tokenizer=list)(Document(text))
    assert [c.text for c in chunks] == ["aa bbb c", "dddd ee"]  # 2+3+1, 4+2


def test_callable_returning_counts_matches_default():
    text = "alpha beta gamma delta.\n\nepsilon zeta eta theta iota kappa."
    d = Document(text)
    for size in (1, 2, 3, 5):
        a = FixedChunker(size, tokenizer=lambda s: len(s.split())).spans(d).tolist()
        b = FixedChunker(size).spans(d).tolist()
        assert a == b


def test_structure_with_tokenizer(wordlevel_tokenizer):
    d = Document.from_markdown("# Title\n\nThe word café. The word naïve.\n\n## Next\n\nSee it.\n")
    for c in StructureChunker(6, tokenizer=wordlevel_tokenizer)(d):
        assert n_tokens(wordlevel_tokenizer, c.text) <= 6


def test_whitespace_tokenizer_spans_and_count():
    tok = WhitespaceTokenizer()
    text = " ab\u3000c\xa0d  東京 "
    assert len(text.split()) == 4
    assert tok(text) == 5  # 東 and 京 are a token each: Chinese is written without spaces
    assert tok.spans(text).tolist() == [[1, 3], [4, 5], [6, 7], [9, 10], [10, 11]]


def test_transformers_like_callable_and_encode_objects():
    text = "aa bbb c dddd ee"
    d = Document(text)
    expected = FixedChunker(6, tokenizer=list).spans(d).tolist()  # one token per character

    def batch_encoding(s):  # what a transformers tokenizer returns when called
        return {"input_ids": list(s), "attention_mask": [1] * len(s)}

    class Encoder:  # an object with encode() only, like a tiktoken Encoding
        def encode(self, s):
            return list(s)

    assert FixedChunker(6, tokenizer=batch_encoding).spans(d).tolist() == expected
    assert FixedChunker(6, tokenizer=Encoder()).spans(d).tolist() == expected


def test_mapping_without_input_ids_is_rejected():
    import pytest

    from momoka.errors import ConfigError

    with pytest.raises(ConfigError):  # a mapping that is not a tokenizer output
        FixedChunker(3, tokenizer=lambda s: {"tokens": s.split()})(Document("a b c"))


@SETTINGS
@given(text=doc_text, size=st.integers(2, 12), overlap=st.integers(0, 11))
def test_bytelevel_fixed_with_overlap(bytelevel_tokenizer, text, size, overlap):
    # byte-level BPE gives several tokens per CJK character (weighted atoms); overlap on top
    overlap = overlap % size
    tok = bytelevel_tokenizer
    doc = Document(text)
    chunks = FixedChunker(size, overlap=overlap, tokenizer=tok)(doc)
    check_tiling(text, chunks, overlap=overlap > 0)
    enc = tok.encode(text, add_special_tokens=False)
    starts = [a for a, b in enc.offsets if b > a]
    for c in chunks:
        inside = sum(1 for s in starts if c.start <= s < c.end)
        first = min((s for s in starts if s >= c.start), default=c.start)
        alone = sum(1 for s in starts if s == first)  # tokens sharing the chunk's first offset
        assert inside <= size or inside == alone  # only one oversized character may exceed
