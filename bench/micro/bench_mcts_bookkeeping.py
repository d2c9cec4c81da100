"""Bookkeeping speed of the MCTS engine with a native reward.

All 500 roots of a 500-item problem, 100 iterations, rollout 5, the Momoka
step reward (eq. 4, structural prior + a dense 0/1 matrix I), random
expansion, cumulative backup, mean return, one trajectory per wave.

Peer: `PlainUCT` below, the same rules written as a competent Python
programmer would (node fields in flat lists, sets for the excluded items,
the root's reward row computed once with numpy, Python's C-implemented
`random.Random` for draws) -- not the test oracle (tests/_oracles/mcts.py),
which is deliberately simple and several times slower. The bench first checks
that PlainUCT, driven by the engine's SplitMix64 draws, builds the oracle's
tree node for node on a few roots (same rules, same rewards), then times it
with `random.Random` on a subset of roots. Prints rollouts/s of momoka (1 and
2 threads, wall clock and per CPU-second) and of PlainUCT, and the ratios;
`test_interleaved_ratios` times the three alternately in one loop (medians),
and for 2 threads also the CPU time of the calling thread (one of the two
workers): near half of the process CPU time means the work split.

    PYTHONPATH=python python -m pytest bench/micro/bench_mcts_bookkeeping.py --benchmark-only -s
"""

from __future__ import annotations

import sys
import math
import os
import random
import time
from pathlib import Path

import numpy as np
import pytest

from momoka.mcts import MCTS

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
from _oracles import mcts as reference  # noqa: E402

N, ITERS, L = 500, 100, 5
ALPHA, BETA, GAMMA, DELTA = 3.0, 2.0, 1.0, 1.0
_rng = np.random.default_rng(0)
I = (_rng.random((N, N)) < 0.05).astype(float)
PARA = np.arange(N) // 5
SENT = np.arange(N)
RESULTS: dict[str, float] = {}


class PlainUCT:
    """UCT from one root (random expansion without repeats on the path, UCT
    eq. 3 with ties to the lower item, rollout of up to `L` scored steps,
    mean return, cumulative backup, best path by visits), momoka's rules."""

    def __init__(self, n, root, reward_row, *, iterations=ITERS, rollout_len=L, c=math.sqrt(2), below=None):
        self.n, self.root, self.row = n, root, reward_row
        self.iterations, self.L, self.c = iterations, rollout_len, c
        self.below = below or random.Random(root).randrange  # below(k): uniform int in [0, k)
        # nodes as parallel lists; node 0 is the root
        self.item, self.parent, self.depth = [root], [-1], [0]
        self.kids: list[list[int]] = [[]]
        self.visits, self.value = [0], [0.0]

    def _free_pick(self, excluded: set):
        n = self.n
        free = n - len(excluded)
        if free <= 0:
            return None
        if 2 * free >= n:  # rejection while most items are free
            while True:
                u = self.below(n)
                if u not in excluded:
                    return u
        k = self.below(free)
        for i in range(n):
            if i not in excluded:
                if k == 0:
                    return i
                k -= 1

    def _uct_child(self, v):
        kids, visits, value, item = self.kids[v], self.visits, self.value, self.item
        best, best_u = -1, 0.0
        log_n = math.log(visits[v])
        for ch in kids:
            ne = visits[ch]
            if ne == 0:
                u = math.inf
            else:
                u = value[ch] / ne + self.c * math.sqrt(log_n / ne)
            if best < 0 or u > best_u or (u == best_u and item[ch] < item[best]):
                best, best_u = ch, u
        return best

    def run(self):
        n, row, L = self.n, self.row, self.L
        item, parent, depth, kids, visits, value = (self.item, self.parent, self.depth, self.kids, self.visits,
                                                    self.value)
        if n <= 1:
            return self
        for _ in range(self.iterations):
            v = 0
            # a node is expandable while it has fewer children than candidates (n - path length)
            while len(kids[v]) >= n - depth[v] - 1 and kids[v]:
                v = self._uct_child(v)
            path = []
            u = v
            while u >= 0:
                path.append(item[u])
                u = parent[u]
            path.reverse()
            used = set(path)
            if len(kids[v]) < n - depth[v] - 1:
                nxt = self._free_pick(used | {item[ch] for ch in kids[v]})
                kids[v].append(len(item))
                item.append(nxt)
                parent.append(v)
                depth.append(depth[v] + 1)
                kids.append([])
                visits.append(0)
                value.append(0.0)
                v = len(item) - 1
                path.append(nxt)
                used.add(nxt)
            elif v == 0:
                break
            # every node below the root on the path is a scored step, then random steps
            total = sum(row[x] for x in path[1:])
            steps = len(path) - 1
            while steps < L:
                nxt = self._free_pick(used)
                if nxt is None:
                    break
                used.add(nxt)
                total += row[nxt]
                steps += 1
            r = total / steps
            while v >= 0:
                visits[v] += 1
                value[v] += r
                v = parent[v]
        return self

    def best_path(self, cap):
        out, v = [], 0
        while len(out) < cap:
            ks = [ch for ch in self.kids[v] if self.visits[ch] > 0]
            if not ks:
                break
            v = min(ks, key=lambda ch: (-self.visits[ch], -self.value[ch] / self.visits[ch], self.item[ch]))
            out.append(self.item[v])
        return out


def reward_row(root: int) -> list[float]:
    """Momoka eq. 4 for every candidate of `root`, normalised by r_max."""
    r_max = 1.0 + ALPHA / GAMMA + BETA / DELTA
    row = I[root] + ALPHA / (np.abs(PARA[root] - PARA) + GAMMA) + BETA / (np.abs(SENT[root] - SENT) + DELTA)
    return (row / r_max).tolist()


def test_plain_uct_follows_the_oracle():
    """Same rules, same rewards: with SplitMix64 draws, the oracle's tree node for node."""
    Il, para, sent = I.tolist(), PARA.tolist(), SENT.tolist()
    for root in (0, 137, 499):
        ref = reference.ReferenceMCTS(N, root, lambda ctx, c: Il[ctx][c], iterations=ITERS, rollout_len=L,
                                      paragraph=para, sentence=sent).run()
        rng = reference.SplitMix64(0, root)
        mine = PlainUCT(N, root, reward_row(root), below=rng.below).run()
        want = sorted((nd.item, nd.depth, nd.visits, round(nd.value, 9)) for nd in ref.nodes)
        got = sorted((mine.item[v], mine.depth[v], mine.visits[v], round(mine.value[v], 9))
                     for v in range(len(mine.item)))
        assert got == want
        assert mine.best_path(L) == ref.best_path(L)


def _engine(threads):
    return MCTS(N, iterations=ITERS, rollout_len=L, paragraph=PARA, sentence=SENT, threads=threads)


def _cpu_seconds(threads):
    e = _engine(threads)
    c0 = time.process_time()
    e.run_native(I)
    return time.process_time() - c0


@pytest.mark.parametrize("threads", [1, 2])
def test_momoka_native(benchmark, threads):
    benchmark.group = "mcts bookkeeping (500 roots x 100 rollouts)"
    e = benchmark.pedantic(lambda: _engine(threads).run_native(I), rounds=15, iterations=1, warmup_rounds=2)
    assert (e.stats()["iterations"] == ITERS).all()
    rate = N * ITERS / benchmark.stats.stats.median
    cpu = sorted(_cpu_seconds(threads) for _ in range(5))[2]
    RESULTS[f"momoka {threads}"] = rate
    RESULTS[f"momoka cpu {threads}"] = N * ITERS / cpu
    print(f"\nmomoka native, {threads} thread(s): {rate:,.0f} rollouts/s (median of 15); "
          f"process CPU time {cpu * 1e3:.1f} ms ({N * ITERS / cpu:,.0f} rollouts per CPU-second); "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


def test_plain_python_uct(benchmark):
    benchmark.group = "mcts bookkeeping (500 roots x 100 rollouts)"
    roots = list(range(0, N, 10))
    rows = {r: reward_row(r) for r in roots}  # computed once per root, as momoka's row set-up (not timed)

    def run():
        for r in roots:
            PlainUCT(N, r, rows[r]).run()

    benchmark.pedantic(run, rounds=5, iterations=1)
    rate = len(roots) * ITERS / benchmark.stats.stats.median
    RESULTS["plain"] = rate
    print(f"\nplain-Python UCT: {rate:,.0f} rollouts/s ({len(roots)} roots, median of 5); "
          f"load average {os.getloadavg()[0]:.1f}")
    if "momoka 1" in RESULTS:
        print(f"momoka 1 thread / plain-Python UCT: {RESULTS['momoka 1'] / rate:,.1f}x (wall clock)")
    if "momoka 2" in RESULTS:
        print(f"momoka 2 threads / 1 thread: {RESULTS['momoka 2'] / RESULTS['momoka 1']:.2f}x wall clock; "
              f"rollouts per CPU-second 2 threads / 1 thread: "
              f"{RESULTS['momoka cpu 2'] / RESULTS['momoka cpu 1']:.2f}")


def _timed_run(threads):
    """One native run: (wall s, process CPU s, calling thread's CPU s), construction included."""
    w0, c0, t0 = time.perf_counter(), time.process_time(), time.thread_time()
    _engine(threads).run_native(I)
    return time.perf_counter() - w0, time.process_time() - c0, time.thread_time() - t0


def test_interleaved_ratios(benchmark):
    """Plain UCT, momoka 1 thread and 2 threads alternately (same run), medians of each."""
    benchmark.group = "mcts bookkeeping, interleaved"
    benchmark.pedantic(_interleaved, rounds=1, iterations=1)


def _interleaved():
    roots = list(range(0, N, 25))
    rows = {r: reward_row(r) for r in roots}
    plain, one, two = [], [], []
    load0 = os.getloadavg()[0]
    for _ in range(7):
        t0 = time.perf_counter()
        for r in roots:
            PlainUCT(N, r, rows[r]).run()
        plain.append(len(roots) * ITERS / (time.perf_counter() - t0))
        for _ in range(3):
            one.append(_timed_run(1))
            two.append(_timed_run(2))
    med = lambda xs: sorted(xs)[len(xs) // 2]  # noqa: E731
    p_rate = med(plain)
    w1, c1 = med([x[0] for x in one]), med([x[1] for x in one])
    w2, c2 = med([x[0] for x in two]), med([x[1] for x in two])
    share = med([x[2] / x[1] for x in two])
    print(f"\ninterleaved (7 plain rounds of {len(roots)} roots, 21 runs of each thread count; load average "
          f"{load0:.1f} -> {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores):")
    print(f"  plain-Python UCT {p_rate:,.0f} rollouts/s; momoka 1 thread {N * ITERS / w1:,.0f} rollouts/s "
          f"= {N * ITERS / w1 / p_rate:,.1f}x")
    print(f"  momoka 2 threads / 1 thread: {w1 / w2:.2f}x wall clock; rollouts per CPU-second "
          f"{c1 / c2:.2f}x; calling thread's share of the 2-thread CPU time {share:.2f}")
    # the thread count changes the speed, never the trees
    e1, e2 = _engine(1).run_native(I), _engine(2).run_native(I)
    assert all(np.array_equal(a, b) for a, b in zip(e1.paths(), e2.paths()))
    for i in (0, 250, N - 1):
        t1, t2 = e1.tree(i), e2.tree(i)
        assert all(np.array_equal(t1[k], t2[k]) for k in t1)
