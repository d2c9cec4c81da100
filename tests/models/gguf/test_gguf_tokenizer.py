"""tokenizer.json built from the GGUF vocabulary: ids agree with an independent byte-level BPE."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.models

SAMPLES = [
    "Hello world",
    "The quick brown fox jumps over the lazy dog.",
    "  multiple   spaces\n\nnew lines\ttabs  ",
    "numbers 12345 and 3.14159, year 1969!",
    "unicode: café, naïve, 日本語, emoji 🎉 and Ω≈ç√",
    "don't, I'll, we've, she's, THEY'RE",
    "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n",
    "def f(x):\n    return x**2  # comment",
    "",
]


def _bytes_to_unicode():
    """GPT-2's reversible byte -> printable character table."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    table = {}
    extra = 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


class ReferenceBPE:
    """A slow, plain-Python byte-level BPE following llama.cpp's 'smollm' pre-tokenizer."""

    def __init__(self, tokens, merges, specials):
        import regex

        self.regex = regex
        self.vocab = {t: i for i, t in enumerate(tokens)}
        self.ranks = {tuple(m.split(" ")): r for r, m in enumerate(merges)}
        self.specials = sorted(specials, key=len, reverse=True)
        self.b2u = _bytes_to_unicode()
        self.digit = regex.compile(r"\p{N}")
        self.word = regex.compile(
            r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
        )

    def _bpe(self, word):
        parts = list(word)
        while len(parts) > 1:
            best = min(range(len(parts) - 1), key=lambda i: self.ranks.get((parts[i], parts[i + 1]), 1 << 30))
            if (parts[best], parts[best + 1]) not in self.ranks:
                break
            parts[best:best + 2] = [parts[best] + parts[best + 1]]
        return [self.vocab[p] for p in parts]

    def _plain(self, text):
        ids = []
        pieces = []
        pos = 0
        for m in self.digit.finditer(text):  # each digit stands alone
            pieces += [text[pos:m.start()], m.group()]
            pos = m.end()
        pieces.append(text[pos:])
        for piece in pieces:
            for w in self.word.findall(piece):
                ids += self._bpe("".join(self.b2u[b] for b in w.encode("utf-8")))
        return ids

    def encode(self, text):
        if not self.specials:
            return self._plain(text)
        pat = "(" + "|".join(self.regex.escape(s) for s in self.specials) + ")"
        ids = []
        for i, part in enumerate(self.regex.split(pat, text)):
            if i % 2:
                ids.append(self.vocab[part])
            elif part:
                ids += self._plain(part)
        return ids


@pytest.fixture(scope="module")
def gguf_vocab(gguf_reader):
    f = gguf_reader.fields
    return (f["tokenizer.ggml.tokens"].contents(), f["tokenizer.ggml.merges"].contents(),
            f["tokenizer.ggml.token_type"].contents())


@pytest.fixture(scope="module")
def reference(gguf_vocab):
    pytest.importorskip("regex")
    tokens, merges, types = gguf_vocab
    return ReferenceBPE(tokens, merges, [t for t, ty in zip(tokens, types) if ty == 3])


def test_vocabulary_is_the_gguf_token_list(lm_fp32, gguf_vocab):
    tokens, _, _ = gguf_vocab
    tok = lm_fp32.tokenizer
    assert tok.get_vocab_size() == len(tokens) == 49152
    for i in list(range(40)) + list(range(1000, 49152, 997)):
        assert tok.id_to_token(i) == tokens[i]


def test_special_token_ids(lm_fp32):
    assert lm_fp32.encode("<|endoftext|>") == [0]
    assert lm_fp32.encode("<|im_start|>") == [1]
    assert lm_fp32.encode("<|im_end|>") == [2]
    assert lm_fp32.encode("<|im_start|>user") == [1, lm_fp32.tokenizer.token_to_id("user")]


@pytest.mark.parametrize("text", SAMPLES)
def test_ids_match_reference_bpe(lm_fp32, reference, text):
    assert lm_fp32.encode(text) == reference.encode(text)


def test_digits_are_single_tokens(lm_fp32, gguf_vocab):
    tokens = gguf_vocab[0]
    ids = lm_fp32.encode("2024")
    assert [tokens[i] for i in ids] == ["2", "0", "2", "4"]


# SmolLM2's vocabulary has no token for 21 byte values (six control characters,
# 0xC0/0xC1 and the UTF-8 lead bytes 0xF1-0xFF, i.e. code points >= U+40000), so
# text with those characters cannot round-trip; the alphabet leaves them out.
@settings(max_examples=60, deadline=None)
@given(st.text(alphabet=st.one_of(st.characters(blacklist_categories=("Cs", "Cc"), max_codepoint=0x3FFFF),
                                  st.sampled_from("\n\t\r ")), max_size=60))
def test_round_trip(lm_fp32, text):
    assert lm_fp32.decode(lm_fp32.encode(text)) == text


@settings(max_examples=40, deadline=None)
@given(st.text(alphabet="ab 1é\n'.日", max_size=30))
def test_random_strings_match_reference(lm_fp32, reference, text):
    assert lm_fp32.encode(text) == reference.encode(text)


def test_tokenizer_json_is_standalone(smollm_fp32):
    """The written tokenizer.json loads with tokenizers alone and names its BPE pieces."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(smollm_fp32 / "tokenizer.json"))
    assert tok.encode("Hello world").tokens == ["Hello", "Ġworld"]
    spec = json.loads((smollm_fp32 / "tokenizer.json").read_text())
    assert spec["model"]["type"] == "BPE"


def test_unsupported_tokenizer():
    from momoka.errors import UnsupportedModelError
    from momoka.models.gguf_tokenizer import build_tokenizer

    # a SentencePiece ('llama') vocabulary and an unknown pre-tokenizer name
    with pytest.raises(UnsupportedModelError, match="'llama'"):
        build_tokenizer("llama", None, ["a"], [])
    with pytest.raises(UnsupportedModelError, match="'mystery'"):
        build_tokenizer("gpt2", "mystery", ["a", "b", "ab"], ["a b"])
