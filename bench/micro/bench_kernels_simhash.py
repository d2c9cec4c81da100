"""SimHash fingerprints and near-duplicate search: momoka vs a vectorised numpy SimHash and `simhash`.

Fingerprints: every distinct sentence (over 20 characters) and every distinct
paragraph of all shared sets (../shared/data/*/documents.jsonl), each text once
(no repetition), character 4-grams of the text with whitespace collapsed and
lower-cased, one 64-bit fingerprint per text (a uint64 array), one thread.

Peers:
  * ``numpy_simhash`` below: the competent baseline, SimHash written with
    numpy as one would for throughput: all texts' code points in one array,
    4-gram hashes by a vectorised polynomial hash and the SplitMix64
    finaliser, bit votes by ``np.unpackbits`` and ``np.add.reduceat`` in
    blocks of 65,536 features (a block of bits that stays in cache: 6x
    faster than 2M-feature blocks here). Same features and output type as
    momoka; the hash function differs, so fingerprints differ bit for bit,
    as two SimHash implementations do;
  * the ``simhash`` PyPI package, ``Simhash(text)`` (pure Python, its
    documented default), on the first 5,000 texts.
Each rate is the median of 5 interleaved rounds (the simhash package: one round).

Run: PYTHONPATH=python python -m pytest bench/micro/bench_kernels_simhash.py --benchmark-only -s
"""

from __future__ import annotations

import hashlib
import re
import statistics
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
ROUNDS = 5

_M1, _M2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


def _splitmix(x: np.ndarray) -> np.ndarray:
    x = x ^ (x >> np.uint64(30))
    x = x * _M1
    x = x ^ (x >> np.uint64(27))
    x = x * _M2
    return x ^ (x >> np.uint64(31))


def _short(text: str) -> np.ndarray:
    """The one feature of a text shorter than n characters (none for an empty text)."""
    if not text:
        return np.zeros(0, dtype=np.uint64)
    digest = hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest()
    return np.frombuffer(digest, dtype=np.uint64).copy()


def numpy_simhash(texts: list[str], n: int = 4, block: int = 1 << 16) -> np.ndarray:
    """SimHash of character n-grams, vectorised with numpy (the competent baseline)."""
    norm = [" ".join(t.split()).lower() for t in texts]
    lens = np.fromiter(map(len, norm), dtype=np.int64, count=len(norm))
    cp = np.frombuffer("".join(norm).encode("utf-32-le"), dtype=np.uint32).astype(np.uint64)
    off = np.zeros(len(norm) + 1, dtype=np.int64)
    np.cumsum(lens, out=off[1:])
    # polynomial hash of every n-gram window of the concatenation (windows crossing texts dropped)
    with np.errstate(over="ignore"):
        h = np.zeros(max(cp.size - n + 1, 0), dtype=np.uint64)
        for k in range(n):
            h = h * np.uint64(1_000_003) + cp[k : k + h.size]
        h = _splitmix(h)
    nfeat = np.maximum(lens - n + 1, 0)
    out = np.zeros(len(norm), dtype=np.uint64)
    weights = (np.uint64(1) << np.arange(64, dtype=np.uint64))
    t = 0
    while t < len(norm):
        # a block of texts whose features fit in `block` rows
        u = int(np.searchsorted(np.cumsum(nfeat[t:]), block, side="right")) + t
        u = max(u, t + 1)
        rows = [h[off[i] : off[i] + nfeat[i]] if nfeat[i] else _short(norm[i]) for i in range(t, u)]
        cnt = np.fromiter(map(len, rows), dtype=np.int64, count=u - t)
        feats = np.concatenate(rows) if rows else np.zeros(0, dtype=np.uint64)
        bits = np.unpackbits(feats.view(np.uint8).reshape(-1, 8), axis=1, bitorder="little")
        starts = np.zeros(u - t, dtype=np.int64)
        np.cumsum(cnt[:-1], out=starts[1:])
        has = cnt > 0
        votes = np.add.reduceat(bits, starts[has], axis=0, dtype=np.int32)
        fp = (2 * votes > cnt[has, None]).astype(np.uint64) @ weights if votes.size else np.zeros(0, np.uint64)
        out[t:u][has] = fp
        t = u
    return out


def _texts(shared_data) -> tuple[list[str], list[str]]:
    """(distinct sentences over 20 characters, distinct paragraphs) of every shared set."""
    paras, seen = [], set()
    for folder in sorted(p for p in shared_data.iterdir() if (p / "documents.jsonl").exists()):
        for text in load_texts(folder):
            for p in text.split("\n\n"):
                p = p.strip()
                if p and p not in seen:
                    seen.add(p)
                    paras.append(p)
    sents, seen = [], set()
    for p in paras:
        for x in re.split(r"(?<=[.!?])\s+", p):
            if len(x) > 20 and x not in seen:
                seen.add(x)
                sents.append(x)
    return sents, paras


def _peer_one(sim, t: str) -> int:
    # Simhash(text) overflows a uint8 array under numpy 2 when a feature repeats often;
    # then it gets the same features as an unweighted list.
    try:
        return sim.Simhash(t).value
    except OverflowError:
        c = "".join(re.findall(r"[\w\u4e00-\u9fcc]+", t.lower()))
        return sim.Simhash([c[i : i + 4] for i in range(max(len(c) - 3, 1))]).value


def _rate(fn, n: int, rounds: int) -> tuple[float, float]:
    """(median docs/s by wall clock, median docs per CPU-second) over rounds."""
    wall, cpu = [], []
    for _ in range(rounds):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return n / statistics.median(wall), n / statistics.median(cpu)


def test_simhash_throughput(shared_data, benchmark):
    sim = pytest.importorskip("simhash")
    sents, paras = _texts(shared_data)
    print("\nSimHash fingerprints, character 4-grams, one thread; docs/s wall (docs per CPU-second)")
    for label, texts in (("sentences", sents), ("paragraphs", paras)):
        mean_len = sum(map(len, texts)) / len(texts)
        ours = lambda: simhash(texts, ngram=4, tokenizer="char", threads=1)  # noqa: E731
        peer = lambda: numpy_simhash(texts, 4)  # noqa: E731
        assert ours().shape == peer().shape == (len(texts),)  # equal output: one uint64 per text
        # interleaved rounds: ours, numpy, ours, numpy, ...
        wo, co, wn, cn = [], [], [], []
        for _ in range(ROUNDS):
            a = _rate(ours, len(texts), 1)
            b = _rate(peer, len(texts), 1)
            wo.append(a[0]); co.append(a[1]); wn.append(b[0]); cn.append(b[1])  # noqa: E702
        r_o, c_o = statistics.median(wo), statistics.median(co)
        r_n, c_n = statistics.median(wn), statistics.median(cn)
        few = texts[:N_PEER]
        r_p, c_p = _rate(lambda: [_peer_one(sim, t) for t in few], len(few), 1)
        print(f"\n  {len(texts):,} distinct {label} (mean {mean_len:.0f} chars)")
        print(f"    momoka simhash(tokenizer='char', ngram=4, threads=1) {r_o:12,.0f} ({c_o:,.0f})")
        print(f"    numpy_simhash (vectorised numpy)                     {r_n:12,.0f} ({c_n:,.0f})"
              f"   momoka {r_o / r_n:5.1f}x wall, {c_o / c_n:5.1f}x CPU")
        print(f"    simhash (PyPI) Simhash(text), first {N_PEER:,}           {r_p:12,.0f} ({c_p:,.0f})"
              f"   momoka {r_o / r_p:5.0f}x wall, {c_o / c_p:5.0f}x CPU")
    benchmark.pedantic(lambda: simhash(sents, ngram=4, tokenizer="char", threads=1), rounds=1, iterations=1)


def test_numpy_simhash_is_a_simhash(shared_data):
    """The baseline is a real SimHash: near copies land near, unrelated texts about 32 bits apart."""
    sents, _ = _texts(shared_data)
    a = sents[:200]
    b = [t[:-1] + "#" for t in a]  # one character changed at the end
    ha, hb = numpy_simhash(a), numpy_simhash(b)
    diff = np.unpackbits((ha ^ hb).view(np.uint8)).reshape(-1, 64).sum(1)
    other = np.unpackbits((ha ^ np.roll(ha, 1)).view(np.uint8)).reshape(-1, 64).sum(1)
    assert diff.mean() < 8 and 24 < other.mean() < 40


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
