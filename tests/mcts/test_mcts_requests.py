"""Memoisation and deduplication of reward requests (ask/tell)."""

from __future__ import annotations

import numpy as np
import pytest

from momoka.mcts import MCTS


@pytest.mark.parametrize("n", [2, 5, 12, 30])
@pytest.mark.parametrize("parallel", [1, 4])
def test_pair_mode_requests_each_pair_at_most_once(n, parallel):
    rng = np.random.default_rng(n)
    I = (rng.random((n, n)) < 0.2).astype(float)
    e = MCTS(n, paragraph=np.arange(n) // 2, sentence=np.arange(n), parallel=parallel, seed=n)
    seen = []
    batch_sizes = []

    def judge(b):
        batch_sizes.append(len(b))
        seen.extend(b.pairs())
        assert np.all(b.path_id == -1)
        assert np.all(b.root != b.cand)
        return I[b.root, b.cand]

    e.run(judge, batch_size=37)
    assert len(seen) == len(set(seen))  # deduplicated within and across batches
    assert len(seen) <= n * (n - 1)
    assert e.stats()["requests"].sum() == len(seen)
    assert max(batch_sizes) <= 37
    assert e.done and (e.stats()["iterations"] == 100).all()


def test_path_mode_requests_each_prefix_candidate_once():
    n = 7
    e = MCTS(n, reward="path", seed=3, iterations=60)
    seen = []

    def judge(b):
        out = []
        for p, c in zip(b.paths, b.cand.tolist()):
            p = tuple(p.tolist())
            assert c not in p  # a path never repeats an item
            seen.append((p, c))
            out.append(float(sum(p) % 2))
        return out

    e.run(judge, batch_size=16)
    assert len(seen) == len(set(seen))
    assert e.stats()["requests"].sum() == len(seen)


def test_ask_returns_no_more_than_max_and_keeps_the_rest_queued():
    n = 10
    e = MCTS(n, seed=0)
    b1 = e.ask(3)
    assert len(b1) == 3
    b2 = e.ask(4)  # more requests, distinct from the first batch
    assert len(b2) == 4 and not set(b1.ids.tolist()) & set(b2.ids.tolist())
    e.tell(np.zeros(3), b1.ids)
    e.tell(np.ones(4), b2.ids)
    while not e.done:
        b = e.ask(1000)
        e.tell(np.zeros(len(b)))
    assert (e.stats()["iterations"] == 100).all()


def test_progress_callback_counts_answered_requests():
    n = 6
    seen = []
    e = MCTS(n, seed=1)
    e.run(lambda b: np.zeros(len(b)), batch_size=3, progress=seen.append)
    assert seen == sorted(seen) and seen[-1] == e.stats()["requests"].sum()
