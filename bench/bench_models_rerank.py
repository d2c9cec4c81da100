"""Reranker backends: pairs/s and MRR of the gold paragraph among a question's document paragraphs.

Data: SQuAD v1.1 dev half A (``../shared/data/squad_v1_dev_half_a``), 200 questions
spread over the 24 documents; the candidates of a question are all paragraphs of
its document (38 on average), the gold one is the question's ``paragraph_index``.

- cosine (the default embedder): ranks all paragraphs of each of the 200 questions;
- query likelihood (UPR with the default causal LM): ~40 GFLOP per pair on this
  135M model, so it reranks the cosine top-K of the first N questions
  (``MOMOKA_BENCH_QL_QUESTIONS``, default 20; ``MOMOKA_BENCH_QL_TOPK``, default 5);
  the MRR is over the full ranking (the reranked top-K, then cosine's order) and is
  printed beside cosine's on the same questions;
- cross-encoder: only with ``MOMOKA_BENCH_CROSS_ENCODER=/path/model.onnx`` (a
  ``tokenizer.json`` beside it); no cross-encoder is shipped.

Run:

    PYTHONPATH=python python -m pytest bench/bench_models_rerank.py --benchmark-only -s
"""

from __future__ import annotations

import json
import os
import time
import warnings

import pytest

from momoka.models import CosineReranker, Embedder, QueryLikelihoodReranker, rank

N_QUESTIONS = 200


@pytest.fixture(scope="module")
def squad(shared_data):
    d = shared_data / "squad_v1_dev_half_a"
    docs = {}
    with open(d / "documents.jsonl", encoding="utf-8") as f:
        for line in f:
            doc = json.loads(line)
            docs[doc["doc_id"]] = doc["text"].split("\n\n")
    with open(d / "questions.jsonl", encoding="utf-8") as f:
        qs = [json.loads(line) for line in f]
    step = len(qs) // N_QUESTIONS
    qs = qs[::step][:N_QUESTIONS]
    assert len(qs) == N_QUESTIONS
    return docs, qs


def _mrr(rankings, qs) -> float:
    return sum(1.0 / (r.index(q["paragraph_index"]) + 1) for r, q in zip(rankings, qs)) / len(qs)


@pytest.fixture(scope="module")
def cosine_rankings(squad):
    docs, qs = squad
    rr = CosineReranker(Embedder.default())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t0 = time.perf_counter()
        rankings = [[i for i, _ in rank(rr, q["question"], docs[q["doc_id"]])] for q in qs]
        dt = time.perf_counter() - t0
    pairs = sum(len(docs[q["doc_id"]]) for q in qs)
    return rankings, pairs, dt


def test_rerank_cosine(benchmark, squad, cosine_rankings):
    docs, qs = squad
    rankings, pairs, dt = cosine_rankings
    mrr = _mrr(rankings, qs)
    # Time the steady state too: passages already embedded, one query embedding per question.
    rr = CosineReranker(Embedder.default())
    q = qs[0]
    benchmark.pedantic(rr.score, args=(q["question"], docs[q["doc_id"]]), rounds=3, warmup_rounds=1)
    benchmark.extra_info.update(mrr=round(mrr, 4), pairs_per_s=round(pairs / dt, 1))
    print(f"\ncosine: {len(qs)} questions, {pairs} pairs in {dt:.1f}s ({pairs / dt:.1f} pairs/s cold), MRR {mrr:.4f}")


def test_rerank_query_likelihood(benchmark, squad, cosine_rankings):
    docs, qs = squad
    n = int(os.environ.get("MOMOKA_BENCH_QL_QUESTIONS", "20"))
    k = int(os.environ.get("MOMOKA_BENCH_QL_TOPK", "5"))
    qs = qs[:n]
    base = cosine_rankings[0][:n]
    ql = QueryLikelihoodReranker()
    reranked = []
    t0 = time.perf_counter()
    for q, r in zip(qs, base):
        top = r[:k]
        scores = ql.score(q["question"], [docs[q["doc_id"]][i] for i in top])
        order = [top[j] for j in sorted(range(len(top)), key=lambda j: -scores[j])]
        reranked.append(order + r[k:])
    dt = time.perf_counter() - t0
    pairs = n * k
    q = qs[0]
    benchmark.pedantic(ql.score, args=(q["question"], [docs[q["doc_id"]][i] for i in base[0][:k]]), rounds=1)
    m_ql, m_cos = _mrr(reranked, qs), _mrr(base, qs)
    benchmark.extra_info.update(mrr=round(m_ql, 4), mrr_cosine_same_questions=round(m_cos, 4), pairs_per_s=round(pairs / dt, 2))
    print(
        f"\nquery likelihood (cosine top-{k} reranked): {n} questions, {pairs} pairs in {dt:.1f}s "
        f"({pairs / dt:.2f} pairs/s), MRR {m_ql:.4f} vs cosine {m_cos:.4f} on the same questions"
    )


def test_rerank_cross_encoder(benchmark, squad):
    path = os.environ.get("MOMOKA_BENCH_CROSS_ENCODER")
    if not path:
        pytest.skip("set MOMOKA_BENCH_CROSS_ENCODER to an ONNX cross-encoder to benchmark it")
    from momoka.models import CrossEncoderReranker

    docs, qs = squad
    ce = CrossEncoderReranker(path)
    t0 = time.perf_counter()
    rankings = [[i for i, _ in rank(ce, q["question"], docs[q["doc_id"]])] for q in qs]
    dt = time.perf_counter() - t0
    pairs = sum(len(docs[q["doc_id"]]) for q in qs)
    q = qs[0]
    benchmark.pedantic(ce.score, args=(q["question"], docs[q["doc_id"]]), rounds=1)
    print(f"\ncross-encoder: {pairs} pairs in {dt:.1f}s ({pairs / dt:.1f} pairs/s), MRR {_mrr(rankings, qs):.4f}")
