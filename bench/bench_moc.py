"""MoC / Meta-Chunking benchmarks on the local causal LM (same input, same run; the ratio is printed).

Run: PYTHONPATH=python python -m pytest bench/bench_moc.py --benchmark-only -s

* PPL chunking: momoka's scoring (segments of 4096 tokens after 1024 context
  tokens, each token run once per segment) against the reference procedure
  written plainly (batches of ``B`` tokens, each re-run from scratch with up to
  ``W - B`` preceding tokens; the reference uses B=4096, W=9000, scaled here to
  B=512, W=2048 so a short input shows the recompute), tokens/s of each.
* BC / CS cost per document with and without KV reuse.
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


def test_bc_cs_with_and_without_kv_reuse(benchmark, lm, text):
    from momoka.eval.chunk_quality import quality_of_chunks
    from momoka.methods.moc import dynamic_merge, sentence_spans

    spans = dynamic_merge(sentence_spans(text[:2000]), 300, lambda a, b: b - a)
    t0 = time.perf_counter()
    quality_of_chunks(text, spans, metrics=("bc", "cs"), lm=lm, reuse_kv=False)
    t_plain = time.perf_counter() - t0
    t0 = time.perf_counter()
    benchmark.pedantic(lambda: quality_of_chunks(text, spans, metrics=("bc", "cs"), lm=lm), rounds=1, iterations=1)
    t_kv = time.perf_counter() - t0
    print(f"\nBC+CS on {len(spans)} chunks (2,000 chars): KV reuse {t_kv:.1f}s, full passes {t_plain:.1f}s, "
          f"ratio {t_plain / t_kv:.2f}x")


def test_meta_chunker_seconds_per_1000_chars(benchmark, lm, text):
    from momoka.llm import LocalClient
    from momoka.methods.moc import MetaChunker

    sample = text[:2000]
    ch = MetaChunker(LocalClient(lm, cache=False), max_tokens=256)
    t0 = time.perf_counter()
    benchmark.pedantic(lambda: ch.chunk_spans_batch([sample]), rounds=1, iterations=1)
    dt = time.perf_counter() - t0
    print(f"\nmeta-chunker: {dt / len(sample) * 1000:.1f}s per 1,000 chars; {ch.stats.to_dict()}")
