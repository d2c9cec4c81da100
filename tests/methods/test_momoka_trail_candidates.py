"""Momoka-Trail candidate sets, reranking texts and the distinct-chunk view, against hand-computed cases."""

from __future__ import annotations

import random

from momoka.methods.momoka.trail import (
    SEPARATOR,
    TrailResult,
    build_candidates,
    candidate_text,
    distinct_chunk_items,
)


def members(cands):
    return [c.members for c in cands]


def test_candidates_by_hand():
    paths = {1: [2, 3], 5: [3]}
    got = build_candidates([1, 5], lambda c: paths.get(c, []))
    # chunk 1: itself, with its full path, then node 2, pair (1, 2), node 3, pair (1, 3);
    # chunk 5: itself, (5, 3) as full path; node 3 is already there and the pair (5, 3) equals the full path.
    assert members(got) == [(1,), (1, 2, 3), (2,), (1, 2), (3,), (1, 3), (5,), (5, 3)]
    assert [c.kind for c in got] == ["chunk", "full_path", "node", "pair", "node", "pair", "chunk", "full_path"]
    assert [c.source for c in got] == [1, 1, 1, 1, 1, 1, 5, 5]


def test_candidates_dedup_across_retrieved_chunks():
    # 2 is retrieved and is also a node of 1's path: (2,) appears once, as 1's node (first occurrence).
    paths = {1: [2], 2: [1]}
    got = build_candidates([1, 2], lambda c: paths.get(c, []))
    assert members(got) == [(1,), (1, 2), (2,), (2, 1)]
    assert [c.kind for c in got] == ["chunk", "full_path", "node", "full_path"]


def test_candidates_drop_root_and_repeats_in_path():
    # a path holding the root itself and a repeated node (bad input a store could hold): both ignored
    got = build_candidates([4], lambda c: [4, 6, 6])
    assert members(got) == [(4,), (4, 6), (6,)]


def test_candidates_without_path():
    assert members(build_candidates([7, 8], lambda c: [])) == [(7,), (8,)]


def _reference(initial, paths):
    """Plain reference: the set of member tuples Algorithm 1 produces."""
    out = set()
    for c in initial:
        p = [x for x in dict.fromkeys(paths.get(c, [])) if x != c]
        out.add((c,))
        if p:
            out.add((c, *p))
        for x in p:
            out.add((x,))
            out.add((c, x))
    return out


def test_candidates_random_against_reference():
    rng = random.Random(7)
    for _ in range(200):
        n = rng.randint(1, 12)
        paths = {i: rng.sample(range(n), rng.randint(0, min(5, n))) for i in range(n)}
        initial = rng.sample(range(n), rng.randint(1, n))
        cands = build_candidates(initial, paths.__getitem__)
        got = members(cands)
        assert len(got) == len(set(got))  # deduplicated
        assert set(got) == _reference(initial, paths)
        # candidates come grouped by retrieved chunk, in the retriever's rank order
        rank = {c: i for i, c in enumerate(initial)}
        srcs = [rank[c.source] for c in cands]
        assert srcs == sorted(srcs)


def test_candidate_text_title_once():
    assert candidate_text(["a b", "c"], "T") == "T\n\na b\n\nc"
    assert candidate_text(["a b", "c"], None) == "a b\n\nc"
    assert candidate_text(["x"], "  ") == "x"  # a blank title is no title
    assert SEPARATOR == "\n\n"


def _res(ids, rank):
    return TrailResult(tuple(ids), tuple(("d", i * 10, i * 10 + 5) for i in ids), 1.0 / rank, rank, "", "x", ids[0])


def test_distinct_chunk_items_by_hand():
    rs = [_res([3, 1], 1), _res([1], 2), _res([4, 3, 9], 3)]
    assert distinct_chunk_items(rs) == [3, 1, 4, 9]
    assert distinct_chunk_items(rs, 3) == [3, 1, 4]
    span = lambda c: ("d", c * 10, c * 10 + 5)
    assert distinct_chunk_items(rs, 2, span) == [[("d", 30, 35)], [("d", 10, 15)]]
    assert distinct_chunk_items([[2, 2], [5]], None) == [2, 5]
