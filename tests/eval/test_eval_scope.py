"""MC-indexing's answer-scope recall, the k = 1.5 schedule and the chunking error, against hand-computed values."""

from __future__ import annotations

import pytest

from momoka.errors import InputError
from momoka.eval.datasets import Question
from momoka.eval.scope import chunking_error, evaluate_scope_recall, k_schedule, scope_recall

#        0         1         2         3         4
#        0123456789012345678901234567890123456789012345
TEXT = "alpha beta gamma delta epsilon zeta eta theta iota"
TEXTS = {"d": TEXT}
GOLD = [("d", 6, 35)]  # beta gamma delta epsilon zeta: 5 tokens


def test_scope_recall_sums_token_overlaps():
    # the paper's example shape: three chunks covering 1, 2 and 0 of the 5 scope tokens -> 3/5
    chunks = [("d", 0, 10), ("d", 17, 29), ("d", 40, 50)]  # "alpha beta", "delta epsilon", "theta iota"
    assert scope_recall(chunks, GOLD, TEXTS) == pytest.approx(3 / 5)
    # a chunk cutting a token in the middle still overlaps it; a chunk of another document counts nothing
    assert scope_recall([("d", 8, 12), ("e", 0, 50)], GOLD, TEXTS) == pytest.approx(2 / 5)
    assert scope_recall([], GOLD, TEXTS) == 0.0
    # "any": the best of alternative units; "all": pooled tokens
    two = [("d", 0, 5), ("d", 41, 50)]  # alpha | theta iota
    hits = [("d", 0, 5)]
    assert scope_recall(hits, two, TEXTS, mode="any") == 1.0
    assert scope_recall(hits, two, TEXTS, mode="all") == pytest.approx(1 / 3)
    with pytest.raises(InputError):
        scope_recall(hits, [], TEXTS)
    with pytest.raises(InputError):
        scope_recall(hits, GOLD, {})


def test_k_schedule_reads_one_and_a_half_as_half_one_half_two():
    assert k_schedule(1.5, 5) == [1, 2, 1, 2, 1]
    assert k_schedule(3, 2) == [3, 3]
    with pytest.raises(InputError):
        k_schedule(1.25, 2)
    with pytest.raises(InputError):
        k_schedule(0, 1)


def test_evaluate_scope_recall_with_a_fixed_ranking():
    # every question gets the same ranking: chunk 1 covers 2 scope tokens, chunk 2 covers the other 3
    ranking = [("d", 0, 16), ("d", 17, 35), ("d", 36, 50)]
    qs = [Question(f"q{i}", "d", "?", ("x",), tuple(GOLD)) for i in range(4)] + \
        [Question("none", "d", "?", ("x",), ())]
    calls = []

    def retrieve(questions, k):
        calls.append(k)
        return [ranking[:k] for _ in questions]

    rep = evaluate_scope_recall(retrieve, qs, TEXTS, ks=(1.5, 3))
    assert rep["n_questions"] == 4
    assert rep["recall@1.5"] == pytest.approx((0.4 + 1.0) / 2)  # k=1 -> 2/5, k=2 -> 5/5
    assert rep["returned@1.5"] == 1.5 and rep["recall@3"] == 1.0
    assert sorted(calls) == [1, 2, 3]


def test_chunking_error_counts_cut_and_lost_units():
    qs = [Question("a", "d", "?", ("x",), (("d", 6, 16),)),    # beta gamma: inside chunk 0-16
          Question("b", "d", "?", ("x",), (("d", 11, 22),)),   # gamma delta: cut at 16/17
          Question("c", "d", "?", ("x",), (("d", 41, 50),))]   # theta iota: in no chunk (dropped)
    rep = chunking_error({"d": [(0, 16), (17, 35)]}, qs)
    assert rep == {"units": 3, "contained": 1, "lost": 1, "error": pytest.approx(2 / 3)}
