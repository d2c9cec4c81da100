"""Fixtures and helpers for the chunking tests."""

from __future__ import annotations

import pytest
from hypothesis import strategies as st

# Pieces random documents are made of: words (ASCII, Latin-1, BMP and astral
# characters), sentence punctuation, and every kind of whitespace the
# chunkers must treat as whitespace (str.isspace), including U+3000 and NBSP.
WORDS = ["a", "the", "word", "Dr.", "e.g.", "3.14", "café", "naïve", "東京", "日本語", "😀x", "U.S.", "(see", "it)"]
PUNCT = [".", "!", "?", "。", ",", ";", "..."]
SPACES = [" ", " ", " ", "  ", "\n", "\n\n", "\t", "\u3000", "\xa0", "\n \n", "\r\n"]

piece = st.one_of(st.sampled_from(WORDS), st.sampled_from(PUNCT), st.sampled_from(SPACES))
doc_text = st.lists(piece, min_size=1, max_size=120).map("".join).filter(lambda t: t.strip() != "")

md_line = st.one_of(
    st.tuples(st.integers(1, 3), st.sampled_from(["Intro", "Methods", "Results", "東京"])).map(
        lambda t: "#" * t[0] + " " + t[1]
    ),
    st.lists(st.one_of(st.sampled_from(WORDS), st.sampled_from(PUNCT), st.just(" ")), min_size=1, max_size=30)
    .map("".join)
    .filter(lambda s: s.strip() != ""),
)
markdown_text = (
    st.lists(md_line, min_size=1, max_size=25)
    .filter(lambda ls: any(not x.startswith("#") for x in ls))  # a document needs body text
    .map("\n\n".join)
)


def check_tiling(text: str, chunks, overlap: bool = False) -> None:
    """Independent check of the coverage contract, character by character."""
    cover = [0] * len(text)
    prev = None
    for k, c in enumerate(chunks):
        assert c.index == k
        assert text[c.start : c.end] == c.text  # exact offsets
        assert c.text and c.text == c.text.strip()  # starts and ends on non-whitespace
        for i in range(c.start, c.end):
            cover[i] += 1
        if prev is not None:
            assert c.start > prev.start  # in order
            if not overlap:
                assert c.start >= prev.end
                assert text[prev.end : c.start].strip() == ""  # only whitespace between
            else:
                assert c.end > prev.end
        prev = c
    for i, ch in enumerate(text):
        if not ch.isspace():
            assert cover[i] >= 1, f"non-whitespace character {i} ({ch!r}) not covered"
            if not overlap:
                assert cover[i] == 1, f"character {i} covered {cover[i]} times"


@pytest.fixture(scope="session")
def wordlevel_tokenizer():
    """A word-level ``tokenizers`` tokenizer trained in-process (no hub)."""
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers import models, pre_tokenizers, trainers

    tok = tokenizers.Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    corpus = ["the word café naïve Dr. e.g. 3.14 東京 日本語 U.S. see it"] * 10
    tok.train_from_iterator(corpus, trainers.WordPieceTrainer(vocab_size=200, special_tokens=["[UNK]"]))
    return tok


@pytest.fixture(scope="session")
def bytelevel_tokenizer():
    """A byte-level BPE ``tokenizers`` tokenizer trained in-process (tokens carry the leading space)."""
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers import models, pre_tokenizers, trainers

    tok = tokenizers.Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    corpus = ["the word café naïve Dr. e.g. 3.14 東京 日本語 U.S. see it. The words!"] * 10
    tok.train_from_iterator(
        corpus,
        trainers.BpeTrainer(vocab_size=300, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()),
    )
    return tok


def tokens_in(text: str, a: int, b: int) -> int:
    """Whitespace tokens that start in text[a:b] (a token is a maximal non-whitespace run of the whole text)."""
    return sum(1 for i in range(a, b) if not text[i].isspace() and (i == 0 or text[i - 1].isspace()))


def size_of(text: str, chunk, unit: str) -> int:
    """A chunk's size as the chunkers define it, computed independently."""
    return tokens_in(text, chunk.start, chunk.end) if unit == "tokens" else len(chunk.text)
