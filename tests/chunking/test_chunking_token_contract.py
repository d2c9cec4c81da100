"""The token-limit contract with real tokenizers.

Contract: a chunk of a size-limited chunker (fixed, recursive, structure) with
``unit="tokens"`` and a ``tokenizers.Tokenizer`` never holds more than ``size``
tokens when its text is encoded again by the same tokenizer (no special
tokens), except a chunk of one character that alone encodes to more tokens.

Checked with the default embedder's WordPiece and SmolLM2's byte-level BPE
(both from the installed models), on slices of every shared set and on
adversarial strings (long words, emoji, CJK runs, whitespace runs, digits,
the tokenizer's own special tokens in the text), by encoding every chunk with
the tokenizer itself, never with the chunkers' counts.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from momoka.chunking import FixedChunker, RecursiveChunker, StructureChunker
from momoka.text import Document

from .conftest import check_tiling


def _load(model: str):
    tokenizers = pytest.importorskip("tokenizers")
    from momoka.models.catalog import models_dir

    p = models_dir() / model / "tokenizer.json"
    if not p.exists():
        pytest.skip(f"{model} is not installed (momoka models install)")
    return tokenizers.Tokenizer.from_file(str(p))  # the embedder's pads and truncates to 128: kept


_PLAIN: dict = {}


def plain(tok):
    """A copy of ``tok`` that neither pads nor truncates: what "re-encoded" means."""
    if id(tok) not in _PLAIN:
        t = type(tok).from_str(tok.to_str())
        t.no_padding()
        t.no_truncation()
        _PLAIN[id(tok)] = (tok, t)
    return _PLAIN[id(tok)][1]


@pytest.fixture(scope="module")
def wordpiece():
    return _load("minilm-l6-v2-int8")


@pytest.fixture(scope="module")
def bpe():
    return _load("smollm2-135m-instruct")


@pytest.fixture(scope="module")
def no_pretokenizer_bpe():
    """A BPE without pre-tokenization (merges may cross spaces): the general, fully checked path."""
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers import models, trainers

    tok = tokenizers.Tokenizer(models.BPE(unk_token="?"))
    corpus = ["the word of the day is the word, and the day is long. " * 4, "東京 日本語 😀 café"] * 5
    tok.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=120, special_tokens=["?"]))
    return tok


@pytest.fixture(scope="module")
def digits_only_bpe():
    """A BPE whose only pre-tokenizer splits digits, never at whitespace, so merges cross spaces as
    without one: it must take the general path, not the counted-words one."""
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers import models, pre_tokenizers, trainers

    tok = tokenizers.Tokenizer(models.BPE(unk_token="?"))
    tok.pre_tokenizer = pre_tokenizers.Digits(individual_digits=True)
    corpus = ["the word of the day is the word, and the day is long. 1984 " * 4, "東京 日本語 😀 café"] * 5
    tok.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=120, special_tokens=["?"]))
    return tok


def chunkers(size: int, tok):
    return [
        FixedChunker(size, tokenizer=tok),
        FixedChunker(size, overlap=size // 3, tokenizer=tok),
        RecursiveChunker(size, tokenizer=tok),
        StructureChunker(size, tokenizer=tok),
    ]


def check_contract(tok, text: str, chunks, size: int, overlap: bool = False) -> None:
    check_tiling(text, chunks, overlap=overlap)
    if not chunks:
        return
    encs = plain(tok).encode_batch([c.text for c in chunks], add_special_tokens=False)
    for c, e in zip(chunks, encs):
        assert len(e.ids) <= size or len(c.text) == 1, (len(e.ids), size, c.text[:80])


def run_all(tok, text: str, size: int) -> None:
    doc = Document(text)
    for ch in chunkers(size, tok):
        check_contract(tok, text, ch(doc), size, overlap=getattr(ch, "overlap", 0) > 0)


# -- adversarial strings ------------------------------------------------------------------

ADVERSARIAL = [
    "a" * 3000,                                   # one word far over any limit
    "supercalifragilistic" * 40 + " end",
    "😀" * 50 + " " + "👨‍👩‍👧‍👦" * 20,               # astral characters, ZWJ sequences
    "東京都は日本の首都である。" * 30,              # a CJK run without spaces, with sentence ends
    "word" + " " * 500 + "word\n\n\n\n\t\t  \u3000word",  # whitespace runs
    "1234567890" * 60,                             # digits (SmolLM2 splits them one by one)
    "x" + "\u0301" * 200,                           # one letter with 200 combining accents
    "ЁЖЗИЙ " * 100 + "ΑΒΓΔ" * 100,
    "hello <|im_start|> world [CLS] again " * 20,  # the tokenizers' own special tokens as text
]

piece = st.one_of(
    st.sampled_from(["the", "word", "Dr.", "e.g.", "3.14159", "café", "naïve", "U.S.", "it's", "don't"]),
    st.sampled_from(["東京", "日本語の文", "😀", "👍🏽", "🇯🇵", "한국어", "ไทย", "\u0301"]),
    st.sampled_from([".", "!", "?", "。", ",", "...", "—", "<|im_end|>"]),
    st.sampled_from([" ", " ", " ", "  ", "\n", "\n\n", "\t", "\u3000", "\xa0", " " * 40, "\r\n"]),
    st.integers(1, 400).map(lambda n: "z" * n),
    st.integers(1, 60).map(lambda n: "語" * n),
    st.integers(1, 80).map(lambda n: "9" * n),
)
adversarial_text = st.lists(piece, min_size=1, max_size=80).map("".join).filter(lambda t: t.strip() != "")


@pytest.mark.parametrize("name", ["wordpiece", "bpe", "no_pretokenizer_bpe", "digits_only_bpe"])
@pytest.mark.parametrize("size", [1, 3, 16, 64])
def test_adversarial_strings_fit(request, name, size):
    # tried: every adversarial string with every limited chunker at four limits
    tok = request.getfixturevalue(name)
    for text in ADVERSARIAL:
        run_all(tok, text, size)


@settings(max_examples=60, deadline=None)
@given(text=adversarial_text, size=st.integers(1, 40))
def test_random_adversarial_text_fits_wordpiece(wordpiece, text, size):
    # tried: random mixes of long words, emoji, CJK runs, digit runs and whitespace runs
    run_all(wordpiece, text, size)


@settings(max_examples=60, deadline=None)
@given(text=adversarial_text, size=st.integers(1, 40))
def test_random_adversarial_text_fits_bpe(bpe, text, size):
    run_all(bpe, text, size)


@settings(max_examples=30, deadline=None)
@given(text=adversarial_text, size=st.integers(1, 40))
def test_random_text_fits_without_pretokenizer(no_pretokenizer_bpe, digits_only_bpe, text, size):
    # the general path: document encoded with offsets, every chunk checked by encoding it; a lone
    # Digits pre-tokenizer does not split at whitespace either, so it takes the same path
    run_all(no_pretokenizer_bpe, text, size)
    run_all(digits_only_bpe, text, size)


# -- real text ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def real_texts(shared_data):
    """The first two documents of every shared set, each cut to 40,000 characters."""
    out = []
    for d in sorted(p for p in shared_data.iterdir() if (p / "documents.jsonl").exists()):
        with open(d / "documents.jsonl", encoding="utf-8") as f:
            for _, line in zip(range(2), f):
                out.append(json.loads(line)["text"][:40_000])
    return out


@pytest.mark.parametrize("name", ["wordpiece", "bpe"])
@pytest.mark.parametrize("size", [32, 256])
def test_real_text_fits(request, real_texts, name, size):
    # tried: every limited chunker on slices of every shared set
    tok = request.getfixturevalue(name)
    for text in real_texts:
        run_all(tok, text, size)


@pytest.mark.parametrize("name", ["wordpiece", "bpe"])
def test_real_text_chunks_are_nearly_full(request, real_texts, name):
    # the contract is not met by making chunks small: fixed 256-token chunks of real text hold
    # at least 90 % of the limit on average (all but each document's last chunk)
    tok = request.getfixturevalue(name)
    fills = []
    for text in real_texts:
        chunks = FixedChunker(256, tokenizer=tok)(Document(text))
        encs = plain(tok).encode_batch([c.text for c in chunks[:-1]], add_special_tokens=False)
        fills += [len(e.ids) / 256 for e in encs]
    assert sum(fills) / len(fills) >= 0.9


@pytest.mark.parametrize("name", ["wordpiece", "bpe"])
def test_joined_unit_counts_equal_counts_alone(request, real_texts, name):
    # tried: the words of real text (alone, after one space, after a newline run, after spaces) and
    # adversarial units, counted by one joined encoding vs by encoding each unit alone
    from momoka.chunking._tokens import resolve_tokenizer

    src = resolve_tokenizer(request.getfixturevalue(name))
    words = sorted({w for t in real_texts for w in t.split()})[:20_000]
    extra = ["😀", "👨‍👩‍👧‍👦", "東京都", "1984", "x\u0301\u0301", "z" * 300, "don't", "U.S.", "ЁЖЗИЙ", "<b>"]
    for sep, units in (("\n", words + extra),
                       ("", [g + w for w in words[:5000] + extra for g in (" ", "\n", "\n\n", "  ", " \t ")])):
        joined = src._encode_units(units, sep)
        alone = src._counts(units)
        assert joined.tolist() == alone.tolist()
