"""Momoka-Trail retrieval latency per question (offline defaults), beside plain dense top-K.

dragonball_finance_en, fixed-length chunks of 128 tokens, titles prepended, paths from the
embedding referee, default embedder; K = 5, so 10 chunks are expanded and every candidate is
reranked by cosine with the same embedder. ``cold``: the reranker keeps no cache (every
candidate embedded for every question); ``warm``: candidates embedded once and cached (the
default reranker caches 10,000 texts). One question at a time (``retrieve``), first 40
questions with evidence (MOMOKA_LAT_LIMIT).

    PYTHONPATH=python python -m pytest bench/micro/bench_momoka_trail_latency.py --benchmark-only -s
"""

from __future__ import annotations

import os
import statistics
import time


def test_trail_latency(benchmark, shared_data):
    from momoka.eval import format_table, load_dataset
    from momoka import Index
    from momoka.methods.momoka import TrailRetriever
    from momoka.models import CosineReranker, Embedder

    ds = load_dataset(shared_data / "dragonball_finance_en")
    qs = [q.question for q in ds.questions if q.gold][: int(os.environ.get("MOMOKA_LAT_LIMIT", "40"))]
    emb = Embedder.default()
    t0 = time.perf_counter()
    ix = Index.build(ds.documents, chunker="fixed", size=128, embedder=emb, enrich=["title"],
                     relate=[("paths", {"referee": "embedding"})], progress=False)
    build_s = time.perf_counter() - t0
    rel = ix.store.relation("paths")
    firsts = []
    for d in ix.corpus.doc_ids:
        ids = ix.store.documents[d].chunk_ids
        pos = {c: i for i, c in enumerate(ids)}
        firsts += [(i, pos[int(rel.get(c)[0])]) for i, c in enumerate(ids) if len(rel.get(c))]
    adjacent = sum(abs(i - j) == 1 for i, j in firsts) / max(len(firsts), 1)

    def per_question(fn):
        out = []
        for q in qs:
            t0 = time.perf_counter()
            fn(q)
            out.append(time.perf_counter() - t0)
        return out

    dense = per_question(lambda q: ix.search(q, k=5, retriever="dense"))
    cold_tr = TrailRetriever(ix, reranker=CosineReranker(emb, cache_size=0))
    cold = per_question(lambda q: cold_tr.retrieve(q, k=5))
    warm_tr = TrailRetriever(ix, reranker=CosineReranker(emb, cache_size=100_000))
    per_question(lambda q: warm_tr.retrieve(q, k=5))  # fill the cache
    warm = benchmark.pedantic(per_question, args=(lambda q: warm_tr.retrieve(q, k=5),), rounds=1, iterations=1)
    cands = warm_tr.last_stats["candidates"]

    def row(name, xs):
        return [name, f"{1000 * statistics.median(xs):.1f}", f"{1000 * statistics.mean(xs):.1f}",
                f"{1000 * max(xs):.1f}", f"{statistics.mean(xs) / statistics.mean(dense):.1f}x"]

    print(f"\n{len(qs)} questions, {ix.store.n_chunks} chunks, index with titles and paths built in {build_s:.2f}s, "
          f"{cands} candidates for the last question; first path node adjacent to its root for "
          f"{100 * adjacent:.0f}% of chunks; load average {os.getloadavg()[0]:.1f}")
    print(format_table(["retriever", "median ms", "mean ms", "max ms", "mean vs dense"],
                       [row("dense top-5", dense), row("trail (cold reranker)", cold),
                        row("trail (warm reranker cache)", warm)]))
