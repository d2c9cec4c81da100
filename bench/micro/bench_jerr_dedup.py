"""JERR entity dedup (native Bloom + trie, SimHash <= 3 bits) vs a plain-Python set + all-pairs Hamming reference.

The entities are those the offline back-end extracts from every QuALITY story
(``quality_leval``, 15 documents); both sides dedup each document's entity
mentions, in the same run, and must agree exactly.

Run: PYTHONPATH=python python -m pytest bench/micro/bench_jerr_dedup.py --benchmark-only -s
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
from _oracles.jerr import ref_dedup  # noqa: E402
from momoka.methods.jerr import dedup, extract_offline, make_units  # noqa: E402
from momoka.chunking import get_chunker  # noqa: E402
from momoka.text import Document  # noqa: E402


def _mentions(shared_data) -> list[list[str]]:
    out = []
    chunker = get_chunker("recursive", size=200)
    with open(shared_data / "quality_leval" / "documents.jsonl") as f:
        for line in f:
            d = json.loads(line)
            doc = Document(d["text"], doc_id=d["doc_id"])
            cs = chunker(doc)
            units = make_units(d["doc_id"], d["text"], [(c.start, c.end) for c in cs], list(range(len(cs))), 600)
            names = [n for ex in extract_offline(units, d["text"]) for n in ex.entities]
            out.append(names)
    return out


def test_jerr_dedup_vs_plain_python(shared_data, benchmark):
    docs = _mentions(shared_data)
    t0 = time.perf_counter()
    ref = [ref_dedup(names) for names in docs]
    t_ref = time.perf_counter() - t0
    got = benchmark(lambda: [dedup(names) for names in docs])
    t_ours = benchmark.stats.stats.mean
    for g, (rep, exact, near) in zip(got, ref):
        assert g.rep == rep and (g.exact_merges, g.near_merges) == (exact, near)
    n = sum(map(len, docs))
    ex = sum(g.exact_merges for g in got)
    nr = sum(g.near_merges for g in got)
    print(f"\nJERR dedup on {len(docs)} QuALITY stories: {n} entity mentions -> {n - ex - nr} entities "
          f"({ex} exact merges, {nr} near merges); momoka {t_ours * 1e3:.1f} ms, plain Python "
          f"{t_ref * 1e3:.1f} ms, ratio {t_ref / t_ours:.1f}x")
