"""Span location: momoka locate vs rapidfuzz partial_ratio_alignment and edlib HW.

Run: PYTHONPATH=python python -m pytest bench/micro/bench_kernels_locate.py --benchmark-only -s
"""

from __future__ import annotations

import random
import time

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _kernels_data import ALPHABET_EN, apply_edits, chinese_text, english_text
from momoka.kernels import Locator, locate  # noqa: E402

N_QUERIES = 200
N_EDLIB = 60  # edlib scans the whole text per query (about 10 ms): a subset keeps the run short


def _queries(text: str, length: int, alphabet: str, seed: int):
    rng = random.Random(seed)
    out = []
    for _ in range(N_QUERIES):
        s = rng.randrange(len(text) - length)
        k = max(1, round(0.1 * length))
        out.append((s, s + length, k, apply_edits(text[s : s + length], k, rng, alphabet)))
    return out


def _correct(start: int, end: int, q) -> bool:
    s, e, k, _ = q
    return abs(start - s) <= k and abs(end - e) <= k


def _run(name, fn, queries):
    t0 = time.perf_counter()
    spans = [fn(q[3]) for q in queries]
    dt = time.perf_counter() - t0
    ok = sum(1 for sp, q in zip(spans, queries) if sp is not None and _correct(sp[0], sp[1], q))
    return {"name": name, "qps": len(queries) / dt, "correct": ok / len(queries), "n": len(queries)}


def _report(title, rows):
    base = {r["name"]: r["qps"] for r in rows}
    print(f"\n{title}")
    print(f"  {'method':38s} {'queries/s':>11s} {'located':>8s} {'n':>4s}  vs rapidfuzz  vs edlib")
    for r in rows:
        rf = r["qps"] / base["rapidfuzz partial_ratio_alignment"] if "rapidfuzz partial_ratio_alignment" in base else float("nan")
        ed = r["qps"] / base["edlib align HW"] if "edlib align HW" in base else float("nan")
        eds = f"{ed:7.1f}x" if ed == ed else "    n/a"
        print(f"  {r['name']:38s} {r['qps']:11.0f} {r['correct']:8.3f} {r['n']:4d}  {rf:10.1f}x {eds}")


def _bench(text: str, alphabet: str, label: str, benchmark):
    fuzz = pytest.importorskip("rapidfuzz.fuzz")

    try:
        import edlib
    except ImportError:  # pragma: no cover
        edlib = None
    for length in (40, 200):
        queries = _queries(text, length, alphabet, seed=length)
        rows = []
        loc = Locator(text)
        many = {}

        def batch():
            many["r"] = loc.locate_many([q[3] for q in queries], threads=1)

        t0 = time.perf_counter()
        batch()
        dt = time.perf_counter() - t0
        ok = sum(_correct(int(r[0]), int(r[1]), q) for r, q in zip(many["r"], queries))
        rows.append({"name": "momoka Locator.locate_many (1 thread)", "qps": len(queries) / dt,
                     "correct": ok / len(queries), "n": len(queries)})
        t0 = time.perf_counter()
        Locator(text)
        build = time.perf_counter() - t0
        rows.append(_run("momoka locate (per call, cached index)", lambda p: locate(p, text), queries))
        rows.append(_run("momoka locate (per call, full scan)", lambda p: locate(p, text, index=False), queries[:N_EDLIB]))

        def rf(p):
            a = fuzz.partial_ratio_alignment(p, text)
            return (a.dest_start, a.dest_end)

        rows.append(_run("rapidfuzz partial_ratio_alignment", rf, queries))
        if edlib is not None:
            def ed(p):
                r = edlib.align(p, text, mode="HW", task="locations")
                return (r["locations"][0][0], r["locations"][0][1] + 1) if r["locations"] else None

            try:
                rows.append(_run("edlib align HW", ed, queries[:N_EDLIB]))
            except Exception as exc:  # edlib refuses alphabets over 256 symbols
                print(f"\n  edlib on {label}: refused ({type(exc).__name__}: {str(exc)[:80]})")
        _report(f"locate, {label}, {len(text):,} chars, {length}-char snippets with {queries[0][2]} edits "
                f"(index build {build * 1e3:.1f} ms)", rows)
    benchmark.pedantic(batch, rounds=3, iterations=1)


def test_locate_english(shared_data, benchmark):
    text = english_text(shared_data)
    _bench(text, ALPHABET_EN, "English (SQuAD half A)", benchmark)


def test_locate_chinese(benchmark):
    pytest.importorskip("jieba")
    text = chinese_text()
    alphabet = "".join(sorted(set(text[:20000])))
    _bench(text, alphabet, "Chinese (jieba dictionary words)", benchmark)
