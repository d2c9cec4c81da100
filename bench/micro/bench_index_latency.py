"""Query latency of an index over all SQuAD half-A documents (dense, BM25, hybrid).

Builds (or reuses, with MOMOKA_BENCH_STORE=DIR) a store of the 24 documents of
../shared/data/squad_v1_dev_half_a with the default chunker and embedder, then
times ``Index.search`` one query at a time, as ``momoka query`` runs it
without the process start: query checks, query embedding (dense, hybrid),
HNSW / BM25 search, fusion, and building the Result.
Target: p50 and p99 under 50 ms for dense and BM25.

Run:  PYTHONPATH=python python -m pytest bench/micro/bench_index_latency.py --benchmark-only -s
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import pytest

N_QUERIES = 300


@pytest.fixture(scope="module")
def squad_index(shared_data, tmp_path_factory):
    from momoka.eval import load_dataset
    from momoka import Index

    ds = load_dataset(shared_data / "squad_v1_dev_half_a")
    env = os.environ.get("MOMOKA_BENCH_STORE")
    store = Path(env) if env else tmp_path_factory.mktemp("latency") / "squad.store"
    if (store / "manifest.json").exists():
        ix = Index.open(store)
    else:
        ix = Index.build(ds.documents, store=store)
    questions = [q.question for q in ds.questions[:N_QUERIES]]
    return ix, questions


@pytest.mark.parametrize("method", ["bm25", "dense", "hybrid"])
def test_query_latency(squad_index, method, benchmark):
    ix, questions = squad_index
    ix.search(questions[0], k=5, retriever=method)  # warm-up (loads the embedder once)
    times = []
    for q in questions:
        t = time.perf_counter()
        ix.search(q, k=5, retriever=method)
        times.append((time.perf_counter() - t) * 1000)
    p50, p99 = np.percentile(times, [50, 99])
    extra = ""
    if method != "bm25":
        emb = []
        for q in questions:
            t = time.perf_counter()
            ix.corpus.embedder.embed([q])
            emb.append((time.perf_counter() - t) * 1000)
        e50, e99 = np.percentile(emb, [50, 99])
        extra = f"; of which query embedding p50 {e50:.2f} ms, p99 {e99:.2f} ms"

    benchmark.pedantic(lambda: ix.search(questions[1], k=5, retriever=method), rounds=20, iterations=1)
    print(f"\n{method:6s}: {ix.store.n_chunks} chunks, {len(times)} queries: "
          f"p50 {p50:.2f} ms, p99 {p99:.2f} ms, mean {np.mean(times):.2f} ms (target < 50 ms){extra}")
