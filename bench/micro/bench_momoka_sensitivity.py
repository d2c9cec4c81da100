"""Momoka-RAG appendix E: sensitivity of retrieval to the MCTS iterations and rollout length.

Grid: iterations {20, 50, 100} x rollout {1, 3, 5}, on one evaluation set (default
dragonball_finance_en, the first 60 questions with evidence; override with
MOMOKA_SENS_SET / MOMOKA_SENS_LIMIT), fixed-length chunks of 128 tokens, paths from the
embedding referee (cosine > 0.5) on the native engine, the Trail retriever with the
cosine reranker. Prints eq. 6 sums (item view) per setting and the path-building time.

    PYTHONPATH=python python -m pytest bench/micro/bench_momoka_sensitivity.py --benchmark-only -s
    PYTHONPATH=python python bench/micro/bench_momoka_sensitivity.py     # the same table without pytest
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

ITERATIONS = (20, 50, 100)
ROLLOUTS = (1, 3, 5)


def sensitivity(data_dir: Path, name: str, limit: int) -> tuple[str, list[dict]]:
    from momoka.eval import evaluate_retrieval, format_table, load_dataset
    from momoka import Index
    from momoka.methods.momoka import PathRelator, TrailRetriever
    from momoka.models import CosineReranker, Embedder

    ds = load_dataset(data_dir / name)
    questions = [q for q in ds.questions if q.gold][:limit]
    emb = Embedder.default()
    ix = Index.build(ds.documents, chunker="fixed", size=128, embedder=emb, enrich=["title"], progress=False)
    reranker = CosineReranker(emb, cache_size=200_000)  # shared: composites seen before are not re-embedded
    rows, out = [], []
    base = ix.search_batch([q.question for q in questions], k=5, retriever="mm")
    rep = evaluate_retrieval({q.qid: r.spans() for q, r in zip(questions, base)}, questions, mode=ds.evidence_mode)
    rows.append(["mm (no paths)", "-", "-"] + [f"{rep.sums[m] * (100 if m in ('recall', 'precision') else 1):.2f}"
                                               for m in ("recall", "precision", "mrr", "f1")] + ["-", "-"])
    for it in ITERATIONS:
        for ro in ROLLOUTS:
            if ix.store.has_relation("paths"):
                ix.store.remove_artifact("relation", "paths")
            t0 = time.perf_counter()
            PathRelator("embedding", iterations=it, rollout=ro, progress=False).relate(ix, ix.corpus.doc_ids)
            paths_s = time.perf_counter() - t0
            rel = ix.store.relation("paths")
            lens = [len(rel.get(c)) for c in ix.store.chunks.ids()]
            mean_len = sum(lens) / max(len(lens), 1)
            tr = TrailRetriever(ix, reranker=reranker)
            t0 = time.perf_counter()
            res = tr.retrieve_batch([q.question for q in questions], k=5)
            dt = (time.perf_counter() - t0) / len(questions)
            rep = evaluate_retrieval({q.qid: r.spans() for q, r in zip(questions, res)}, questions,
                                     mode=ds.evidence_mode)
            d = {"iterations": it, "rollout": ro, "paths_seconds": paths_s, "mean_path_len": mean_len,
                 "seconds_per_question": dt, "sums": rep.sums}
            out.append(d)
            rows.append(["momoka", str(it), str(ro)]
                        + [f"{rep.sums[m] * (100 if m in ('recall', 'precision') else 1):.2f}"
                           for m in ("recall", "precision", "mrr", "f1")]
                        + [f"{paths_s:.2f}", f"{mean_len:.2f}"])
            print(f"  iterations {it}, rollout {ro}: recall sum {rep.sums['recall']:.3f}", file=sys.stderr, flush=True)
    table = format_table(["method", "iterations", "rollout", "Recall", "Precision", "MRR", "F1", "paths s",
                          "mean |P|"], rows)
    head = (f"{name}: {len(questions)} questions, {ix.store.n_chunks} chunks (fixed 128), embedding referee, "
            "cosine reranker; eq. 6 sums (Recall/Precision x100), item view")
    return head + "\n" + table, out


def test_sensitivity(benchmark, shared_data):
    name = os.environ.get("MOMOKA_SENS_SET", "dragonball_finance_en")
    limit = int(os.environ.get("MOMOKA_SENS_LIMIT", "60"))
    table, _ = benchmark.pedantic(sensitivity, args=(shared_data, name, limit), rounds=1, iterations=1)
    print("\n" + table)


if __name__ == "__main__":
    root = Path(__file__).resolve().parents[2]
    sys.path.insert(0, str(root / "python"))
    from momoka.eval.datasets import find_shared_data

    d = find_shared_data(root)
    if d is None:
        sys.exit("shared data not found (set MOMOKA_SHARED_DATA)")
    print(sensitivity(d, os.environ.get("MOMOKA_SENS_SET", "dragonball_finance_en"),
                      int(os.environ.get("MOMOKA_SENS_LIMIT", "60")))[0])
