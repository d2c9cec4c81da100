"""Relevance of composites and the distinct-chunk metrics, computed by hand."""

from __future__ import annotations

import pytest
from momoka.eval import evaluate_retrieval
from momoka.eval.datasets import Question
from momoka.methods.base import Item, Member, Result


def q(gold):
    return Question("q1", "d", "?", (), tuple(gold))


# chunks of document d: id -> span
SPANS = {0: ("d", 0, 10), 1: ("d", 10, 20), 2: ("d", 20, 30), 3: ("d", 30, 40), 4: ("d", 40, 50)}


def res(ids, rank):
    return Item(tuple(Member(i, *SPANS[i], text="x" * 10) for i in ids), 1.0 / rank, rank, {"retriever": "x"})


def test_composite_relevant_when_any_member_is():
    # gold evidence inside chunk 3 only
    gold = [("d", 32, 35)]
    results = Result("q", (res([0, 3], 1), res([1], 2), res([3], 3)), "x")
    items = {"q1": results.spans()}
    assert items["q1"] == [[SPANS[0], SPANS[3]], [SPANS[1]], [SPANS[3]]]
    rep = evaluate_retrieval(items, [q(gold)], ks=(1, 3))
    m = rep.means
    # item view: rank 1 is a composite holding chunk 3 -> relevant; rank 2 not; rank 3 relevant.
    assert m["precision@1"] == 1.0 and m["mrr@1"] == 1.0 and m["recall@1"] == 1.0
    assert m["precision@3"] == pytest.approx(2 / 3)
    assert m["f1@3"] == pytest.approx(2 * (2 / 3) * 1 / (2 / 3 + 1))
    # distinct chunks in rank order: 0, 3, 1 (3 repeated at rank 3 is dropped)
    flat = [[m.span] for m in results.distinct_chunks(3)]
    assert flat == [[SPANS[0]], [SPANS[3]], [SPANS[1]]]
    rep = evaluate_retrieval({"q1": flat}, [q(gold)], ks=(1, 3))
    m = rep.means
    assert m["precision@1"] == 0.0 and m["recall@1"] == 0.0 and m["mrr@1"] == 0.0
    assert m["precision@3"] == pytest.approx(1 / 3) and m["mrr@3"] == pytest.approx(1 / 2)
    assert m["recall@3"] == 1.0
    # eq. 6 sums over k = 1, 3
    assert rep.sums["precision"] == pytest.approx(1 / 3)
    assert rep.sums["mrr"] == pytest.approx(0.5)


def test_two_units_recall_and_span_recall():
    # two gold units: in chunk 1 (10 chars, all of it) and in chunk 4 (5 chars)
    gold = [("d", 10, 20), ("d", 40, 45)]
    results = Result("q", (res([1, 2], 1), res([0], 2)), "x")
    rep = evaluate_retrieval({"q1": results.spans()}, [q(gold)], ks=(1, 2))
    assert rep.means["recall@1"] == 0.5  # one unit of two touched
    assert rep.means["span_recall@2"] == pytest.approx(10 / 15)  # covered chars / gold chars
    assert rep.means["precision@2"] == 0.5
