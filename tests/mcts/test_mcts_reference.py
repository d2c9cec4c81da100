"""The engine against the plain-Python reference (tests/_oracles/mcts.py).

Same problem, same seed, same random stream: every tree must match node by
node (item, parent, visits exactly; values to rounding), and so must the best
paths, the top-k root children and the set of reward keys requested.
"""

from __future__ import annotations


import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from _oracles.mcts import compare as _compare
from momoka.mcts import MCTS, root_rng_state, splitmix64_stream


def _problem(n, seed):
    rng = np.random.default_rng(seed)
    I = (rng.random((n, n)) < 0.3).astype(float)
    para = np.sort(rng.integers(0, max(1, n // 2), n))
    sent = np.arange(n) * 2
    prior = rng.random(n).round(2)  # rounding creates ties in the prior order
    nbrs = [sorted(set(rng.choice(n, size=min(n - 1, 3), replace=False).tolist()) - {i}) for i in range(n)]
    indptr = np.concatenate([[0], np.cumsum([len(x) for x in nbrs])])
    indices = np.array([j for x in nbrs for j in x], dtype=np.int64)
    return I, para, sent, prior, nbrs, (indptr, indices)


def _path_I(context, cand):
    # a deterministic function of the (ordered) path and the candidate
    h = 0
    for x in context:
        h = (h * 31 + x + 7) % 1000003
    return float((h + 17 * cand) % 3 == 0)


def test_splitmix_stream_matches_reference(ref):
    # the documented stream: first values of SplitMix64 from state 0 are well known
    g = splitmix64_stream(0)
    assert next(g) == 0xE220A8397B1DCDAF
    assert next(g) == 0x6E789E6AA1B965F4
    r = ref.SplitMix64(5, 3)
    assert r.state == root_rng_state(5, 3)


CONFIGS = [
    dict(),
    dict(backup="mean"),
    dict(rollout_return="sum", c=1.0),
    dict(rollout_return="last", rollout_len=3),
    dict(expansion="topm", top_m=3, backup="mean", c=1.4),
    dict(expansion="neighbors", rollout_return="sum", rollout_len=4),
    dict(parallel=3),
    dict(parallel=4, backup="mean", expansion="topm", top_m=4),
    dict(widening=(1.0, 0.5)),
    dict(max_depth=2, rollout_len=2),
    dict(structural=False),
    dict(rollout_scope="leaf"),
    dict(rollout_scope="leaf", backup="mean", parallel=2, expansion="neighbors"),
    dict(max_depth=3, rollout_len=2, rollout_scope="leaf", c=0.3),
    dict(structural=False, normalize=False, rollout_return="sum"),
]


@pytest.mark.parametrize("cfg", CONFIGS, ids=[str(c) for c in CONFIGS])
@pytest.mark.parametrize("n", [1, 2, 3, 7, 13])
def test_native_pair_matches_reference(ref, cfg, n):
    cfg = dict(cfg)
    structural = cfg.pop("structural", True)
    I, para, sent, prior, nbrs, graph = _problem(n, 11 * n)
    kw = dict(iterations=40, seed=123, **cfg)
    extra = {}
    if kw.get("expansion") == "topm":
        extra["prior"] = prior
    if kw.get("expansion") == "neighbors":
        extra["graph"] = graph
    if structural:
        extra.update(paragraph=para, sentence=sent)
    eng = MCTS(n, **kw, **extra).run_native(I, threads=2)
    rkw = {k: v for k, v in kw.items()}
    rextra = dict(extra)
    if "graph" in rextra:
        rextra.pop("graph")
        rextra["neighbors"] = nbrs
    refs = [ref.ReferenceMCTS(n, r, lambda ctx, c: I[ctx, c], **rkw, **rextra).run() for r in range(n)]
    _compare(eng, refs, kw.get("rollout_len", 5))
    # ask/tell gives the same trees and requests exactly the distinct (root, cand) keys the reference used
    eng2 = MCTS(n, **kw, **extra)
    asked = []

    def judge(b):
        asked.extend(b.pairs())
        return I[b.root, b.cand]

    eng2.run(judge, batch_size=5)
    _compare(eng2, refs, kw.get("rollout_len", 5))
    expected = {(r.root_item, c) for r in refs for _, c in r.calls}
    assert len(asked) == len(set(asked))
    assert set(asked) == expected


@pytest.mark.parametrize("cfg", [dict(), dict(parallel=2, backup="mean"), dict(expansion="topm", top_m=2),
                                 dict(rollout_scope="leaf", c=0.5)])
@pytest.mark.parametrize("n", [4, 8])
def test_path_mode_matches_reference(ref, cfg, n):
    I, para, sent, prior, nbrs, graph = _problem(n, n)
    extra = dict(prior=prior) if cfg.get("expansion") == "topm" else {}
    kw = dict(iterations=30, seed=9, rollout_len=3, reward="path", **cfg)
    eng = MCTS(n, paragraph=para, sentence=sent, **kw, **extra)
    asked = []

    def judge(b):
        out = []
        for p, c in zip(b.paths, b.cand.tolist()):
            asked.append((tuple(p.tolist()), c))
            out.append(_path_I(tuple(p.tolist()), c))
        return out

    eng.run(judge, batch_size=4)
    refs = [ref.ReferenceMCTS(n, r, _path_I, paragraph=para, sentence=sent, **kw, **extra).run() for r in range(n)]
    _compare(eng, refs, 3)
    assert len(asked) == len(set(asked))  # one request per (path prefix, cand), ever
    assert set(asked) == {(tuple(ctx), c) for r in refs for ctx, c in r.calls}


@settings(max_examples=25, deadline=None)
@given(
    n=st.integers(1, 9),
    iterations=st.integers(0, 30),
    rollout_len=st.integers(1, 6),
    seed=st.integers(0, 2**64 - 1),
    backup=st.sampled_from(["sum", "mean"]),
    ret=st.sampled_from(["mean", "sum", "last"]),
    parallel=st.integers(1, 4),
    c=st.floats(0, 3),
    scope=st.sampled_from(["path", "leaf"]),
)
def test_random_configs_match_reference(ref, n, iterations, rollout_len, seed, backup, ret, parallel, c, scope):
    rng = np.random.default_rng(n * 1000 + iterations)
    I = rng.integers(0, 2, (n, n)).astype(float)
    kw = dict(iterations=iterations, rollout_len=rollout_len, seed=seed, backup=backup, rollout_return=ret,
              parallel=parallel, c=c, rollout_scope=scope)
    eng = MCTS(n, **kw).run_native(I)
    refs = [ref.ReferenceMCTS(n, r, lambda ctx, cc: I[ctx, cc], **kw).run() for r in range(n)]
    _compare(eng, refs, rollout_len)


def _score(context, cand):
    # a deterministic expansion score of (path, cand), rounded so that ties occur
    h = 0
    for x in context:
        h = (h * 131 + x + 3) % 1000033
    return round(((h * 7 + cand * 13) % 17) / 17, 1)


@pytest.mark.parametrize("cfg", [
    dict(),  # ETS annotation: leaf reward only, running mean, w = 1.4
    dict(top_m=2, max_depth=3),
    dict(parallel=3),
    dict(rollout_len=3, rollout_scope="path", rollout_return="mean", backup="sum"),
    dict(top_m=5, c=0.5, parallel=2, max_depth=2),
])
@pytest.mark.parametrize("n", [1, 2, 5, 9])
def test_scored_expansion_matches_reference(ref, cfg, n):
    # tried: per-node expansion scores asked through ask/tell with several batch sizes; the trees, best paths,
    # reward keys and score keys must equal the plain reference's, node for node
    kw = dict(iterations=20, seed=4, rollout_len=1, rollout_scope="leaf", rollout_return="last", backup="mean",
              c=1.4, top_m=3, max_depth=5, reward="path", expansion="scored")
    kw.update(cfg)
    refs = [ref.ReferenceMCTS(n, r, _path_I, score=_score, **kw).run() for r in range(n)]
    for batch_size in (1, 7, 1000):
        eng = MCTS(n, **kw)
        asked, scored = [], []

        def judge(b):
            out = []
            for p, c, k in zip(b.paths, b.cand.tolist(), b.is_score.tolist()):
                key = (tuple(p.tolist()), c)
                (scored if k else asked).append(key)
                out.append(_score(*key) if k else _path_I(*key))
            return out

        eng.run(judge, batch_size=batch_size)
        _compare(eng, refs, kw["rollout_len"])
        assert len(asked) == len(set(asked)) and len(scored) == len(set(scored))
        assert set(asked) == {(tuple(ctx), c) for r in refs for ctx, c in r.calls}
        assert set(scored) == {(tuple(ctx), c) for r in refs for ctx, c in r.score_calls}
        if n > 1:
            assert scored  # the expansion really asked for scores


def test_scored_expansion_asks_scores_of_every_free_item_and_keeps_the_top_m():
    # tried: 6 items, root 5, hand-set scores; the root's children must be the 3 best items in score order
    scores = {0: 0.2, 1: 0.9, 2: 0.9, 3: 0.1, 4: 0.5}
    eng = MCTS(6, roots=[5], iterations=3, rollout_len=1, rollout_scope="leaf", backup="mean", c=1.4,
               expansion="scored", top_m=3, reward="path", max_depth=1)
    b = eng.ask(100)
    assert b.is_score.all() and sorted(b.cand.tolist()) == [0, 1, 2, 3, 4]
    assert all(p.tolist() == [5] for p in b.paths)
    eng.tell([scores[c] for c in b.cand.tolist()])
    b = eng.ask(100)  # the first expansion: item 1 (0.9, lower item than 2), its reward
    assert not b.is_score.any() and b.cand.tolist() == [1]
    eng.tell([0.5])
    seen = [1]
    while not eng.done:
        b = eng.ask(100)
        seen += b.cand.tolist()
        eng.tell(np.zeros(len(b)))
    assert seen == [1, 2, 4]
    assert eng.tree(0)["item"].tolist() == [5, 1, 2, 4]


def test_scored_expansion_config_errors():
    from momoka.errors import ConfigError

    with pytest.raises(ConfigError):  # scores depend on the path
        MCTS(4, expansion="scored", reward="pair")
    with pytest.raises(ConfigError):  # no native run: scores come through ask/tell
        MCTS(4, expansion="scored", reward="path").run_native(np.ones((4, 4)))
