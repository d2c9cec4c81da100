"""Momoka-Trail candidate sets, reranking texts and the distinct-chunk view, against hand-computed cases."""

from __future__ import annotations

import random

from momoka.methods.base import Item, Member, Result
from momoka.methods.momoka.trail import SEPARATOR, build_candidates, candidate_text


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


def _member(c):
    return Member(c, "d", c * 10, c * 10 + 5, f"chunk {c}")


def _res(ids, rank):
    return Item(tuple(_member(c) for c in ids), 1.0 / rank, rank, {"retriever": "x"})


def test_distinct_chunks_by_hand():
    r = Result("q", (_res([3, 1], 1), _res([1], 2), _res([4, 3, 9], 3)), "x")
    assert [m.chunk_id for m in r.distinct_chunks()] == [3, 1, 4, 9]
    assert [m.chunk_id for m in r.distinct_chunks(3)] == [3, 1, 4]
    assert [m.span for m in r.distinct_chunks(2)] == [("d", 30, 35), ("d", 10, 15)]
    # a chunk repeated inside one item counts once
    assert [m.chunk_id for m in Result("q", (_res([2, 2], 1), _res([5], 2)), "x").distinct_chunks()] == [2, 5]
    # members that are not stored chunks (id -1, e.g. refined sentences) are told apart by their span
    s1, s2 = Member(-1, "d", 0, 4, "abcd"), Member(-1, "d", 5, 9, "efgh")
    r = Result("q", (Item((s1, s2), 1.0, 1), Item((s1,), 0.5, 2), Item((_member(7),), 0.2, 3)), "x")
    assert [m.span for m in r.distinct_chunks()] == [("d", 0, 4), ("d", 5, 9), ("d", 70, 75)]
