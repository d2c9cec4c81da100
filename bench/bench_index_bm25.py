"""BM25 query throughput and top-10 agreement: momoka vs bm25s vs rank_bm25.

Corpus: 10,000 passages of 100 words cut from the documents of ../shared/data
(consecutive 100-word windows). Queries: the data sets' questions. All three
engines get the same tokens (momoka's tokeniser, no stemming, no stopwords),
so the comparison is of the scoring engines alone. Agreement is measured
against rank_bm25's BM25Okapi (the reference formula): for each query, the
fraction of momoka's top-10 whose rank_bm25 score is at least rank_bm25's
10th best score (so ties at the cut-off do not count as disagreement).

Run:  PYTHONPATH=python python -m pytest bench/bench_index_bm25.py --benchmark-only -s
"""

from __future__ import annotations

import json
import time

import numpy as np
import pytest
from momoka.index import BM25

N_PASSAGES = 10_000
WORDS = 100
N_QUERIES = 2_000
N_QUERIES_RANK = 200  # rank_bm25 is slow: a subset


@pytest.fixture(scope="module")
def corpus(shared_data):
    passages: list[str] = []
    for d in sorted(shared_data.iterdir()):
        f = d / "documents.jsonl"
        if not f.exists():
            continue
        for line in f.read_text(encoding="utf-8").splitlines():
            words = json.loads(line)["text"].split()
            for i in range(0, len(words) - WORDS + 1, WORDS):
                passages.append(" ".join(words[i : i + WORDS]))
    passages = passages[:N_PASSAGES]
    queries: list[str] = []
    for d in sorted(shared_data.iterdir()):
        f = d / "questions.jsonl"
        if f.exists():
            queries += [json.loads(line)["question"] for line in f.read_text(encoding="utf-8").splitlines()]
    rng = np.random.default_rng(0)
    queries = [q for q in rng.permutation(np.array(queries, dtype=object)).tolist() if q.strip()][:N_QUERIES]
    return passages, queries


def _qps(fn, n):
    t = time.perf_counter()
    out = fn()
    return n / (time.perf_counter() - t), out


def test_bm25_three_engines(corpus, benchmark):
    bm25s = pytest.importorskip("bm25s")
    rank_bm25 = pytest.importorskip("rank_bm25")
    passages, queries = corpus
    ix = BM25()
    t = time.perf_counter()
    ix.add(passages)
    t_index_momoka = time.perf_counter() - t
    ptoks = [ix.tokenize(p) for p in passages]
    qtoks = [ix.tokenize(q) for q in queries]

    t = time.perf_counter()
    ret = bm25s.BM25(method="robertson", k1=1.5, b=0.75)
    ret.index(ptoks, show_progress=False)
    t_index_bm25s = time.perf_counter() - t
    t = time.perf_counter()
    ref = rank_bm25.BM25Okapi(ptoks)
    t_index_rank = time.perf_counter() - t

    # momoka: one query at a time from Python (str in, tokenised natively)
    qps_single, _ = _qps(lambda: [ix.search(q, 10) for q in queries], len(queries))
    qps_batch1, (ids, _) = _qps(lambda: ix.search_batch(queries, 10, n_threads=1), len(queries))
    qps_batch, _ = _qps(lambda: ix.search_batch(queries, 10, n_threads=0), len(queries))
    # bm25s: pre-tokenised queries (its tokenisation is not timed)
    qps_bm25s, _ = _qps(lambda: ret.retrieve(qtoks, k=10, show_progress=False, n_threads=1), len(queries))
    qps_bm25s_mt, (bids, _) = _qps(lambda: ret.retrieve(qtoks, k=10, show_progress=False, n_threads=0), len(queries))
    # rank_bm25: get_scores + argsort, on a subset
    sub = qtoks[:N_QUERIES_RANK]
    qps_rank, ref_scores = _qps(lambda: [ref.get_scores(q) for q in sub], len(sub))

    def agreement(top_ids):
        vals = []
        for i, sc in enumerate(ref_scores):
            cut = np.sort(sc)[-10]
            got = [d for d in top_ids[i][:10] if d >= 0]
            vals.append(sum(sc[d] >= cut - 1e-9 for d in got) / 10 if cut > 0 else 1.0)
        return float(np.mean(vals))

    agree_momoka = agreement(ids)
    agree_bm25s = agreement(bids)
    benchmark.pedantic(lambda: ix.search_batch(queries, 10, n_threads=1), rounds=3, iterations=1)

    print(f"\nBM25 on {len(passages)} passages x {WORDS} words, {len(queries)} queries "
          f"(rank_bm25: {len(sub)})")
    print(f"{'engine':34s} {'queries/s':>10s} {'top10 agree':>12s} {'index s':>8s}")
    print(f"{'momoka search() loop, 1 thread':34s} {qps_single:10.0f} {agree_momoka:12.3f} {t_index_momoka:8.2f}")
    print(f"{'momoka search_batch, 1 thread':34s} {qps_batch1:10.0f} {agree_momoka:12.3f}")
    print(f"{'momoka search_batch, all threads':34s} {qps_batch:10.0f} {agree_momoka:12.3f}")
    print(f"{'bm25s retrieve, 1 thread':34s} {qps_bm25s:10.0f} {agree_bm25s:12.3f} {t_index_bm25s:8.2f}")
    print(f"{'bm25s retrieve, all threads':34s} {qps_bm25s_mt:10.0f} {agree_bm25s:12.3f}")
    print(f"{'rank_bm25 get_scores':34s} {qps_rank:10.0f} {1.0:12.3f} {t_index_rank:8.2f}")
    print(f"ratio momoka/bm25s (1 thread): {qps_batch1 / qps_bm25s:.1f}x; "
          f"momoka/rank_bm25: {qps_batch1 / qps_rank:.0f}x")
    assert agree_momoka >= 0.95
