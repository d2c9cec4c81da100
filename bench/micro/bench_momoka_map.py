"""Momoka-Map build time per chunk: offline referees and a remote-LLM model (a referee answering after a delay).

Run explicitly::

    PYTHONPATH=python python -m pytest bench/micro/bench_momoka_map.py --benchmark-only -s

Environment: ``MOMOKA_BENCH_MAP_DELAY`` (seconds per remote answer, default 0.2),
``MOMOKA_BENCH_MAP_INFLIGHT`` (concurrent requests, default 32), ``MOMOKA_BENCH_MAP_PPL_CHUNKS``
(chunks of the slice searched with the perplexity referee, default 16: the local LM is slow on CPU).

The document is the first DragonBall finance report of ``../shared/data`` cut into
chunks of three sentences, searched with the paper's settings (100 iterations,
rollout 5, pair reward eq. 4). The paper's procedure (one blocking LLM call per
rollout step, no memo) is costed as ``iterations * rollout`` calls per chunk.
"""

from __future__ import annotations

import os
import time

import numpy as np
import pytest
from momoka.methods.momoka import (
    EmbeddingReferee,
    LLMReferee,
    MomokaMap,
    PerplexityReferee,
)
from momoka.text import make_chunks

DELAY = float(os.environ.get("MOMOKA_BENCH_MAP_DELAY", "0.2"))
INFLIGHT = int(os.environ.get("MOMOKA_BENCH_MAP_INFLIGHT", "32"))
PPL_CHUNKS = int(os.environ.get("MOMOKA_BENCH_MAP_PPL_CHUNKS", "16"))


def _document(shared_data):
    from momoka.eval.datasets import load_dataset

    ds = load_dataset(shared_data / "dragonball_finance_en", limit=1)
    doc = ds.documents[0].to_document()
    sents = doc.sentences.tolist()
    spans = [(sents[i][0], sents[min(i + 2, len(sents) - 1)][1]) for i in range(0, len(sents), 3)]
    return doc, make_chunks(doc, spans)


def _line(label: str, n: int, seconds: float, extra: str = "") -> None:
    print(f"  {label:<46} {n:>4} chunks  {seconds:8.2f} s  {seconds / max(n, 1) * 1000:9.1f} ms/chunk  {extra}")


def test_bench_momoka_map_build_time(shared_data, benchmark):
    doc, chunks = _document(shared_data)
    n = len(chunks)
    print(f"\nMomoka-Map build time per chunk: {doc.doc_id}, {n} chunks of 3 sentences, "
          f"{sum(len(c.text) for c in chunks) / n:.0f} chars/chunk; 100 iterations, rollout 5, eq. 4")
    cpu0 = time.process_time()

    # 1. embedding referee, fully native (thresholded similarity matrix)
    try:
        from momoka.models import Embedder

        emb = Embedder.default()
    except Exception as exc:  # noqa: BLE001
        pytest.skip(f"default embedder not installed: {exc}")
    t = time.monotonic()
    mm = MomokaMap(referee=EmbeddingReferee(emb))
    mm.paths_for_chunks(chunks)
    _line("embedding referee (native MCTS, embed incl.)", n, time.monotonic() - t)
    v = mm.referee.embed([c.text for c in chunks])
    t = time.monotonic()
    benchmark.pedantic(lambda: MomokaMap(referee=EmbeddingReferee(emb)).paths_for_chunks(chunks, vectors=v),
                       rounds=3, iterations=1)
    _line("embedding referee (native MCTS only)", n, benchmark.stats.stats.min)

    # 2. remote LLM model: a scripted OpenAI-compatible server answering after DELAY seconds
    from momoka.llm import OpenAIClient
    from momoka.llm.testing import Reply, ScriptedServer

    rng = np.random.default_rng(0)
    with ScriptedServer(lambda body, i: Reply("1" if rng.random() < 0.2 else "0", delay=DELAY)) as srv:
        llm = OpenAIClient("scripted", base_url=srv.base_url, api_key="x", cache=False, concurrency=INFLIGHT)
        ref = LLMReferee(llm)
        mm = MomokaMap(referee=ref, batch_size=4096)
        t = time.monotonic()
        mm.paths_for_chunks(chunks)
        dt = time.monotonic() - t
        calls = srv.count
    paper_calls = n * 100 * 5
    _line(f"LLM referee, {DELAY * 1000:.0f} ms/answer, {INFLIGHT} in flight", n, dt,
          f"{calls} calls; paper procedure, modelled (not run): {paper_calls} calls x {DELAY * 1000:.0f} ms = "
          f"{paper_calls * DELAY:.0f} s ({paper_calls * DELAY / n:.1f} s/chunk)")
    mm = MomokaMap(referee="llm")
    est = mm.estimate([doc], [chunks])
    print(f"  estimate before the run: {est['referee_calls_expected']} calls expected "
          f"(max {est['referee_calls_max']}), {est['referee_prompt_tokens_expected']:,} prompt tokens; "
          f"real: {calls} calls")

    # 3. the offline default: perplexity referee on the local causal LM (a slice of the document)
    try:
        from momoka.models import default_causal_lm

        lm = default_causal_lm()
    except Exception as exc:  # noqa: BLE001
        print(f"  perplexity referee: skipped ({exc})")
        return
    part = chunks[:PPL_CHUNKS]
    ref = PerplexityReferee(lm)
    t = time.monotonic()
    mm = MomokaMap(referee=ref, batch_size=4096)
    mm.paths_for_chunks(part)
    dt = time.monotonic() - t
    _line(f"perplexity referee (local LM, first {len(part)} chunks)", len(part), dt,
          f"{mm.stats.referee_requests} pairs scored")
    print(f"  process CPU time for the whole run: {time.process_time() - cpu0:.1f} s; "
          f"load average {os.getloadavg()[0]:.1f}")


def test_bench_momoka_map_long_document_remedies(shared_data, benchmark):
    """A long document (more chunks than iterations): path length and time per remedy, embedding referee."""
    from momoka.eval.datasets import load_dataset

    ds = load_dataset(shared_data / "leval_nq", limit=1)
    doc = max((d.to_document() for d in ds.documents), key=lambda d: len(d.sentences))
    sents = doc.sentences.tolist()
    spans = [(sents[i][0], sents[min(i + 2, len(sents) - 1)][1]) for i in range(0, len(sents), 3)]
    chunks = make_chunks(doc, spans)
    try:
        from momoka.models import Embedder

        emb = Embedder.default()
    except Exception as exc:  # noqa: BLE001
        pytest.skip(f"default embedder not installed: {exc}")
    ref = EmbeddingReferee(emb)
    v = ref.embed([c.text for c in chunks])
    print(f"\nLong document {doc.doc_id}: {len(chunks)} chunks of 3 sentences; embedding referee, native MCTS")
    print(f"  {'remedy':<28} {'seconds':>8} {'mean path len':>14} {'paths of length 1':>18}")
    for label, kw in (("none (paper: 100 iterations)", {}), ("window 32", {"long_docs": "window"}),
                      ("widening (1, 0.5)", {"long_docs": "widening"}),
                      ("scale (2 (n-1), max 1000)", {"long_docs": "scale"})):
        mm = MomokaMap(referee=ref, **kw)
        t = time.monotonic()
        paths = mm.paths_for_chunks(chunks, vectors=v)
        dt = time.monotonic() - t
        lens = np.array([len(p) for p in paths])
        print(f"  {label:<28} {dt:8.2f} {lens.mean():14.2f} {int((lens == 1).sum()):>18}")
    benchmark.pedantic(lambda: MomokaMap(referee=ref).paths_for_chunks(chunks, vectors=v), rounds=1,
                       iterations=1)
