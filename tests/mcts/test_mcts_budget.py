"""Budgets: iterations, max depth, path cap, wall-clock cap."""

from __future__ import annotations

import time

import numpy as np

from momoka.mcts import MCTS


def test_iterations_and_max_depth():
    n = 9
    e = MCTS(n, iterations=70, max_depth=2, rollout_len=3).run_native(np.ones((n, n)))
    for i in range(n):
        t = e.tree(i)
        assert t["depth"].max() <= 2
        assert t["visits"][0] == 70  # every iteration passes through the root
        # visits are consistent: a node's visits are its own rollouts plus its children's
        for k in range(len(t["item"])):
            kids = t["visits"][t["parent"] == k].sum()
            assert t["visits"][k] >= kids
    assert all(len(p) <= 2 for p in e.paths())
    e = MCTS(n, iterations=0)
    assert e.done and all(len(p) == 0 for p in e.paths())


def test_a_path_never_repeats_an_item():
    n = 6
    e = MCTS(n, iterations=300, rollout_len=6, path_cap=10).run_native(np.ones((n, n)))
    for i, r in enumerate(e.roots):
        t = e.tree(i)
        for k in range(len(t["item"])):
            items, j = [], k
            while j >= 0:
                items.append(int(t["item"][j]))
                j = int(t["parent"][j])
            assert len(items) == len(set(items))
        p = e.paths()[i].tolist()
        assert r not in p and len(p) == len(set(p))


def test_wall_clock_cap_stops_the_run():
    # a judge taking 20 ms per batch against a 0.15 s cap: the run stops early, consistently
    n = 30
    e = MCTS(n, time_limit=0.15)

    def slow(b):
        time.sleep(0.02)
        return np.zeros(len(b))

    t0 = time.perf_counter()
    e.run(slow, batch_size=4)
    elapsed = time.perf_counter() - t0
    assert e.done
    it = e.stats()["iterations"]
    assert it.sum() < 100 * n
    assert elapsed < 5.0
    # partial trees are consistent: the root's visits equal the iterations done
    for i in range(n):
        assert e.tree(i)["visits"][0] == it[i]
