"""Same seed and same answers give the same trees, whatever the thread count,
the ask batch size, the order of answers, or sync versus async driving."""

from __future__ import annotations

import asyncio

import numpy as np

from momoka.mcts import MCTS


def _snapshot(e):
    trees = [e.tree(i) for i in range(len(e.roots))]
    return ([p.tolist() for p in e.paths()],
            [(t["item"].tolist(), t["visits"].tolist(), t["value"].tolist()) for t in trees])


N = 40
_rng = np.random.default_rng(7)
I = (_rng.random((N, N)) < 0.15).astype(float)
KW = dict(paragraph=np.arange(N) // 4, sentence=np.arange(N), seed=42, parallel=3)


def test_native_independent_of_threads():
    snaps = [_snapshot(MCTS(N, **KW).run_native(I, threads=t)) for t in (1, 2, 4, 7)]
    assert all(s == snaps[0] for s in snaps[1:])


def test_ask_tell_independent_of_batch_size_and_answer_order():
    ref = _snapshot(MCTS(N, **KW).run_native(I, threads=1))
    for bs in (1, 13, 10_000):
        e = MCTS(N, threads=2, **KW)
        e.run(lambda b: I[b.root, b.cand], batch_size=bs)
        assert _snapshot(e) == ref
    # answers told in a shuffled order, in pieces, across several asks
    rng = np.random.default_rng(0)
    e = MCTS(N, **KW)
    held = []
    while not e.done or held:
        b = e.ask(50)
        held.extend(zip(b.ids.tolist(), I[b.root, b.cand].tolist()))
        if not held:
            continue
        rng.shuffle(held)
        k = max(1, len(held) // 2)
        part, held = held[:k], held[k:]
        e.tell([v for _, v in part], [i for i, _ in part])
    assert _snapshot(e) == ref


def test_async_run_matches_sync():
    ref = _snapshot(MCTS(N, **KW).run_native(I))

    async def judge(b):
        await asyncio.sleep(0.0005 * (int(b.cand[0]) % 3))  # answers come back out of order
        return I[b.root, b.cand]

    e = MCTS(N, **KW)
    asyncio.run(e.arun(judge, max_in_flight=16, batch_size=2))
    assert _snapshot(e) == ref


def test_different_seeds_differ_and_roots_are_independent():
    a = _snapshot(MCTS(N, **KW).run_native(I))
    b = _snapshot(MCTS(N, **{**KW, "seed": 43}).run_native(I))
    assert a != b
    # the search of a root does not depend on which other roots are searched
    sub = MCTS(N, roots=[5, 17], **KW).run_native(I)
    full = MCTS(N, **KW).run_native(I)
    assert sub.paths()[0].tolist() == full.paths()[5].tolist()
    assert sub.tree(1)["visits"].tolist() == full.tree(17)["visits"].tolist()
