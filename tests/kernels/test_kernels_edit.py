"""Levenshtein and locate against plain references (O(nm) DP, brute force, rapidfuzz)."""

from __future__ import annotations

import math
import random
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from momoka.errors import ConfigError, KernelInputError
from momoka.kernels import Locator, Span, levenshtein, levenshtein_cdist, levenshtein_pairwise, locate, locate_many

rapidfuzz = pytest.importorskip("rapidfuzz")
from rapidfuzz.distance import Levenshtein as RFLev  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench" / "micro"))
from _kernels_data import apply_edits  # noqa: E402  (the same random edits the locate benchmark makes)


def dp_levenshtein(a: str, b: str) -> int:
    """Textbook O(nm) dynamic programme (MoC section 3.2.4)."""
    prev = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        cur = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cur[j] = min(prev[j - 1] + (a[i - 1] != b[j - 1]), prev[j] + 1, cur[j - 1] + 1)
        prev = cur
    return prev[-1]


def brute_locate(pattern: str, text: str, lo: int = 0, hi: int | None = None):
    """Every substring, smallest (distance, start, end)."""
    hi = len(text) if hi is None else hi
    best = None
    for s in range(lo, hi + 1):
        for e in range(s, hi + 1):
            key = (dp_levenshtein(pattern, text[s:e]), s, e)
            if best is None or key < best:
                best = key
    return best


# Small alphabets mixing 1-, 2- and 4-byte code points so str kinds differ.
ALPHA = st.sampled_from(["ab", "abc", "aé", "a中b", "x😀y", "abcdefgh"])


@st.composite
def two_strings(draw, max_len=40):
    alpha = draw(ALPHA)
    a = draw(st.text(alphabet=alpha, max_size=max_len))
    b = draw(st.text(alphabet=draw(ALPHA) if draw(st.booleans()) else alpha, max_size=max_len))
    return a, b


@settings(max_examples=300, deadline=None)
@given(two_strings(), st.one_of(st.none(), st.integers(0, 12)))
def test_levenshtein_matches_dp(ab, k):
    a, b = ab
    d = dp_levenshtein(a, b)
    assert levenshtein(a, b) == d
    got = levenshtein(a, b, max_distance=k)
    assert got == (d if k is None else min(d, k + 1))


@settings(max_examples=120, deadline=None)
@given(st.text(alphabet="acgt", min_size=0, max_size=400), st.text(alphabet="acgt", min_size=0, max_size=400),
       st.one_of(st.none(), st.integers(0, 200)))
def test_levenshtein_long_strings_match_rapidfuzz(a, b, k):
    # Long strings exercise the multi-block bit-vector path and its early exit.
    d = RFLev.distance(a, b)
    assert levenshtein(a, b) == d
    assert levenshtein(a, b, k) == (d if k is None else min(d, k + 1))


def test_levenshtein_known_values():
    assert levenshtein("kitten", "sitting") == 3
    assert levenshtein("", "") == 0
    assert levenshtein("", "abc") == 3
    assert levenshtein("日本語", "日本") == 1
    assert levenshtein("flaw", "lawn", max_distance=0) == 1


def test_batch_levenshtein_matches_rapidfuzz():
    rng = random.Random(3)
    a = ["".join(rng.choice("abcé中") for _ in range(rng.randint(0, 90))) for _ in range(60)]
    b = ["".join(rng.choice("abcé中") for _ in range(rng.randint(0, 90))) for _ in range(60)]
    pw = levenshtein_pairwise(a, b)
    assert pw.dtype == np.int64
    assert pw.tolist() == [RFLev.distance(x, y) for x, y in zip(a, b)]
    cd = levenshtein_cdist(np.array(a[:10]), b[:7], max_distance=20)
    assert cd.shape == (10, 7)
    assert cd.tolist() == [[min(RFLev.distance(x, y), 21) for y in b[:7]] for x in a[:10]]


@st.composite
def pattern_text(draw):
    alpha = draw(st.sampled_from(["ab", "abc", "aé中", "x😀y", "abcdefghij"]))
    text = draw(st.text(alphabet=alpha, max_size=22))
    pattern = draw(st.text(alphabet=alpha, max_size=7))
    return pattern, text


@settings(max_examples=250, deadline=None)
@given(pattern_text(), st.one_of(st.none(), st.integers(0, 4)))
def test_locate_matches_brute_force(pt, k):
    pattern, text = pt
    d, s, e = brute_locate(pattern, text)
    got = locate(pattern, text, max_distance=k, index=False)
    if k is not None and d > k:
        assert got is None
    else:
        assert got == Span(s, e, d)


@settings(max_examples=120, deadline=None)
@given(pattern_text(), st.integers(-30, 30), st.one_of(st.none(), st.integers(-30, 30)))
def test_locate_window_follows_slice_rules(pt, start, end):
    pattern, text = pt
    lo, hi, _ = slice(start, end).indices(len(text))
    hi = max(lo, hi)
    d, s, e = brute_locate(pattern, text, lo, hi)
    assert locate(pattern, text, start=start, end=end, index=False) == Span(s, e, d)


def test_locate_empty_and_long_pattern_results():
    # Documented results: empty pattern -> empty match at start with distance 0;
    # empty text -> Span(0, 0, len(pattern)); a pattern longer than the text
    # is aligned all the same.
    assert locate("", "abc") == Span(0, 0, 0)
    assert locate("", "abc", start=2) == Span(2, 2, 0)
    assert locate("abc", "") == Span(0, 0, 3)
    assert locate("abc", "", max_distance=2) is None
    assert locate("abcdef", "abd") == Span(0, 3, 3)
    d, s, e = brute_locate("abcdef", "abd")
    assert locate("abcdef", "abd") == Span(s, e, d)


def test_locate_leftmost_tie():
    # "ab" occurs twice exactly: the leftmost wins; with a 1-edit tie the
    # smallest start, then the smallest end.
    assert locate("ab", "xxabyyab") == Span(2, 4, 0)
    d, s, e = brute_locate("abc", "abxc")
    assert locate("abc", "abxc") == Span(s, e, d) == Span(0, 2, 1)


@pytest.mark.parametrize("alphabet", ["abcdefghij klmnop", "的一是了我不人在他有这个上们来到", "ab"])
def test_locator_equals_full_scan(alphabet):
    # The indexed path must give exactly the full-scan answer (which the brute
    # force tests above pin down), on texts long enough to use the index.
    rng = random.Random(7)
    text = "".join(rng.choice(alphabet) for _ in range(6000))
    loc = Locator(text)
    patterns, bounds = [], []
    for _ in range(80):
        m = rng.choice([8, 20, 40, 90])
        s = rng.randrange(len(text) - m)
        patterns.append(apply_edits(text[s : s + m], rng.randint(0, m // 6), rng, alphabet))
        bounds.append(rng.choice([None, 0, 2, 5]))
    patterns.append("".join(rng.choice(alphabet) for _ in range(30)))  # unrelated
    bounds.append(None)
    for p, k in zip(patterns, bounds):
        want = locate(p, text, max_distance=k, index=False)
        assert loc.locate(p, max_distance=k) == want
        if want is not None:
            assert RFLev.distance(p, text[want.start : want.end]) == want.distance
    many = loc.locate_many(patterns, max_distance=5, start=100, end=5000)
    for row, p in zip(many.tolist(), patterns):
        want = locate(p, text, max_distance=5, start=100, end=5000, index=False)
        assert row == (list(want) if want is not None else [-1, -1, -1])


def test_locate_many_and_cached_index_agree(shared_data):
    from pathlib import Path

    import json

    with open(Path(shared_data) / "squad_v1_dev_half_a" / "documents.jsonl", encoding="utf-8") as f:
        text = json.loads(f.readline())["text"]
    rng = random.Random(1)
    pats = []
    for _ in range(30):
        s = rng.randrange(len(text) - 60)
        pats.append(apply_edits(text[s : s + 60], 5, rng, "abcdefghijklmnopqrstuvwxyz "))
    full = [locate(p, text, index=False) for p in pats]
    cached = [locate(p, text) for p in pats]  # builds the index on the second call
    assert cached == full
    assert [tuple(r) for r in locate_many(pats, text).tolist()] == [tuple(x) for x in full]


# --- bad input --------------------------------------------------------------


def test_bad_bounds_raise_config_error():
    with pytest.raises(ConfigError):  # max_distance below zero
        levenshtein("a", "b", max_distance=-1)
    with pytest.raises(ConfigError):  # NaN as a bound
        locate("a", "abc", max_distance=math.nan)
    with pytest.raises(ConfigError):  # float bound
        locate("a", "abc", max_distance=1.5)
    with pytest.raises(ConfigError):  # non-int window
        locate("a", "abc", start="1")
    with pytest.raises(ConfigError):  # bad q for the index
        Locator("abc", q=0)


def test_non_str_input_raises_kernel_input_error():
    with pytest.raises(KernelInputError):  # bytes instead of str
        levenshtein(b"ab", "ab")
    with pytest.raises(KernelInputError, match="NaN"):  # NaN in the text slot
        locate("a", math.nan)
    with pytest.raises(KernelInputError, match=r"b\[1\]"):  # NaN inside a batch names the index
        levenshtein_pairwise(["a", "b"], ["a", float("nan")])
    with pytest.raises(KernelInputError, match=r"patterns\[2\]"):  # None inside a batch
        locate_many(["a", "b", None], "abcabc")
    with pytest.raises(KernelInputError):  # mismatched batch lengths
        levenshtein_pairwise(["a"], ["a", "b"])
    with pytest.raises(KernelInputError):  # a bare str where a batch is expected
        levenshtein_cdist("abc", ["a"])
