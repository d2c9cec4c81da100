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
- query likelihood with and without KV reuse: the cosine top-K of N questions
  about one document (``MOMOKA_BENCH_QL_KV_QUESTIONS``, default 12), scored by
  the same UPR reranker with ``kv_cache_mb=0`` (every prompt run for every
  question) and with its passage KV cache (each passage's prompt runs once;
  questions one at a time, and all of them as one ``score_batch``);
  same scores, the ratio of ms per question printed, and the document-scope
  case (every question against every paragraph of the document) with
  ``score_matrix``;
- cross-encoder: only with ``MOMOKA_BENCH_CROSS_ENCODER=/path/model.onnx`` (a
  ``tokenizer.json`` beside it); no cross-encoder is shipped.

Run:

    PYTHONPATH=python python -m pytest bench/micro/bench_models_rerank.py --benchmark-only -s
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


def test_rerank_query_likelihood_kv_reuse(benchmark, squad, shared_data):
    import numpy as np

    docs, _ = squad
    d = next(iter(docs))
    with open(shared_data / "squad_v1_dev_half_a" / "questions.jsonl", encoding="utf-8") as f:
        pool = [q for q in map(json.loads, f) if q["doc_id"] == d]
    n = int(os.environ.get("MOMOKA_BENCH_QL_KV_QUESTIONS", "12"))
    k = int(os.environ.get("MOMOKA_BENCH_QL_TOPK", "5"))
    qs = pool[:: max(1, len(pool) // n)][:n]
    paras = docs[d]
    cos = CosineReranker(Embedder.default())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tops = [[i for i, _ in rank(cos, q["question"], paras)][:k] for q in qs]
    lm = QueryLikelihoodReranker().lm  # one model in memory for every variant
    questions, lists = [q["question"] for q in qs], [[paras[i] for i in top] for top in tops]

    def timed(fn):
        w, c = time.perf_counter(), time.process_time()
        out = fn()
        return out, time.perf_counter() - w, time.process_time() - c

    plain, cached, batch, m = (QueryLikelihoodReranker(lm, kv_cache_mb=0), QueryLikelihoodReranker(lm),
                               QueryLikelihoodReranker(lm), QueryLikelihoodReranker(lm))
    a, t_plain, c_plain = timed(lambda: [plain.score(q, ps) for q, ps in zip(questions, lists)])
    b, t_cached, c_cached = timed(lambda: [cached.score(q, ps) for q, ps in zip(questions, lists)])
    # the questions as one batch (score_batch): one prompt run per distinct passage, the misses together,
    # each passage's questions in one batch after its cached prompt
    c, t_batch, c_batch = timed(lambda: batch.score_batch(questions, lists))
    # document scope: every question against every paragraph, one prompt run per paragraph
    _, t_matrix, _ = timed(lambda: m.score_matrix(questions, paras))
    diff = max(float(np.max(np.abs(x - y))) for x, y in zip(a, b))
    diff_batch = max(float(np.max(np.abs(x - y))) for x, y in zip(a, c))
    distinct = len({i for top in tops for i in top})
    benchmark.pedantic(cached.score, args=(questions[0], lists[0]), rounds=1)
    benchmark.extra_info.update(ms_per_q_plain=round(1000 * t_plain / n, 1), ms_per_q_cached=round(1000 * t_cached / n, 1),
                                speedup=round(t_plain / t_cached, 2), max_score_diff=diff,
                                ms_per_q_batch=round(1000 * t_batch / n, 1), speedup_batch=round(t_plain / t_batch, 2),
                                max_score_diff_batch=diff_batch, cpu_s=[c_plain, c_cached, c_batch])
    print(f"\nUPR top-{k} of {n} questions on one document ({distinct} distinct passages), wall / CPU ms per question:"
          f"\n  without KV reuse: {1000 * t_plain / n:.0f} / {1000 * c_plain / n:.0f} ({plain.prompt_runs} prompt runs)"
          f"\n  with it, one question at a time: {1000 * t_cached / n:.0f} / {1000 * c_cached / n:.0f} "
          f"({cached.prompt_runs} prompt runs): {t_plain / t_cached:.2f}x wall, {c_plain / c_cached:.2f}x CPU, "
          f"max score difference {diff:.1e}"
          f"\n  with it, the {n} questions as one score_batch: {1000 * t_batch / n:.0f} / {1000 * c_batch / n:.0f} "
          f"({batch.prompt_runs} prompt runs): {t_plain / t_batch:.2f}x wall, {c_plain / c_batch:.2f}x CPU, "
          f"max score difference {diff_batch:.1e}"
          f"\n  every question x all {len(paras)} paragraphs (score_matrix): {1000 * t_matrix / n:.0f} ms/q "
          f"({m.prompt_runs} prompt runs)")


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
