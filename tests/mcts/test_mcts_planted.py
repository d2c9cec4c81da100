"""Planted problems whose best path is known, searched with the paper's budget
(100 iterations, rollout 5, C = sqrt(2) unless stated)."""

from __future__ import annotations

import numpy as np
import pytest

from momoka.mcts import MCTS


def _planted_sets(n, seed, k=3):
    rng = np.random.default_rng(seed)
    return {r: set(rng.choice([x for x in range(n) if x != r], k, replace=False).tolist()) for r in range(n)}


def test_pair_mode_finds_a_planted_completion_first():
    # every root has 3 planted items with I = 1, all others 0; the first item of the
    # best path must be planted (chance level: 3/19)
    n, hits, total = 20, 0, 0
    for seed in range(3):
        planted = _planted_sets(n, seed)
        I = np.zeros((n, n))
        for r, s in planted.items():
            I[r, list(s)] = 1.0
        paths = MCTS(n, seed=seed).run_native(I).paths()
        hits += sum(int(p[0]) in planted[r] for r, p in enumerate(paths))
        total += n
    assert hits / total >= 0.9


def _chain_judge(chains):
    def judge(batch):
        out = []
        for prefix, cand in zip(batch.paths, batch.cand.tolist()):
            q = prefix.tolist() + [cand]
            out.append(float(q == chains[q[0]][: len(q)]))  # 1 iff the path follows the hidden chain
        return out

    return judge


def _chains(n, seed, length=3):
    rng = np.random.default_rng(seed)
    return {r: [r] + rng.choice([x for x in range(n) if x != r], length, replace=False).tolist() for r in range(n)}


def test_path_mode_recovers_hidden_chain():
    # eq. 7: the reward is 1 only for the next item of a hidden chain root -> a -> b -> c
    for n, c in ((6, np.sqrt(2)), (10, 0.5)):
        for seed in range(2):
            chains = _chains(n, seed)
            e = MCTS(n, reward="path", seed=seed, c=c)
            e.run(_chain_judge(chains), batch_size=512)
            for r, p in enumerate(e.paths()):
                assert p[:3].tolist() == chains[r][1:], (n, seed, r)


def test_native_dense_sparse_and_vector_rewards_agree():
    n = 15
    planted = _planted_sets(n, 4)
    I = np.zeros((n, n))
    for r, s in planted.items():
        I[r, list(s)] = 1.0
    dense = MCTS(n, seed=1).run_native(I)
    rows, cols = np.nonzero(I)
    indptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=n))])
    perm = np.random.default_rng(0).permutation(len(cols))  # unsorted columns within rows are fine
    order = np.argsort(rows[perm], kind="stable")
    sparse = MCTS(n, seed=1).run_native((I[rows, cols][perm][order], cols[perm][order], indptr))
    for a, b in zip(dense.paths(), sparse.paths()):
        assert a.tolist() == b.tolist()
    # a vector I[cand] is the same as a matrix with identical rows
    v = np.arange(n) % 3 == 0
    m1 = MCTS(n, seed=2).run_native(v.astype(float))
    m2 = MCTS(n, seed=2).run_native(np.tile(v.astype(float), (n, 1)))
    assert [p.tolist() for p in m1.paths()] == [p.tolist() for p in m2.paths()]
    assert [p.tolist() for p in m1.top_children(3)] == [p.tolist() for p in m2.top_children(3)]


def test_scipy_sparse_reward_matches_dense():
    sparse = pytest.importorskip("scipy.sparse")
    n = 12
    rng = np.random.default_rng(5)
    I = (rng.random((n, n)) < 0.25) * rng.random((n, n))
    a = MCTS(n, seed=3).run_native(I)
    for make in (sparse.csr_matrix, sparse.coo_matrix, sparse.csc_matrix):
        b = MCTS(n, seed=3).run_native(make(I))
        assert [p.tolist() for p in a.paths()] == [p.tolist() for p in b.paths()]
        assert [a.tree(i)["visits"].tolist() for i in range(n)] == [b.tree(i)["visits"].tolist() for i in range(n)]
