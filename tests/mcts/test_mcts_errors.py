"""Bad input: clear momoka.errors exceptions, engine state unchanged."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from momoka.errors import ConfigError, InputError, JudgeError, MomokaError, RewardError, SearchError
from momoka.mcts import MCTS

N = 8
I = (np.random.default_rng(1).random((N, N)) < 0.3).astype(float)


def good(b):
    return I[b.root, b.cand]


def _snap(e):
    return [p.tolist() for p in e.paths()], [e.tree(i)["visits"].tolist() for i in range(len(e.roots))]


REF = _snap(MCTS(N, seed=5).run_native(I))


def test_zero_items():
    # tried: an engine over an empty document
    with pytest.raises(InputError, match="at least 1"):
        MCTS(0)
    with pytest.raises(InputError):
        MCTS(-3)


def test_one_item_gives_empty_paths():
    # tried: a one-chunk document: nothing to complete it with, so empty paths, no requests
    e = MCTS(1)
    assert e.done
    assert len(e.ask(10)) == 0
    assert [p.tolist() for p in e.paths()] == [[]]
    e.run(lambda b: pytest.fail("judge must not be called"))
    assert [p.tolist() for p in MCTS(1).run_native(np.zeros((1, 1))).paths()] == [[]]


@pytest.mark.parametrize("roots", [[-1], [0, N], [2, 100]])
def test_roots_out_of_range(roots):
    # tried: roots outside [0, n_items)
    with pytest.raises(InputError, match="out of range"):
        MCTS(N, roots=roots)


def test_duplicate_roots():
    # tried: the same root twice (its requests would be duplicated)
    with pytest.raises(InputError, match="once"):
        MCTS(N, roots=[1, 2, 1])


def test_roots_not_integers():
    # tried: float roots
    with pytest.raises(InputError, match="integers"):
        MCTS(N, roots=[0.5, 1.0])


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_rewards_from_judge(bad):
    # tried: a judge answering NaN / inf for one request
    e = MCTS(N, seed=5)

    def judge(b):
        v = np.asarray(good(b), float).copy()
        v[-1] = bad
        return v

    with pytest.raises(RewardError, match="finite"):
        e.run(judge)
    assert e._e.n_outstanding == 0  # the batch was released, nothing half-told
    e.run(good)
    assert _snap(e) == REF


def test_non_finite_reward_in_tell_changes_nothing():
    # tried: tell() with a NaN among good values
    e = MCTS(N, seed=5)
    b = e.ask(10)
    v = np.asarray(good(b), float).copy()
    v[0] = np.nan
    with pytest.raises(RewardError):
        e.tell(v)
    e.tell(good(b))  # the same ids are still outstanding and accepted
    e.run(good)
    assert _snap(e) == REF


def test_judge_that_raises():
    # tried: a judge that fails on its third call (e.g. the LLM endpoint is down)
    e = MCTS(N, seed=5)
    calls = {"n": 0}

    def flaky(b):
        calls["n"] += 1
        if calls["n"] == 3:
            raise ConnectionError("endpoint down")
        return good(b)

    with pytest.raises(JudgeError, match="endpoint down") as info:
        e.run(flaky, batch_size=4)
    assert isinstance(info.value.__cause__, ConnectionError)
    e.run(good, batch_size=4)  # resume: same result as an uninterrupted run
    assert _snap(e) == REF


@pytest.mark.parametrize("extra", [-1, 1])
def test_judge_returns_wrong_number_of_values(extra):
    # tried: one value too few / too many
    e = MCTS(N, seed=5)

    def judge(b):
        v = list(good(b))
        return v[:-1] if extra < 0 else v + [0.0]

    with pytest.raises(RewardError, match="rewards for"):
        e.run(judge)
    e.run(good)
    assert _snap(e) == REF


def test_judge_returns_non_numbers():
    # tried: a judge answering strings
    e = MCTS(N, seed=5)
    with pytest.raises(RewardError):
        e.run(lambda b: ["yes"] * len(b))
    e.run(good)
    assert _snap(e) == REF


def test_tell_without_ask():
    # tried: tell() on a fresh engine, and tell() twice for the same batch
    e = MCTS(N, seed=5)
    with pytest.raises(SearchError, match="without ask"):
        e.tell([1.0])
    with pytest.raises(SearchError):
        e.tell([1.0], ids=[0])
    b = e.ask(5)
    e.tell(good(b))
    with pytest.raises(SearchError, match="outstanding"):
        e.tell(good(b))
    # unknown ids and duplicate ids
    b = e.ask(5)
    with pytest.raises(SearchError, match="not outstanding"):
        e.tell([0.0], ids=[10**9])
    if len(b) >= 1:
        with pytest.raises(SearchError, match="twice"):
            e.tell([0.0, 0.0], ids=[b.ids[0], b.ids[0]])
        e.tell(good(b), b.ids)
    e.run(good)
    assert _snap(e) == REF


def test_async_judge_that_raises():
    # tried: an async judge failing while other requests are in flight
    e = MCTS(N, seed=5)
    calls = {"n": 0}

    async def judge(b):
        calls["n"] += 1
        mine = calls["n"]
        await asyncio.sleep(0.001)
        if mine == 5:
            raise TimeoutError("too slow")
        return good(b)

    with pytest.raises(JudgeError, match="too slow"):
        asyncio.run(e.arun(judge, max_in_flight=4))
    assert e._e.n_outstanding == 0
    asyncio.run(e.arun(lambda b: _async_value(good(b)), max_in_flight=4))
    assert _snap(e) == REF


async def _async_value(v):
    return v


@pytest.mark.parametrize(
    "kwargs, exc",
    [
        (dict(expansion="greedy"), ConfigError),  # unknown policy
        (dict(expansion="topm"), ConfigError),  # top-M without a prior
        (dict(expansion="topm", prior=[1.0] * (N - 1)), InputError),  # prior of the wrong length
        (dict(expansion="topm", prior=[np.nan] * N), InputError),  # NaN prior
        (dict(expansion="neighbors"), ConfigError),  # no graph
        (dict(expansion="neighbors", graph=([0] * N, [])), InputError),  # indptr too short
        (dict(expansion="neighbors", graph=([0] * N + [1], [N])), InputError),  # neighbour out of range
        (dict(rollout_len=0), ConfigError),
        (dict(iterations=-1), ConfigError),
        (dict(parallel=0), ConfigError),
        (dict(c=float("nan")), ConfigError),
        (dict(gamma=0), ConfigError),  # would divide by zero at distance 0
        (dict(paragraph=[0] * N), ConfigError),  # paragraph without sentence
        (dict(paragraph=[0] * N, sentence=[0] * (N + 1)), InputError),
        (dict(backup="max"), ConfigError),
        (dict(rollout_return="median"), ConfigError),
        (dict(reward="triple"), ConfigError),
        (dict(widening=(0, 0.5)), ConfigError),
        (dict(time_limit=0), ConfigError),
    ],
)
def test_bad_configuration(kwargs, exc):
    with pytest.raises(exc):
        MCTS(N, **kwargs)


def test_bad_native_rewards():
    # tried: wrong shape, NaN, path mode natively, duplicate sparse entries
    with pytest.raises(InputError, match="shape"):
        MCTS(N).run_native(np.zeros((N, N + 1)))
    with pytest.raises(InputError, match="NaN"):
        bad = I.copy()
        bad[1, 2] = np.nan
        MCTS(N).run_native(bad)
    with pytest.raises(ConfigError, match="pair"):
        MCTS(N, reward="path").run_native(I)
    indptr = np.zeros(N + 1, int)
    indptr[1:] = 2
    with pytest.raises(InputError, match="duplicate"):
        MCTS(N).run_native((np.ones(2), np.array([3, 3]), indptr))
    with pytest.raises(InputError, match="out of range"):
        MCTS(N).run_native((np.ones(2), np.array([3, N]), indptr))


def test_native_after_ask_is_refused():
    # tried: mixing the two modes on one engine
    e = MCTS(N)
    e.ask(2)
    with pytest.raises(SearchError, match="ask/tell"):
        e.run_native(I)


def test_errors_share_the_base_class():
    assert issubclass(RewardError, SearchError) and issubclass(JudgeError, MomokaError)
