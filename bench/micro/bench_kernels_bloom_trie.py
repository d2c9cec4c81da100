"""Bloom filter and trie operations/s vs Python set/dict, pybloom-live and marisa-trie.

Run: PYTHONPATH=python python -m pytest bench/micro/bench_kernels_bloom_trie.py --benchmark-only -s
"""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path


sys.path.insert(0, str(Path(__file__).resolve().parent))
from _kernels_data import load_texts  # noqa: E402
from momoka.kernels import BloomFilter, Trie, unique_prefix_lengths  # noqa: E402

N_KEYS = 1_000_000


def _rate(n, fn):
    t0 = time.perf_counter()
    fn()
    return n / (time.perf_counter() - t0)


def _table(title, rows, floor):
    print(f"\n{title}")
    for name, add, look in rows:
        print(f"  {name:34s} add {add:12,.0f}/s ({add / floor[0]:5.2f}x)   lookup {look:12,.0f}/s ({look / floor[1]:5.2f}x)")


def test_bloom(benchmark):
    keys = [f"chunk-{i}-{i * 7919 % 1000003}" for i in range(N_KEYS)]
    probes = [f"probe-{i}" for i in range(N_KEYS)]
    rows = []
    s = set()
    floor = (_rate(N_KEYS, lambda: [s.add(k) for k in keys]), _rate(N_KEYS, lambda: [k in s for k in probes]))
    rows.append(("python set", *floor))
    bf = BloomFilter(N_KEYS, 0.01)
    rows.append(("momoka BloomFilter add_many/contains_many",
                 _rate(N_KEYS, lambda: bf.add_many(keys)), _rate(N_KEYS, lambda: bf.contains_many(probes))))
    bf2 = BloomFilter(N_KEYS, 0.01)
    rows.append(("momoka BloomFilter add / in (per key)",
                 _rate(N_KEYS, lambda: [bf2.add(k) for k in keys]), _rate(N_KEYS, lambda: [k in bf2 for k in probes])))
    fp = bf.contains_many(probes).mean()
    try:
        from pybloom_live import BloomFilter as PB

        pb = PB(capacity=N_KEYS, error_rate=0.01)
        n = 200_000
        rows.append((f"pybloom-live (on {n:,} keys)",
                     _rate(n, lambda: [pb.add(k) for k in keys[:n]]), _rate(n, lambda: [k in pb for k in probes[:n]])))
    except ImportError:
        print("pybloom-live not installed")
    _table(f"Bloom filter, {N_KEYS:,} str keys, target FP 1% (momoka measured {fp:.4f}); ratios vs set", rows, floor)
    benchmark.pedantic(lambda: bf.contains_many(probes), rounds=3, iterations=1)


def test_trie(shared_data, benchmark):
    words = set()
    for folder in sorted(p for p in shared_data.iterdir() if (p / "documents.jsonl").exists()):
        for text in load_texts(folder):
            words.update(re.findall(r"\w+", text))
    keys = sorted(words)
    probes = [w + "s" for w in keys]
    n = len(keys)
    rows = []
    d: dict = {}
    floor = (_rate(n, lambda: [d.__setitem__(k, i) for i, k in enumerate(keys)]), _rate(n, lambda: [k in d for k in probes]))
    rows.append(("python dict", *floor))
    t = Trie()
    rows.append(("momoka Trie insert_many/contains_many", _rate(n, lambda: t.insert_many(keys)),
                 _rate(n, lambda: t.contains_many(probes))))
    t2 = Trie()
    rows.append(("momoka Trie insert / in (per key)", _rate(n, lambda: [t2.insert(k) for k in keys]),
                 _rate(n, lambda: [k in t2 for k in probes])))
    prefixes = [k[:3] for k in keys[:: max(1, n // 2000)]]
    m_prefix = _rate(len(prefixes), lambda: [t.keys_with_prefix(p) for p in prefixes])
    py_prefix = _rate(50, lambda: [[k for k in keys if k.startswith(p)] for p in prefixes[:50]])
    try:
        import marisa_trie

        mt = {}
        add = _rate(n, lambda: mt.setdefault("t", marisa_trie.Trie(keys)))
        rows.append(("marisa-trie (build from list) / in", add, _rate(n, lambda: [k in mt["t"] for k in probes])))
        mar_prefix = _rate(len(prefixes), lambda: [mt["t"].keys(p) for p in prefixes])
    except ImportError:
        mar_prefix = float("nan")
    _table(f"Trie, {n:,} distinct words of shared/data; ratios vs dict", rows, floor)
    print(f"  prefix search (3-char prefixes, all keys): momoka {m_prefix:,.0f}/s, marisa-trie {mar_prefix:,.0f}/s, "
          f"python scan {py_prefix:,.0f}/s")
    u = _rate(n, lambda: unique_prefix_lengths(keys))
    print(f"  unique_prefix_lengths over {n:,} words: {u:,.0f} sequences/s")
    benchmark.pedantic(lambda: t.contains_many(probes), rounds=3, iterations=1)

