"""Bookkeeping speed of the MCTS engine with a native reward.

All 500 roots of a 500-item problem, 100 iterations, rollout 5, the Momoka
step reward (eq. 4, structural prior + a dense 0/1 matrix I). Prints
rollouts/s of momoka (1 and 2 threads) and of the plain-Python reference
implementation (tests/mcts/_reference.py, a few roots of the same problem)
in the same run, and the ratios.

    PYTHONPATH=python python -m pytest bench/bench_mcts_bookkeeping.py --benchmark-only -s
"""

from __future__ import annotations

import importlib.util
import os
import time
from pathlib import Path

import numpy as np
import pytest

from momoka.search import MCTS

_spec = importlib.util.spec_from_file_location(
    "mcts_reference_bench", Path(__file__).resolve().parents[1] / "tests" / "mcts" / "_reference.py")
reference = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(reference)

N, ITERS, L = 500, 100, 5
_rng = np.random.default_rng(0)
I = (_rng.random((N, N)) < 0.05).astype(float)
PARA = np.arange(N) // 5
SENT = np.arange(N)
RESULTS: dict[str, float] = {}


def _engine(threads):
    return MCTS(N, iterations=ITERS, rollout_len=L, paragraph=PARA, sentence=SENT, threads=threads)


@pytest.mark.parametrize("threads", [1, 2])
def test_momoka_native(benchmark, threads):
    benchmark.group = "mcts bookkeeping (500 roots x 100 rollouts)"
    e = benchmark.pedantic(lambda: _engine(threads).run_native(I), rounds=15, iterations=1, warmup_rounds=2)
    assert (e.stats()["iterations"] == ITERS).all()
    rate = N * ITERS / benchmark.stats.stats.min
    RESULTS[f"momoka {threads} thread(s)"] = rate
    cpu = min(_cpu_seconds(threads) for _ in range(5))
    print(f"\nmomoka native, {threads} thread(s): {rate:,.0f} rollouts/s (best of 15); "
          f"process CPU time {cpu * 1e3:.1f} ms ({N * ITERS / cpu:,.0f} rollouts per CPU-second); "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


def _cpu_seconds(threads):
    e = _engine(threads)
    c0 = time.process_time()
    e.run_native(I)
    return time.process_time() - c0


def test_reference_python(benchmark):
    benchmark.group = "mcts bookkeeping (500 roots x 100 rollouts)"
    roots = [0, 250, 499]
    para, sent = PARA.tolist(), SENT.tolist()
    Il = I.tolist()

    def run():
        for r in roots:
            reference.ReferenceMCTS(N, r, lambda ctx, c: Il[ctx][c], iterations=ITERS, rollout_len=L,
                                    paragraph=para, sentence=sent).run()

    benchmark.pedantic(run, rounds=2, iterations=1)
    rate = len(roots) * ITERS / benchmark.stats.stats.min
    RESULTS["plain-Python reference"] = rate
    print(f"\nplain-Python reference: {rate:,.0f} rollouts/s ({len(roots)} roots)")
    if "momoka 1 thread(s)" in RESULTS:
        m1 = RESULTS["momoka 1 thread(s)"]
        print(f"momoka 1 thread / reference: {m1 / rate:,.0f}x")
        if "momoka 2 thread(s)" in RESULTS:
            print(f"momoka 2 threads / 1 thread: {RESULTS['momoka 2 thread(s)'] / m1:.2f}x")
