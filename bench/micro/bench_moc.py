"""MoC / Meta-Chunking benchmarks on the local causal LM (same input, same run; the ratio is printed).

Run: PYTHONPATH=python python -m pytest bench/micro/bench_moc.py --benchmark-only -s

* PPL chunking: momoka's scoring (segments of 4096 tokens after 1024 context
  tokens, each token run once per segment) against the reference procedure
  written plainly (batches of ``B`` tokens, each re-run from scratch with up to
  ``W - B`` preceding tokens; the reference uses B=4096, W=9000, scaled here to
  B=512, W=2048 so a short input shows the recompute), tokens/s of each.
* PPL scoring against the forward pass it runs, on a whole Qasper paper: tokens/s of the chunker,
  of a plain prefill of its first 998 tokens (issue #28's prefill figure), the share of time inside
  onnxruntime and the forward rate of each 512-token block by the cache length it attends over.
* BC / CS cost per document with and without KV reuse (and with BC and CS computed
  separately instead of from one shared table), seconds and token positions run.
* Meta-chunker end-to-end seconds per 1,000 characters with the local model.

Inputs: the first ``MOMOKA_BENCH_CHARS`` (default 6000) characters of the first
SQuAD half-A document.
"""

from __future__ import annotations

import json
import os
import time

import pytest

CHARS = int(os.environ.get("MOMOKA_BENCH_CHARS", "6000"))


@pytest.fixture(scope="module")
def lm():
    from momoka.models import default_causal_lm

    return default_causal_lm()


@pytest.fixture(scope="module")
def text(shared_data):
    rec = json.loads((shared_data / "squad_v1_dev_half_a" / "documents.jsonl").open().readline())
    return rec["text"][:CHARS]


def _reference_scoring(lm, ids, B=512, W=2048):
    """The reference's long-document path, plainly: every batch recomputes its preceding context."""
    out = []
    for s in range(0, len(ids), B):
        ctx = ids[max(0, s - (W - B)):s] or [lm.doc_start_id]
        out.append(lm.score_ids([(ctx, ids[s:s + B])])[0])
    return out


def test_ppl_chunking_vs_reference_procedure(benchmark, lm, text):
    from momoka.methods.moc import PPLChunker

    ids = lm.encode(text)
    t0 = time.perf_counter()
    _reference_scoring(lm, ids)
    t_ref = time.perf_counter() - t0
    ch = PPLChunker(lm, cache=False)
    t0 = time.perf_counter()
    benchmark.pedantic(lambda: ch.chunk_spans(text), rounds=1, iterations=1)
    t_mom = time.perf_counter() - t0
    print(f"\nPPL scoring of {len(ids)} tokens: momoka {len(ids) / t_mom:.0f} tok/s, reference procedure "
          f"{len(ids) / t_ref:.0f} tok/s, ratio {t_ref / t_mom:.2f}x")


class _TimeForward:
    """Records (cache length, tokens, seconds) of every forward run the LM makes while active."""

    def __init__(self, lm):
        self.lm, self.runs = lm, []

    def __enter__(self):
        orig = self.lm._forward

        def fwd(ids, mask, pos, cache):
            t = time.perf_counter()
            out = orig(ids, mask, pos, cache)
            self.runs.append((cache.length, int(ids.shape[0] * ids.shape[1]), time.perf_counter() - t))
            return out

        self.lm._forward = fwd
        return self

    def __exit__(self, *exc):
        del self.lm._forward


def test_ppl_scoring_vs_prefill(benchmark, lm, shared_data):
    """Where PPL chunking's time goes on a real document (the first Qasper paper, about 3,000 tokens)."""
    from momoka.methods.moc import PPLChunker

    rec = json.loads((shared_data / "leval_qasper" / "documents.jsonl").open().readline())
    text = rec["text"]
    ids = lm.encode(text)
    t0 = time.perf_counter()
    lm.prefix_state(ids[:998])  # one prompt's prefill, as generation runs it
    t_pre = time.perf_counter() - t0
    ch = PPLChunker(lm, cache=False, progress=False)
    t0 = time.perf_counter()
    with _TimeForward(lm) as tf:
        benchmark.pedantic(lambda: ch.chunk_spans(text), rounds=1, iterations=1)
    t_ppl = time.perf_counter() - t0
    t_fwd = sum(r[2] for r in tf.runs)
    print(f"\nPPL chunking of {len(text)} chars ({len(ids)} tokens): {len(ids) / t_ppl:.0f} tok/s; prefill of the "
          f"first 998 tokens {998 / t_pre:.0f} tok/s; {100 * t_fwd / t_ppl:.0f} % of the chunker's time in the "
          f"forward runs, the rest the log-softmax over the vocabulary and bookkeeping; tokens run "
          f"{sum(r[1] for r in tf.runs)} for {len(ids)} scored")
    for cache, n, dt in tf.runs:
        print(f"  block of {n} tokens after {cache} cached: {n / dt:.0f} tok/s")


class _CountTokens:
    """Counts the token positions (padding included) the LM runs while active."""

    def __init__(self, lm):
        self.lm, self.n = lm, 0

    def __enter__(self):
        orig = self.lm._forward

        def fwd(ids, *a, **k):
            self.n += int(ids.shape[0] * ids.shape[1])
            return orig(ids, *a, **k)

        self.lm._forward = fwd
        return self

    def __exit__(self, *exc):
        del self.lm._forward


def _separate_passes(lm, chunks):
    """The passes BC and CS made before they shared one table: BC's alone pass and one context pass per
    consecutive pair, CS's alone pass and one context pass per chunk with all others as targets."""
    from momoka.models.perplexity import mean_nll_given

    mean_nll_given(lm, None, chunks[1:])
    for k in range(len(chunks) - 1):
        mean_nll_given(lm, chunks[k], [chunks[k + 1]])
    mean_nll_given(lm, None, chunks)
    for i in range(len(chunks)):
        mean_nll_given(lm, chunks[i], [c for j, c in enumerate(chunks) if j != i])


def test_bc_cs_with_and_without_kv_reuse(benchmark, lm, text):
    from momoka.eval.chunk_quality import (
        boundary_clarity,
        chunk_stickiness,
        quality_of_chunks,
    )
    from momoka.methods.moc import dynamic_merge, sentence_spans

    doc = text[:2000]
    spans = dynamic_merge(sentence_spans(doc), 300, lambda a, b: b - a)
    chunks = [doc[a:b] for a, b in spans]
    runs = {}
    t0 = time.perf_counter()
    with _CountTokens(lm) as c:
        quality_of_chunks(doc, spans, metrics=("bc", "cs"), lm=lm, reuse_kv=False)
    runs["no KV reuse (every pair and alone score run in full)"] = (time.perf_counter() - t0, c.n)
    t0 = time.perf_counter()
    with _CountTokens(lm) as c:
        _separate_passes(lm, chunks)
    runs["KV reuse, each metric its own passes, alone scores run separately (the earlier code)"] = \
        (time.perf_counter() - t0, c.n)
    t0 = time.perf_counter()
    with _CountTokens(lm) as c:
        boundary_clarity(lm, chunks)
        chunk_stickiness(lm, chunks)
    runs["KV reuse, BC and CS each from its own table"] = (time.perf_counter() - t0, c.n)
    t0 = time.perf_counter()
    with _CountTokens(lm) as c:
        benchmark.pedantic(lambda: quality_of_chunks(doc, spans, metrics=("bc", "cs"), lm=lm),
                           rounds=1, iterations=1)
    t_kv = time.perf_counter() - t0
    runs["KV reuse, one table shared by BC and CS"] = (t_kv, c.n)
    print(f"\nBC+CS on one document of {len(doc)} chars, {len(spans)} chunks (CS over all of them):")
    for name, (t, n) in runs.items():
        print(f"  {name}: {t:.1f}s, {n} token positions run, {t / t_kv:.2f}x the shared table's time")


def test_meta_chunker_seconds_per_1000_chars(benchmark, lm, text):
    from momoka.llm import LocalClient
    from momoka.methods.moc import MetaChunker

    sample = text[:2000]
    ch = MetaChunker(LocalClient(lm, cache=False), max_tokens=256)
    t0 = time.perf_counter()
    benchmark.pedantic(lambda: ch.chunk_spans_batch([sample]), rounds=1, iterations=1)
    dt = time.perf_counter() - t0
    print(f"\nmeta-chunker: {dt / len(sample) * 1000:.1f}s per 1,000 chars; {ch.stats.to_dict()}")
