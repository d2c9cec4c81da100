"""Momoka-RAG appendix E: sensitivity of retrieval to the MCTS iterations and rollout length.

Grid: iterations {20, 50, 100} x rollout {1, 3, 5}, on one evaluation set (default
dragonball_finance_en, the first 60 questions with evidence; override with
MOMOKA_SENS_SET / MOMOKA_SENS_LIMIT), fixed-length chunks of 128 tokens, paths from the
embedding referee (cosine > 0.5) on the native engine, the Trail retriever with the
cosine reranker. Prints eq. 6 sums (item view) per setting and the path-building time.

    PYTHONPATH=python python -m pytest bench/bench_momoka_sensitivity.py --benchmark-only -s
    PYTHONPATH=python python bench/bench_momoka_sensitivity.py     # the same table without pytest
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

ITERATIONS = (20, 50, 100)
ROLLOUTS = (1, 3, 5)


def sensitivity(data_dir: Path, name: str, limit: int) -> tuple[str, list[dict]]:
    from momoka.chunking import get_chunker
    from momoka.eval import evaluate_retrieval, format_table, load_dataset
    from momoka.methods.momoka.ablation import Corpus, attach_paths, compute_paths
    from momoka.methods.momoka.trail import TrailRetriever
    from momoka.models import CosineReranker, Embedder

    ds = load_dataset(data_dir / name)
    questions = [q for q in ds.questions if q.gold][:limit]
    emb = Embedder.default()
    corpus = Corpus(ds.documents, get_chunker("fixed", size=128), emb)
    reranker = CosineReranker(emb, cache_size=200_000)  # shared: composites seen before are not re-embedded
    ix = corpus.index(with_titles=True)
    corpus.raw_vectors()  # embed the chunk texts once, before the path timings
    rows, out = [], []
    base = ix.search_batch([q.question for q in questions], k=5, retriever="dense")
    rep = evaluate_retrieval({q.qid: [[h.span] for h in hs] for q, hs in zip(questions, base)}, questions,
                             mode=ds.evidence_mode)
    rows.append(["mm (no paths)", "-", "-"] + [f"{rep.sums[m] * (100 if m in ('recall', 'precision') else 1):.2f}"
                                               for m in ("recall", "precision", "mrr", "f1")] + ["-", "-"])
    for it in ITERATIONS:
        for ro in ROLLOUTS:
            paths, how = compute_paths(corpus, iterations=it, rollout=ro)
            attach_paths(ix, corpus, paths, how)
            tr = TrailRetriever(ix, reranker=reranker)
            t0 = time.perf_counter()
            res = tr.retrieve_batch([q.question for q in questions], k=5)
            dt = (time.perf_counter() - t0) / len(questions)
            items = {q.qid: [list(r.spans) for r in rs] for q, rs in zip(questions, res)}
            rep = evaluate_retrieval(items, questions, mode=ds.evidence_mode)
            d = {"iterations": it, "rollout": ro, "paths_seconds": how["seconds"],
                 "mean_path_len": how["mean_path_len"], "seconds_per_question": dt, "sums": rep.sums}
            out.append(d)
            rows.append(["momoka", str(it), str(ro)]
                        + [f"{rep.sums[m] * (100 if m in ('recall', 'precision') else 1):.2f}"
                           for m in ("recall", "precision", "mrr", "f1")]
                        + [f"{how['seconds']:.2f}", f"{how['mean_path_len']:.2f}"])
            print(f"  iterations {it}, rollout {ro}: recall sum {rep.sums['recall']:.3f}", file=sys.stderr, flush=True)
    table = format_table(["method", "iterations", "rollout", "Recall", "Precision", "MRR", "F1", "paths s",
                          "mean |P|"], rows)
    head = (f"{name}: {len(questions)} questions, {corpus.n_chunks} chunks (fixed 128), embedding referee, "
            "cosine reranker; eq. 6 sums (Recall/Precision x100), item view")
    return head + "\n" + table, out


def test_sensitivity(benchmark, shared_data):
    name = os.environ.get("MOMOKA_SENS_SET", "dragonball_finance_en")
    limit = int(os.environ.get("MOMOKA_SENS_LIMIT", "60"))
    table, _ = benchmark.pedantic(sensitivity, args=(shared_data, name, limit), rounds=1, iterations=1)
    print("\n" + table)


if __name__ == "__main__":
    root = Path(__file__).resolve().parents[1]
    sys.path.insert(0, str(root / "python"))
    from momoka.eval.datasets import find_shared_data

    d = find_shared_data(root)
    if d is None:
        sys.exit("shared data not found (set MOMOKA_SHARED_DATA)")
    print(sensitivity(d, os.environ.get("MOMOKA_SENS_SET", "dragonball_finance_en"),
                      int(os.environ.get("MOMOKA_SENS_LIMIT", "60")))[0])
