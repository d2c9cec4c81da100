"""ETS early-terminating beam search (methods/ets/beam.py) on a scripted policy and value.

References are plain Python written here: the unique-prefix stop point by
comparing token lists, the top-n expansion by scoring every candidate, and the
whole beam search by enumerating every evidence set (exhaustive beams) or by
plain greedy decoding (beam 1).
"""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from momoka.errors import ConfigError, InputError
from momoka.methods.ets.beam import SearchStats, beam_search, expand

END = 0
V = 6  # tokens 1..5 make sentences, 0 ends one


class ScriptedPolicy:
    """Sentences are strings of token ids ("3 1 2"); the state is the token tuple; log-probs are a fixed
    pseudo-random function of the state, so every expansion is reproducible and checkable."""

    end_id = END

    def __init__(self, seed: int = 0):
        self.seed = seed
        self.calls = 0

    def encode(self, text):
        return [int(t) for t in text.split()]

    def root(self, question, candidates):
        return ("q",)

    def extend(self, state, ids):
        return state + tuple(int(t) for t in ids)

    def logprobs(self, state):
        self.calls += 1
        rng = np.random.default_rng([self.seed, len(state), *[hash(s) % 1000 for s in state]])
        z = rng.normal(size=V) * 2
        return z - np.log(np.exp(z).sum())


def ref_unique_prefix(keys, i, remaining):
    """Shortest L with no other remaining key sharing keys[i][:L]."""
    others = [keys[j] for j in remaining if j != i]
    for L in range(len(keys[i]) + 1):
        if not any(o[:L] == keys[i][:L] for o in others):
            return L
    return len(keys[i])


def ref_expand(policy, state, keys, remaining, n):
    scored = []
    for i in remaining:
        u = ref_unique_prefix(keys, i, remaining)
        s = sum(policy.logprobs(state + tuple(keys[i][:t]))[keys[i][t]] for t in range(u))
        scored.append((-s, i))
    scored.sort()
    return [(i, -s) for s, i in scored[:n]]


def _keys(texts):
    return [tuple(int(t) for t in x.split()) + (END,) for x in texts]


sentences = st.lists(st.integers(1, 4), min_size=1, max_size=5).map(lambda xs: " ".join(map(str, xs)))


@settings(max_examples=150, deadline=None)
@given(st.lists(sentences, min_size=1, max_size=9, unique=True), st.integers(1, 4), st.integers(0, 10_000),
       st.booleans())
def test_expand_returns_only_candidates_and_matches_reference(texts, n, seed, et):
    """Random candidate sets, many of them token-prefixes of one another ("1 2" and "1 2 3"): every pick is a
    remaining candidate, picked once; the state after it holds exactly its tokens and the separator; tokens
    decoded equal the plain-Python unique-prefix length (early termination) or the whole key (without it);
    the picks and scores equal scoring every candidate by hand."""
    pol = ScriptedPolicy(seed)
    keys = _keys(texts)
    rng = random.Random(seed)
    remaining = sorted(rng.sample(range(len(texts)), rng.randint(1, len(texts))))
    root = ("q", 9)
    stats = SearchStats()
    got = expand(pol, root, keys, remaining, n, early_termination=et, stats=stats)
    idx = [g[0] for g in got]
    assert len(idx) == len(set(idx)) == min(n, len(remaining))
    assert set(idx) <= set(remaining)
    gen_total = 0
    for i, _score, state, gen in got:
        assert state == root + keys[i]
        want = ref_unique_prefix(keys, i, remaining) if et else len(keys[i])
        assert gen == want
        gen_total += gen
    assert stats.tokens_generated == gen_total
    ref = ref_expand(pol, root, keys, remaining, n)
    assert idx == [i for i, _ in ref]
    assert [g[1] for g in got] == pytest.approx([s for _, s in ref])


def test_stop_point_on_hand_made_prefixes():
    """Candidates "1 2", "1 2 3", "1 3", "2": with the separator (0) no key is a prefix of another; the stop
    points are 3 ("1 2 0" vs "1 2 3"), 3, 2 and 1, checked by the reference and by the tokens decoded."""
    texts = ["1 2", "1 2 3", "1 3", "2"]
    keys = _keys(texts)
    assert [ref_unique_prefix(keys, i, range(4)) for i in range(4)] == [3, 3, 2, 1]
    pol = ScriptedPolicy(3)
    got = expand(pol, (), keys, range(4), 4)
    assert sorted((i, g) for i, _, _, g in got) == [(0, 3), (1, 3), (2, 2), (3, 1)]
    # once "1 2 3" is taken, "1 2" is identified by "1 2" ("1" is shared with "1 3")
    got = expand(pol, (), keys, [0, 2, 3], 3)
    assert sorted((i, g) for i, _, _, g in got) == [(0, 2), (2, 2), (3, 1)]
    # a single remaining candidate needs no decoding at all
    assert [g for *_, g in expand(pol, (), keys, [2], 1)] == [0]


def _value_table(n, seed):
    rng = random.Random(seed)
    table = {}
    for r in range(1, n + 1):
        for c in itertools.combinations(range(n), r):
            table[c] = rng.random()
    return table


@pytest.mark.parametrize("seed", range(12))
def test_exhaustive_beams_equal_brute_force(seed):
    """With expansion and beam at least the number of candidates, the search scores every evidence set of up to
    max_depth sentences, so it must return the best of all of them (enumerated here with itertools)."""
    rng = random.Random(seed)
    texts = sorted({" ".join(str(rng.randint(1, 4)) for _ in range(rng.randint(1, 4))) for _ in range(6)})
    n = len(texts)
    table = _value_table(n, seed)
    depth = rng.randint(1, 3)

    def value(q, ev):
        return table[tuple(sorted(texts.index(e) for e in ev))]

    res = beam_search("q", texts, ScriptedPolicy(seed), value, expansion=n, beam=10 ** 4, max_depth=depth)
    best = max((v, c) for c, v in table.items() if len(c) <= depth)
    assert res.value == best[0]
    assert res.path == best[1]
    assert res.stats.value_calls == sum(1 for c in table if len(c) <= depth)


@pytest.mark.parametrize("seed", range(12))
def test_beam_one_is_greedy_decoding(seed):
    """B1 = B2 = 1: the policy's best sentence (by the reference expansion) is appended at every depth; the
    answer is the best-valued prefix of that one path."""
    rng = random.Random(100 + seed)
    texts = sorted({" ".join(str(rng.randint(1, 5)) for _ in range(rng.randint(1, 5))) for _ in range(8)})
    n = len(texts)
    table = _value_table(n, seed)
    pol = ScriptedPolicy(seed)
    keys = _keys(texts)

    def value(q, ev):
        return table[tuple(sorted(texts.index(e) for e in ev))]

    res = beam_search("q", texts, ScriptedPolicy(seed), value, expansion=1, beam=1, max_depth=4)
    state, path, best = ("q",), (), (float("-inf"), ())
    for _ in range(min(4, n)):
        remaining = [i for i in range(n) if i not in path]
        (i, _s), = ref_expand(pol, state, keys, remaining, 1)
        path += (i,)
        state = state + keys[i]
        v = table[tuple(sorted(path))]
        if v > best[0]:
            best = (v, tuple(sorted(path)))
    assert (res.value, res.path) == best


@pytest.mark.parametrize("seed", range(8))
def test_early_termination_changes_cost_not_result(seed):
    """The same search with and without early termination returns the same path and scores the same sets; the
    tokens decoded with it are fewer (here every candidate is 4-6 tokens long and they differ early)."""
    rng = random.Random(200 + seed)
    texts = sorted({" ".join(str(rng.randint(1, 5)) for _ in range(rng.randint(4, 6))) for _ in range(10)})
    table = _value_table(len(texts), seed)

    def value(q, ev):
        return table[tuple(sorted(texts.index(e) for e in ev))]

    a = beam_search("q", texts, ScriptedPolicy(seed), value, expansion=3, beam=2, max_depth=3)
    b = beam_search("q", texts, ScriptedPolicy(seed), value, expansion=3, beam=2, max_depth=3,
                    early_termination=False)
    assert a.path == b.path and a.value == b.value and a.scored == b.scored
    assert a.stats.tokens_generated < b.stats.tokens_generated
    assert a.stats.sentences_decoded == b.stats.sentences_decoded


def test_duplicates_are_one_candidate():
    """Two identical candidate texts: only the first can be picked, so no path holds both."""
    texts = ["1 2", "1 2", "3"]
    res = beam_search("q", texts, ScriptedPolicy(1), lambda q, ev: len(ev), expansion=3, beam=3, max_depth=3)
    assert res.path == (0, 2)


def test_bad_input():
    """Sizes that are not positive ints, no candidates, and a candidate holding the separator token are refused."""
    pol = ScriptedPolicy()
    with pytest.raises(ConfigError):
        beam_search("q", ["1"], pol, lambda q, e: 0.0, expansion=0)
    with pytest.raises(ConfigError):
        beam_search("q", ["1"], pol, lambda q, e: 0.0, beam=True)
    with pytest.raises(InputError):
        beam_search("q", [], pol, lambda q, e: 0.0)
    with pytest.raises(InputError, match="separator"):
        beam_search("q", ["1 0 2"], pol, lambda q, e: 0.0)


def test_progress_counts_the_nodes_expanded(capsys, monkeypatch):
    """Six candidates, B1 = B2 = 2, depth 3: the root, then two nodes at each of depths 1 and 2 are expanded
    (5 nodes, counted by hand); with a line at every update each count is shown once on stderr, and
    ``progress=False`` or ``MOMOKA_PROGRESS=0`` silence it."""
    monkeypatch.delenv("MOMOKA_PROGRESS", raising=False)
    monkeypatch.setenv("MOMOKA_PROGRESS_INTERVAL", "0")
    texts = ["1", "2", "3", "4", "5", "1 2"]
    beam_search("q", texts, ScriptedPolicy(3), lambda q, ev: -len(ev), expansion=2, beam=2, max_depth=3)
    lines = capsys.readouterr().err.splitlines()
    assert [ln.split(",")[0] for ln in lines] == [f"ets beam search: {i}/5 nodes ({20 * i}%)" for i in range(1, 6)]
    assert "depth=1" in lines[0] and "depth=3" in lines[-1]
    beam_search("q", texts, ScriptedPolicy(3), lambda q, ev: 0.0, expansion=2, beam=2, max_depth=3, progress=False)
    monkeypatch.setenv("MOMOKA_PROGRESS", "0")
    beam_search("q", texts, ScriptedPolicy(3), lambda q, ev: 0.0, expansion=2, beam=2, max_depth=3)
    assert capsys.readouterr().err == ""
