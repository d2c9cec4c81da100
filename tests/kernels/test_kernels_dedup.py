"""SimHash against a plain-Python reference, near-duplicates against brute force, Bloom filter rates."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from momoka.errors import BloomFormatError, ConfigError, KernelInputError
from momoka.kernels import BloomFilter, feature_hash, hamming, near_duplicates, simhash

M64 = (1 << 64) - 1
SPACES = {0x20, 0x85, 0xA0, 0x1680, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000} | set(range(0x09, 0x0E)) | set(
    range(0x2000, 0x200B)
)
PUNCT_RANGES = [(0x2000, 0x206F), (0x2E00, 0x2E7F), (0x3000, 0x303F), (0xFF00, 0xFF0F), (0xFF1A, 0xFF20),
                (0xFF3B, 0xFF40), (0xFF5B, 0xFF65)]


def ref_is_word(ch: str) -> bool:
    o = ord(ch)
    if o < 128:
        return ch.isalnum() or ch == "_"
    if o in SPACES or o <= 0xBF or o in (0xD7, 0xF7):
        return False
    return not any(a <= o <= b for a, b in PUNCT_RANGES)


def ref_lower(s: str) -> str:
    return "".join(c.lower() if c.isascii() else c for c in s)


def ref_features(text: str, tokenizer: str, n: int) -> list[str]:
    if tokenizer == "char":
        out, pending = [], False
        for c in text:
            if ord(c) in SPACES:
                pending = bool(out)
                continue
            if pending:
                out.append(" ")
            pending = False
            out.append(ref_lower(c))
        s = "".join(out)
        if not s:
            return []
        g = min(n, len(s))
        return [s[i : i + g] for i in range(len(s) - g + 1)]
    words, cur = [], []
    for c in text + " ":
        if ref_is_word(c) and c != " ":
            cur.append(c)
        elif cur:
            words.append(ref_lower("".join(cur)))
            cur = []
    if not words:
        return []
    g = min(n, len(words))
    return [" ".join(words[i : i + g]) for i in range(len(words) - g + 1)]


def ref_hash(feature: str) -> int:
    h = 0xCBF29CE484222325
    for c in feature:
        h = ((h ^ ord(c)) * 0x100000001B3) & M64
    h ^= h >> 30
    h = (h * 0xBF58476D1CE4E5B9) & M64
    h ^= h >> 27
    h = (h * 0x94D049BB133111EB) & M64
    h ^= h >> 31
    return h


def ref_simhash(text: str, n: int, tokenizer: str, weights: dict | None = None) -> int:
    v = [0.0] * 64
    for f in ref_features(text, tokenizer, n):
        h = ref_hash(f)
        w = (weights or {}).get(f, 1.0)
        for b in range(64):
            v[b] += w if (h >> b) & 1 else -w
    return sum(1 << b for b in range(64) if v[b] > 0)


TEXTS = st.text(alphabet=st.sampled_from(list("abc ABC_,.!\n\t日本語、。😀é×") + ["\u3000"]), max_size=60)


@settings(max_examples=150, deadline=None)
@given(st.lists(TEXTS, min_size=1, max_size=5), st.integers(1, 4), st.sampled_from(["word", "char"]))
def test_simhash_matches_reference(texts, n, tok):
    got = simhash(texts, ngram=n, tokenizer=tok)
    assert got.dtype == np.uint64
    assert [int(x) for x in got] == [ref_simhash(t, n, tok) for t in texts]


def test_simhash_weights_and_feature_hash():
    texts = ["The cat sat on the mat", "the cat sat on a hat", "Dogs bark"]
    weights = {"the cat sat": 5.0, "sat on the": 0.5, "dogs bark": 2.0}
    got = simhash(texts, weights=weights)
    assert [int(x) for x in got] == [ref_simhash(t, 3, "word", weights) for t in texts]
    assert feature_hash("the cat sat") == ref_hash("the cat sat")
    assert int(simhash([""])[0]) == 0  # documented: no features -> 0
    # Near-identical texts get close fingerprints, unrelated ones far ones.
    a, b, c = simhash(["a long sentence about the weather in spring " * 3,
                       "a long sentence about the weather in spring " * 3 + "today",
                       "completely different words appear in this one"], tokenizer="char", ngram=4)
    assert hamming(a, b) < hamming(a, c)


def test_simhash_threads_and_numpy_input():
    rng = random.Random(0)
    texts = [" ".join(rng.choice(["alpha", "beta", "gamma", "delta"]) for _ in range(20)) for _ in range(200)]
    one = simhash(texts, threads=1)
    assert (simhash(np.array(texts), threads=2) == one).all()


def brute_pairs(h: np.ndarray, k: int) -> list[tuple[int, int]]:
    out = []
    for i in range(len(h)):
        d = np.bitwise_count(np.bitwise_xor(h[i + 1 :], h[i]))
        out.extend((i, i + 1 + int(j)) for j in np.nonzero(d <= k)[0])
    return sorted(out)


@pytest.mark.parametrize("k", [0, 1, 3, 6])
def test_near_duplicates_equal_brute_force(k):
    rng = np.random.default_rng(k)
    base = rng.integers(0, 2**63, size=1500, dtype=np.uint64) * np.uint64(2) + rng.integers(0, 2, 1500, dtype=np.uint64)
    near = base[:400].copy()
    for i in range(len(near)):  # plant copies with 0..7 flipped bits
        for b in rng.choice(64, size=int(rng.integers(0, 8)), replace=False):
            near[i] ^= np.uint64(1) << np.uint64(int(b))
    h = np.concatenate([base, near, base[:5]])  # exact duplicates too
    rng.shuffle(h)
    pairs = near_duplicates(h, max_hamming=k)
    assert pairs.dtype == np.int64
    assert [tuple(p) for p in pairs.tolist()] == brute_pairs(h, k)
    labels = near_duplicates(h, max_hamming=k, output="clusters")
    # Reference components by a plain union-find over the brute-force pairs.
    parent = list(range(len(h)))

    def find(x):
        while parent[x] != x:
            x = parent[x]
        return x

    for i, j in brute_pairs(h, k):
        ri, rj = find(i), find(j)
        if ri != rj:
            parent[max(ri, rj)] = min(ri, rj)
    assert labels.tolist() == [find(i) for i in range(len(h))]


def test_hamming():
    assert hamming(0, 2**64 - 1) == 64
    assert hamming(np.array([1, 3], dtype=np.uint64), np.array([0, 0], dtype=np.uint64)).tolist() == [1, 2]


def test_bloom_false_positive_rate_on_1m_keys():
    target = 0.01
    bf = BloomFilter(1_000_000, target)
    added = [f"key-{i}" for i in range(1_000_000)]
    bf.add_many(added)
    assert bf.contains_many(added[::97]).all()  # no false negatives
    probes = [f"other-{i}" for i in range(1_000_000)]
    rate = bf.contains_many(probes).mean()
    assert rate <= 1.5 * target, rate
    assert rate >= target / 1.5, rate  # sized for the target, not far below it either


def test_bloom_keys_and_serialisation():
    bf = BloomFilter(1000, 0.001)
    assert bf.add("apple") is True
    assert bf.add("apple") is False
    bf.add(b"apple")
    bf.add(42)
    bf.add_many(np.arange(100, 200, dtype=np.int64))
    assert "apple" in bf and b"apple" in bf and 42 in bf and 150 in bf
    assert bf.contains(np.int64(150))
    assert len(bf) == 103
    data = bf.to_bytes()
    bf2 = BloomFilter.from_bytes(data)
    assert bf2.to_bytes() == data
    assert (bf2.bits, bf2.hashes, bf2.capacity, len(bf2)) == (bf.bits, bf.hashes, bf.capacity, len(bf))
    keys = ["apple", "pear", 42, 43, b"apple", b"x"] + list(range(100, 220))
    assert bf2.contains_many(keys).tolist() == bf.contains_many(keys).tolist()


def test_bloom_bad_input():
    with pytest.raises(ConfigError):  # zero capacity
        BloomFilter(0, 0.01)
    with pytest.raises(ConfigError):  # rate of 0
        BloomFilter(10, 0.0)
    with pytest.raises(ConfigError):  # NaN rate
        BloomFilter(10, math.nan)
    bf = BloomFilter(10, 0.01)
    with pytest.raises(KernelInputError):  # a float is not a key
        bf.add(1.5)
    with pytest.raises(KernelInputError, match=r"keys\[1\]"):  # NaN inside a batch
        bf.add_many(["a", float("nan")])
    with pytest.raises(KernelInputError):  # float array
        bf.contains_many(np.array([1.0, 2.0]))
    with pytest.raises(KernelInputError):  # int beyond 64 bits
        bf.add(2**70)
    with pytest.raises(BloomFormatError):  # not a filter
        BloomFilter.from_bytes(b"definitely not a bloom filter")
    with pytest.raises(BloomFormatError):  # truncated
        BloomFilter.from_bytes(bf.to_bytes()[:-8])
    with pytest.raises(BloomFormatError):  # wrong type
        BloomFilter.from_bytes("MMKBLOOM")


def test_simhash_and_near_duplicates_bad_input():
    with pytest.raises(KernelInputError, match=r"texts\[1\]"):  # NaN inside a batch
        simhash(["ok", float("nan")])
    with pytest.raises(KernelInputError):  # a bare str
        simhash("just one text")
    with pytest.raises(ConfigError):  # ngram 0
        simhash(["a"], ngram=0)
    with pytest.raises(ConfigError):  # unknown tokenizer
        simhash(["a"], tokenizer="bpe")
    with pytest.raises(ConfigError):  # NaN weight
        simhash(["a"], weights={"a": math.nan})
    with pytest.raises(ConfigError):  # negative distance
        near_duplicates([1, 2], max_hamming=-1)
    with pytest.raises(KernelInputError):  # float fingerprints
        near_duplicates(np.array([1.0, 2.0]))
    with pytest.raises(KernelInputError):  # negative int fingerprint in a list
        near_duplicates([1, -2])
    with pytest.raises(ConfigError):  # unknown output
        near_duplicates([1, 2], output="graph")
