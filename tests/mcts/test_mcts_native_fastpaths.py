"""The native run's shortcuts against the plain-Python reference (tests/_oracles/mcts.py).

The engine keeps the children of the node it last expanded marked between
trajectories, copies a root's dense reward row when the search reads about as
many entries as the row has, and looks the structural step-reward terms up in
per-distance tables (computed beyond 65536 positions). Each test builds a
problem where one shortcut is taken (or deliberately not) and checks the
trees node for node against the reference, which has none of them.
"""

from __future__ import annotations

import numpy as np
import pytest

from _oracles.mcts import compare as _compare
from momoka.mcts import MCTS


def _refs(ref, n, roots, I, **kw):
    return [ref.ReferenceMCTS(n, r, lambda ctx, c: I[ctx, c], **kw).run() for r in roots]


@pytest.mark.parametrize("cfg", [dict(), dict(parallel=3), dict(expansion="neighbors"),
                                 dict(expansion="neighbors", parallel=2, backup="mean")])
def test_wide_nodes_expanded_many_times_match_reference(ref, cfg):
    # Tried: 60 items, 150 iterations, so the root and its children are expanded again and
    # again (the cached children marks are reused and extended) and trees of other roots are
    # built in between on 2 threads; a dense neighbour graph for the neighbours mode.
    n, roots = 60, [0, 17, 59]
    rng = np.random.default_rng(5)
    I = (rng.random((n, n)) < 0.2).astype(float)
    para, sent = np.arange(n) // 4, np.arange(n)
    kw = dict(iterations=150, seed=9, **cfg)
    extra, rextra = dict(paragraph=para, sentence=sent), dict(paragraph=para.tolist(), sentence=sent.tolist())
    if cfg.get("expansion") == "neighbors":
        nbrs = [sorted(set(rng.choice(n, size=25, replace=False).tolist()) - {i}) for i in range(n)]
        indptr = np.concatenate([[0], np.cumsum([len(x) for x in nbrs])])
        indices = np.array([j for x in nbrs for j in x], dtype=np.int64)
        extra["graph"] = (indptr, indices)
        rextra["neighbors"] = nbrs
    eng = MCTS(n, roots=roots, **kw, **extra).run_native(I, threads=2)
    _compare(eng, _refs(ref, n, roots, I, **kw, **rextra), 5)


def test_dense_row_read_in_place_when_the_search_is_short(ref):
    # Tried: 50 items but 2 iterations of 1 step, too few reads for the row copy to pay off,
    # so rewards come from the matrix itself; the trees must not differ.
    n = 50
    I = np.random.default_rng(2).random((n, n))
    kw = dict(iterations=2, rollout_len=1, seed=4)
    eng = MCTS(n, paragraph=np.arange(n), sentence=np.arange(n), **kw).run_native(I)
    _compare(eng, _refs(ref, n, range(n), I, paragraph=list(range(n)), sentence=list(range(n)), **kw), 1)


def test_positions_beyond_the_distance_table_match_reference(ref):
    # Tried: paragraph positions 40000 apart (a span past the 65536-entry table, so most
    # distances are computed) and sentence positions inside it.
    n = 9
    I = (np.random.default_rng(3).random((n, n)) < 0.4).astype(float)
    para, sent = np.arange(n) * 40000, np.arange(n) * 3
    kw = dict(iterations=30, seed=1)
    eng = MCTS(n, paragraph=para, sentence=sent, **kw).run_native(I)
    _compare(eng, _refs(ref, n, range(n), I, paragraph=para.tolist(), sentence=sent.tolist(), **kw), 5)
    # the step reward itself, by hand: (I + 3 / (|dp| + 1) + 2 / (|ds| + 1)) / (1 + 3 + 2)
    for root, cand in [(0, 1), (0, 8), (4, 4), (8, 2)]:
        want = (0.5 + 3.0 / (abs(para[root] - para[cand]) + 1.0) + 2.0 / (abs(sent[root] - sent[cand]) + 1.0)) / 6.0
        assert eng.step_reward(root, cand, 0.5) == want
