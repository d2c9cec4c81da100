"""Trie and unique_prefix_lengths against plain-Python references."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from momoka.errors import ConfigError, KernelInputError
from momoka.kernels import Trie, unique_prefix_lengths


def ref_unique(seqs):
    out = []
    for s in seqs:
        for L in range(len(s) + 1):
            if sum(1 for t in seqs if t[:L] == s[:L]) == 1:
                out.append(L)
                break
        else:
            out.append(len(s))
    return out


def common_len(a, b):
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


WORDS = st.lists(st.text(alphabet="abé中😀", max_size=6), max_size=25)


@settings(max_examples=150, deadline=None)
@given(WORDS, st.lists(st.text(alphabet="abé中😀", max_size=7), max_size=10))
def test_trie_matches_set_reference(keys, queries):
    t = Trie()
    new = [t.insert(k) for k in keys]
    seen = set()
    assert new == [not (k in seen or seen.add(k)) for k in keys]
    assert len(t) == len(set(keys))
    for q in queries + keys:
        assert (q in t) == (q in seen)
        assert t.count_prefix(q) == sum(1 for k in seen if k.startswith(q))
        assert t.keys_with_prefix(q) == sorted(k for k in seen if k.startswith(q))
        assert t.longest_common_prefix(q) == max([common_len(q, k) for k in seen], default=0)
        pref = [k for k in seen if q.startswith(k)]
        assert t.longest_prefix(q) == (max(pref, key=len) if pref else None)
    assert t.contains_many(queries).tolist() == [q in seen for q in queries]
    assert t.keys_with_prefix("", limit=3) == sorted(seen)[:3]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.text(alphabet="ab中", max_size=5), max_size=20))
def test_unique_prefix_lengths_strings(seqs):
    assert unique_prefix_lengths(seqs).tolist() == ref_unique(seqs)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.lists(st.integers(0, 4), max_size=6), max_size=20))
def test_unique_prefix_lengths_token_ids(seqs):
    tuples = [tuple(s) for s in seqs]
    assert unique_prefix_lengths(seqs).tolist() == ref_unique(tuples)
    # numpy arrays and large ids are accepted as token sequences
    arrs = [np.array(s, dtype=np.int64) + 4_000_000_000 for s in seqs]
    assert unique_prefix_lengths(arrs).tolist() == ref_unique(tuples)


def test_unique_prefix_lengths_examples():
    # prefixes of others and duplicates report their full length; one item needs 0
    assert unique_prefix_lengths(["apple", "apricot", "banana", "app"]).tolist() == [4, 3, 1, 3]
    assert unique_prefix_lengths(["ab", "ab"]).tolist() == [2, 2]
    assert unique_prefix_lengths(["solo"]).tolist() == [0]
    assert unique_prefix_lengths([]).tolist() == []


def test_token_trie():
    t = Trie([[1, 2, 3], (1, 2), np.array([7, 8])])
    assert [1, 2] in t and (1, 2, 3) in t and [7, 8] in t and [1] not in t
    assert t.keys_with_prefix([1]) == [(1, 2), (1, 2, 3)]
    assert t.longest_prefix([1, 2, 9]) == (1, 2)
    assert t.longest_common_prefix([1, 2, 9]) == 2


def test_trie_bad_input():
    t = Trie(["abc"])
    with pytest.raises(KernelInputError):  # token key in a str trie
        t.insert([1, 2])
    with pytest.raises(KernelInputError):  # bytes key
        t.insert(b"abc")
    with pytest.raises(KernelInputError):  # NaN key
        Trie().insert(float("nan"))
    with pytest.raises(KernelInputError):  # negative token id
        Trie().insert([1, -1])
    with pytest.raises(KernelInputError):  # float token id
        Trie().insert([1, 2.5])
    with pytest.raises(KernelInputError, match=r"sequences\[1\]"):  # mixed kinds
        unique_prefix_lengths(["abc", [1, 2]])
    with pytest.raises(KernelInputError):  # a bare str
        unique_prefix_lengths("abc")
    with pytest.raises(ConfigError):  # negative limit
        t.keys_with_prefix("a", limit=-1)
