"""LLM-bound indexing: Momoka-Map over a 60-chunk document with a slow judge.

The judge answers each request after a fixed 20 ms delay (an LLM call), with
at most 32 requests in flight, the paper's settings (100 iterations,
rollout 5, alpha=3, beta=2, gamma=delta=1, pair reward eq. 4). momoka runs all
60 searches at once through ``MCTS.arun`` (memoised, deduplicated requests).

The paper's procedure runs one MCTS after another with one blocking judge
call per rollout step; its wall time is its call count times the delay. Its
calls are counted with the plain-Python reference (tests/_oracles/mcts.py,
which evaluates every step, no memo) on a few roots and scaled to 60 roots,
instead of waiting the hour it would take.

    PYTHONPATH=python python -m pytest bench/micro/bench_mcts_llm.py --benchmark-only -s
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

import numpy as np

from momoka.mcts import MCTS

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
from _oracles import mcts as reference  # noqa: E402

N, DELAY, IN_FLIGHT = 60, 0.020, 32
_rng = np.random.default_rng(3)
I = (_rng.random((N, N)) < 0.1).astype(float)  # the referee's hidden 0/1 answers
PARA = np.arange(N) // 2  # ~2 chunks per paragraph, ~5,000 words in 60 chunks
SENT = np.arange(N) * 4


def test_llm_bound_indexing(benchmark):
    benchmark.group = "mcts LLM-bound (60 chunks, 20 ms judge, 32 in flight)"
    calls = {"n": 0}

    async def judge(batch):
        calls["n"] += len(batch)
        await asyncio.sleep(DELAY)
        return I[batch.root, batch.cand]

    def run():
        calls["n"] = 0
        e = MCTS(N, paragraph=PARA, sentence=SENT)
        asyncio.run(e.arun(judge, max_in_flight=IN_FLIGHT))
        return e

    t0 = time.perf_counter()
    e = benchmark.pedantic(run, rounds=1, iterations=1)
    wall = time.perf_counter() - t0
    ours_calls = calls["n"]
    assert (e.stats()["iterations"] == 100).all()
    # the paper's procedure: count its judge calls on a few roots, scale to N roots
    sample = [0, 20, 40]
    counted = 0
    for r in sample:
        ref = reference.ReferenceMCTS(N, r, lambda ctx, c: I[ctx, c], paragraph=PARA.tolist(),
                                      sentence=SENT.tolist(), rollout_scope="leaf").run()
        counted += len(ref.calls)
    paper_calls = counted / len(sample) * N
    paper_wall = paper_calls * DELAY
    print(f"\nmomoka arun: {ours_calls} judge calls, {wall:.2f} s wall")
    print(f"paper procedure, modelled (not run): {paper_calls:.0f} judge calls (counted on {len(sample)} roots, "
          f"scaled to {N}) x {DELAY * 1000:.0f} ms = {paper_wall:.0f} s wall")
    print(f"calls ratio {paper_calls / ours_calls:.1f}x fewer, wall ratio {paper_wall / wall:.0f}x less "
          "than the modelled wall time")
    # a check that the async loop ran concurrently: 32 in flight can at best divide the time by 32
    assert wall >= ours_calls * DELAY / IN_FLIGHT * 0.9


def test_path_reward_request_count(benchmark):
    """Eq. 7 (path mode) keys rewards on the whole path prefix, so memoisation saves little:
    count its distinct requests with an instant judge (wall at 32 in flight ~ requests * 20 ms / 32)."""
    benchmark.group = "mcts LLM-bound (60 chunks, 20 ms judge, 32 in flight)"

    def run():
        e = MCTS(N, paragraph=PARA, sentence=SENT, reward="path")
        e.run(lambda b: [I[int(p[-1]), c] for p, c in zip(b.paths, b.cand.tolist())], batch_size=4096)
        return e

    e = benchmark.pedantic(run, rounds=1, iterations=1)
    req = int(e.stats()["requests"].sum())
    print(f"\npath mode (eq. 7): {req} distinct judge requests; at {IN_FLIGHT} in flight about "
          f"{req * DELAY / IN_FLIGHT:.1f} s of judge time")
