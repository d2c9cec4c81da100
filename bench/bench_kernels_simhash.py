"""SimHash fingerprints and near-duplicate search: momoka vs the `simhash` PyPI package.

Run: PYTHONPATH=python python -m pytest bench/bench_kernels_simhash.py --benchmark-only -s
"""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _kernels_data import load_texts  # noqa: E402
from momoka.kernels import near_duplicates, simhash  # noqa: E402

N_PEER = 5_000
N_PEER_INDEX = 20_000


def _paragraphs(shared_data) -> list[str]:
    paras = []
    for folder in sorted(p for p in shared_data.iterdir() if (p / "documents.jsonl").exists()):
        for text in load_texts(folder):
            paras.extend(p for p in text.split("\n\n") if p.strip())
    return paras


def test_simhash_throughput(shared_data, benchmark):
    sim = pytest.importorskip("simhash")
    paras = _paragraphs(shared_data)
    texts = (paras * (100_000 // len(paras) + 1))[:100_000]
    mean_len = sum(map(len, texts)) / len(texts)
    res = {}

    def ours():
        res["h"] = simhash(texts, ngram=4, tokenizer="char", threads=1)

    t0 = time.perf_counter()
    ours()
    ours_rate = len(texts) / (time.perf_counter() - t0)
    t0 = time.perf_counter()
    ours_w = simhash(texts, ngram=3, tokenizer="word", threads=1)
    word_rate = len(texts) / (time.perf_counter() - t0)
    fallbacks = 0

    def peer_one(t):
        # Simhash(text) overflows a uint8 array under numpy 2 when a feature
        # repeats often; then give it the same features as an unweighted list.
        nonlocal fallbacks
        try:
            return sim.Simhash(t).value
        except OverflowError:
            fallbacks += 1
            c = "".join(re.findall(r"[\w\u4e00-\u9fcc]+", t.lower()))
            return sim.Simhash([c[i : i + 4] for i in range(max(len(c) - 3, 1))]).value

    t0 = time.perf_counter()
    peer = [peer_one(t) for t in texts[:N_PEER]]
    peer_rate = N_PEER / (time.perf_counter() - t0)
    assert len(ours_w) == len(texts) and len(peer) == N_PEER
    sentences = [x for p in paras for x in re.split(r"(?<=[.!?])\s+", p) if len(x) > 20]
    sentences = (sentences * (100_000 // len(sentences) + 1))[:100_000]
    t0 = time.perf_counter()
    simhash(sentences, ngram=4, tokenizer="char", threads=1)
    sent_rate = len(sentences) / (time.perf_counter() - t0)
    t0 = time.perf_counter()
    for t in sentences[:N_PEER]:
        peer_one(t)
    sent_peer = N_PEER / (time.perf_counter() - t0)
    sent_len = sum(map(len, sentences)) / len(sentences)
    print(f"\nSimHash fingerprints, {len(sentences):,} real sentences (mean {sent_len:.0f} chars), one thread")
    print(f"  momoka simhash char 4-grams   {sent_rate:12,.0f} docs/s   {sent_rate / sent_peer:6.1f}x the peer")
    print(f"  simhash (PyPI) Simhash(text)  {sent_peer:12,.0f} docs/s   (on {N_PEER:,} sentences)")
    print(f"\nSimHash fingerprints, {len(texts):,} real paragraphs (mean {mean_len:.0f} chars), one thread")
    print(f"  momoka simhash char 4-grams   {ours_rate:12,.0f} docs/s   {ours_rate / peer_rate:6.1f}x the peer")
    print(f"  momoka simhash word 3-grams   {word_rate:12,.0f} docs/s   {word_rate / peer_rate:6.1f}x the peer")
    print(f"  simhash (PyPI) Simhash(text)  {peer_rate:12,.0f} docs/s   (on {N_PEER:,} docs; char 4-grams; "
          f"{fallbacks} fell back to a feature list)")
    benchmark.pedantic(ours, rounds=3, iterations=1)


def _planted(n: int, seed: int = 0) -> np.ndarray:
    """n fingerprints: random ones plus 10% near copies with 1-3 flipped bits."""
    rng = np.random.default_rng(seed)
    h = rng.integers(0, 2**64 - 1, size=n, dtype=np.uint64, endpoint=True)
    m = n // 10
    src = rng.integers(0, n - m, size=m)
    near = h[src].copy()
    for bits in range(3):
        flip = rng.integers(0, 64, size=m).astype(np.uint64)
        mask = rng.random(m) < (1.0 if bits == 0 else 0.5)
        near[mask] ^= np.left_shift(np.uint64(1), flip[mask])
    h[n - m :] = near
    return h


def test_near_duplicate_search(benchmark):
    sim = pytest.importorskip("simhash")
    h = _planted(1_000_000)
    out = {}

    def ours():
        out["p"] = near_duplicates(h, max_hamming=3)

    t0 = time.perf_counter()
    ours()
    t_1m = time.perf_counter() - t0
    small = h[:N_PEER_INDEX]
    small = np.concatenate([small, small[:2000] ^ np.uint64(5)])
    t0 = time.perf_counter()
    p_small = near_duplicates(small, max_hamming=3)
    t_small = time.perf_counter() - t0
    t0 = time.perf_counter()
    objs = [(str(i), sim.Simhash(int(v))) for i, v in enumerate(small)]
    index = sim.SimhashIndex(objs, k=3)
    peer_pairs = set()
    for i, v in objs:
        for j in index.get_near_dups(v):
            if j != i:
                peer_pairs.add(tuple(sorted((int(i), int(j)))))
    t_peer = time.perf_counter() - t0
    assert peer_pairs == {tuple(p) for p in p_small.tolist()}  # same answer as the peer
    print("\nnear-duplicate search, max_hamming=3")
    print(f"  momoka near_duplicates, 1,000,000 hashes: {t_1m:8.3f} s, {len(out['p']):,} pairs")
    print(f"  momoka near_duplicates, {len(small):,} hashes: {t_small * 1e3:8.1f} ms")
    print(f"  simhash SimhashIndex build + query all, {len(small):,} hashes: {t_peer:8.3f} s "
          f"({t_peer / t_small:,.0f}x momoka)")
    benchmark.pedantic(ours, rounds=1, iterations=1)
