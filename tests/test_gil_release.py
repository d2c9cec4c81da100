"""Long native calls release the GIL, measured (in the style of hnswlib's
bindings_test_gil_release.py).

A recorder thread appends ``time.perf_counter()`` in a tight loop while the
main thread runs one long native call. When the call releases the GIL the
recorder keeps ticking, so the largest gap between its stamps stays far below
the call's duration; a call that holds the GIL shows one gap as long as the
call itself. Each workload grows until the call lasts at least ``MIN_CALL``
seconds, and the native side runs on one thread so a core is left for the
recorder.
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from momoka import _core

MIN_CALL = 0.2  # seconds a measured call lasts at least
MAX_GAP_SHARE = 0.25  # the recorder's largest gap, as a share of the call's duration


def _largest_gap(call) -> tuple[float, float]:
    """Run ``call()`` beside a recorder thread; return (call duration, largest recorder gap)."""
    stamps: list[float] = []
    stop = threading.Event()
    started = threading.Event()

    def record():
        started.set()
        while not stop.is_set():
            stamps.append(time.perf_counter())
            time.sleep(1e-4)

    t = threading.Thread(target=record, daemon=True)
    t.start()
    started.wait()
    time.sleep(0.02)
    t0 = time.perf_counter()
    call()
    t1 = time.perf_counter()
    stop.set()
    t.join()
    inside = [s for s in stamps if t0 <= s <= t1]
    gaps = np.diff([t0, *inside, t1])
    return t1 - t0, float(gaps.max())


def _check(make, size: int, *, grow: int = 2, tries: int = 8):
    """Grow ``make(size)`` until the call takes MIN_CALL, then measure it (best of 3)."""
    for _ in range(tries):
        call = make(size)
        t0 = time.perf_counter()
        call()
        if time.perf_counter() - t0 >= MIN_CALL:
            break
        size *= grow
    else:
        pytest.fail(f"workload too short even at size {size}")
    results = [_largest_gap(call) for _ in range(3)]
    duration, gap = min(results, key=lambda r: r[1] / r[0])
    assert duration >= MIN_CALL * 0.5
    assert gap < MAX_GAP_SHARE * duration, f"largest recorder gap {gap:.3f}s in a {duration:.3f}s call"


def _words(rng, n_words: int, vocab: int = 5000) -> list[str]:
    return [f"w{int(i)}" for i in rng.zipf(1.3, n_words) % vocab]


def test_bm25_search_batch_releases_the_gil():
    rng = np.random.default_rng(0)
    docs = [" ".join(_words(rng, 200)) for _ in range(3000)]
    index = _core.BM25Index()
    index.add(docs, 1)

    def make(n):
        queries = [" ".join(_words(rng, 8)) for _ in range(n)]
        return lambda: index.search_batch(queries, 10, 1)

    _check(make, 500)


def test_bm25_holds_releases_the_gil():
    rng = np.random.default_rng(2)
    docs = [" ".join(_words(rng, 200)) for _ in range(3000)]
    index = _core.BM25Index()
    index.add(docs, 1)
    terms = [f"w{i}" for i in range(1, 600, 2)]

    def make(n):
        ids = rng.integers(0, 3000, n).tolist()
        return lambda: index.holds(ids, terms)

    _check(make, 20_000)


def test_mcts_run_native_releases_the_gil():
    from momoka.mcts import MCTS

    n = 300
    rng = np.random.default_rng(1)
    I = rng.random((n, n))
    para = np.arange(n) // 5
    sent = np.arange(n)

    def make(iterations):
        def call():
            MCTS(n, iterations=iterations, paragraph=para, sentence=sent, threads=1).run_native(I, threads=1)

        return call

    _check(make, 50)


def test_simhash_releases_the_gil():
    rng = np.random.default_rng(2)
    pool = [" ".join(_words(rng, 300)) for _ in range(200)]

    def make(n):
        texts = [pool[i % len(pool)] for i in range(n)]
        return lambda: _core.simhash(texts, "word", 3, None, 1)

    _check(make, 2000)


def test_levenshtein_cdist_releases_the_gil():
    rng = np.random.default_rng(3)

    def make(n):
        a = ["".join(rng.choice(list("abcdefgh"), 60)) for _ in range(n)]
        b = ["".join(rng.choice(list("abcdefgh"), 60)) for _ in range(n)]
        return lambda: _core.levenshtein_cdist(a, b, -1, 1)

    _check(make, 200)


def test_locate_many_releases_the_gil():
    rng = np.random.default_rng(4)
    text = " ".join(_words(rng, 200_000))
    locator = _core.Locator(text)

    def make(n):
        starts = rng.integers(0, len(text) - 200, n)
        patterns = [text[s : s + 120].replace("w1", "x1") for s in starts]
        return lambda: locator.locate_many(patterns, 0, len(text), -1, 1)

    _check(make, 100)


def test_segmenter_releases_the_gil():
    rng = np.random.default_rng(5)
    sentence_words = _words(rng, 400_000)
    text = " ".join(w + (". " if i % 12 == 11 else "") for i, w in enumerate(sentence_words))
    seg = _core.Segmenter()

    def make(copies):
        big = "\n\n".join([text] * copies)  # a few MB
        return lambda: seg.split(big)

    _check(make, 1)


def test_recorder_sees_a_call_that_holds_the_gil():
    """The harness itself: a long regex search (C code that keeps the GIL) shows one gap as long as the call."""
    import re

    text = "ab " * 1_000_000
    duration, gap = _largest_gap(lambda: re.findall(r"(a|b)+c", text))
    assert duration > 0.05
    assert gap > 0.75 * duration
