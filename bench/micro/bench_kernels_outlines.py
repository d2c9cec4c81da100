"""Outline recovery on SQuAD half-A: momoka recover_outlines vs a naive head-then-tail search.

Every document is chunked by paragraphs; each outline is the first and last 10
characters of a paragraph, each with one random edit, joined by [MASK].
Run: PYTHONPATH=python python -m pytest bench/micro/bench_kernels_outlines.py --benchmark-only -s
"""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _kernels_data import ALPHABET_EN, apply_edits, load_texts  # noqa: E402
from momoka.kernels import locate, recover_outlines  # noqa: E402


def _cases(shared_data, seed=0):
    rng = random.Random(seed)
    cases = []
    for text in load_texts(shared_data / "squad_v1_dev_half_a"):
        spans, pos = [], 0
        for p in text.split("\n\n"):
            spans.append((pos, pos + len(p)))
            pos += len(p) + 2
        outlines = [
            apply_edits(text[s : s + 10], 1, rng, ALPHABET_EN) + "[MASK]" + apply_edits(text[e - 10 : e], 1, rng, ALPHABET_EN)
            for s, e in spans
        ]
        cases.append((text, spans, outlines))
    return cases


def _naive(text, outlines):
    """Each outline on its own: best head in the whole text, then the best tail after it."""
    out = []
    for o in outlines:
        head, tail = o.split("[MASK]")
        h = locate(head, text, index=True)
        t = locate(tail, text, start=h.end, index=True) if h else None
        out.append((h.start, t.end) if h and t else (-1, -1))
    return out


def test_recover_outlines_squad(shared_data, benchmark):
    cases = _cases(shared_data)
    rows = {}
    for name, fn in (
        ("momoka recover_outlines", lambda t, o: [(c.match_start, c.match_end) for c in recover_outlines(t, o)]),
        ("naive head-then-tail (momoka locate)", _naive),
    ):
        total = exact = 0
        t0 = time.perf_counter()
        for text, spans, outlines in cases:
            got = fn(text, outlines)
            total += len(spans)
            exact += sum(g == s for g, s in zip(got, spans))
        dt = time.perf_counter() - t0
        rows[name] = (dt / len(cases) * 1e3, exact / total, total)
    print(f"\noutline recovery, SQuAD half A: {len(cases)} documents, {rows['momoka recover_outlines'][2]} paragraphs")
    print(f"  {'method':40s} {'ms/doc':>8s} {'both ends exact':>16s}")
    for name, (ms, frac, _) in rows.items():
        print(f"  {name:40s} {ms:8.2f} {frac:16.4f}")
    text, _, outlines = cases[0]
    benchmark.pedantic(lambda: [recover_outlines(t, o) for t, _, o in cases], rounds=3, iterations=1)
