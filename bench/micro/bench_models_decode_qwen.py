"""The opt-in Qwen2.5 models on momoka's native decoder against llama.cpp on the same GGUF: greedy tokens and speed.

What it measures, in one process, the same token ids for both engines and the same thread count
(``--threads``, default 2), on an installed opt-in model (``--model``, default ``llm-qwen2.5-1.5b``):

* greedy tokens: :meth:`CausalLM.generate` with ``runtime="native"`` (momoka's C++ decoder, the GGUF's
  exact block values; Q4_K and Q6_K products on 8-bit activations as llama.cpp's, or float32 ones with
  ``--activations float32``) and ``runtime="llama"`` (llama.cpp's logits through the same
  loop, tokenizer and stop tokens) on the shared prompts: the six SQuAD questions with their paragraphs of
  ``tests/models/gguf/test_gguf_llama_runtime.py`` (the ``ask`` reader's chat shape) and the five probe
  prompts of the issue that proposed these models; ``--gen`` new tokens each. A difference is reported
  with the first position where the two part, and whether llama.cpp's token there was within 0.05 of
  the native decoder's top logit (a near tie, where llama.cpp's 8-bit activations may pick either);
* speed: prefill tokens/s (``--prompt`` tokens of SQuAD documents through an empty cache) and decode
  tokens/s (``--new`` tokens after it), :class:`NativeDecoder` against :class:`LlamaCppDecoder` (llama.cpp's
  fused kernels, ``n_batch``/``n_ubatch`` 512, flash attention), interleaved, ``--reps`` rounds: the best
  of each, and the ratio native / llama.cpp paired round by round (median).

Prints ``uptime`` before and after; ``--out FILE.json`` keeps every number.

Run: PYTHONPATH=python python bench/micro/bench_models_decode_qwen.py [--out bench/micro/bench_models_decode_qwen.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]

#: The probe prompts: a one-word fact, entities as JSON, a one-sentence summary, yes/no with a reason and an
#: instruction in Chinese.
PROBES = [
    "What is the capital of Australia? Answer with one word.",
    "List the people and places in this sentence as JSON with keys \"people\" and \"places\": "
    "\"Marie Curie moved from Warsaw to Paris, where she worked with Pierre Curie.\"",
    "Summarise in one sentence: The Normans were the people who in the 10th and 11th centuries gave their "
    "name to Normandy, a region in France. They were descended from Norse raiders and pirates from Denmark, "
    "Iceland and Norway who swore fealty to King Charles III of West Francia.",
    "Is water's boiling point at sea level 100 degrees Celsius? Answer yes or no, then give one reason.",
    "用一句话解释什么是光合作用。",
]


def uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return "?"


def shared_prompts(n: int = 6) -> list[list[dict]]:
    """The six SQuAD chat prompts of the llama runtime's agreement test, then the probes."""
    from momoka.eval.datasets import find_shared_data

    out = []
    data = find_shared_data(REPO)
    if data is not None:
        path = data / "squad_v1_dev_half_a"
        docs = {}
        for line in (path / "documents.jsonl").open(encoding="utf-8"):
            d = json.loads(line)
            docs[d["doc_id"]] = d["text"]
        for i, line in enumerate((path / "questions.jsonl").open(encoding="utf-8")):
            q = json.loads(line)
            if i % 7:
                continue
            a, b = q["paragraph_span"]
            para = docs[q["doc_id"]][a:b][:1500]
            out.append([{"role": "user", "content": f"Context:\n{para}\n\nAnswer the question from the context.\n"
                                                    f"Question: {q['question']}"}])
            if len(out) == n:
                break
    else:
        print("no ../shared/data: the probe prompts only", file=sys.stderr)
    return out + [[{"role": "user", "content": p}] for p in PROBES]


def document_ids(lm, n: int) -> list[int]:
    from momoka.eval.datasets import find_shared_data

    data = find_shared_data(REPO)
    if data is None:
        text = " ".join(PROBES) * 200
    else:
        path = data / "squad_v1_dev_half_a" / "documents.jsonl"
        text = "\n\n".join(json.loads(line)["text"] for line in path.open(encoding="utf-8"))
    ids = lm.encode(text)
    return ids[:n]


def run(dec, ids: list[int], new: int) -> tuple[float, float]:
    t0 = time.perf_counter()
    logits = dec.start(ids)
    t1 = time.perf_counter()
    for _ in range(new):
        logits = dec.step(int(np.argmax(logits)))
    return t1 - t0, time.perf_counter() - t1


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="llm-qwen2.5-1.5b")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--gen", type=int, default=24, help="greedy tokens per shared prompt")
    ap.add_argument("--prompt", type=int, default=512, help="prompt tokens of the speed rows")
    ap.add_argument("--new", type=int, default=32, help="tokens decoded after the speed prompt")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--activations", default="int8", choices=("int8", "float32"),
                    help="the native decoder's activations (MOMOKA_LLM_ACTIVATIONS)")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    import os

    os.environ["MOMOKA_LLM_ACTIVATIONS"] = args.activations
    try:
        import llama_cpp
    except ImportError:
        sys.exit("needs llama-cpp-python, the peer: pip install '.[llama]'")
    from momoka.models.causal_lm import CausalLM
    from momoka.models.installer import model_dir

    d = model_dir(args.model, auto_install=False)
    result = {"model": args.model, "threads": args.threads, "activations": args.activations, "uptime_before": uptime(),
              "llama_cpp_python": llama_cpp.__version__,
              "command": " ".join([Path(sys.argv[0]).name] + (argv if argv is not None else sys.argv[1:]))}
    print(result["uptime_before"], flush=True)
    t0 = time.perf_counter()
    native = CausalLM(d, threads=args.threads, runtime="native")
    ndec = native.decoder_for(1, 1)
    result["native_load_s"] = time.perf_counter() - t0
    llama = CausalLM(d, threads=args.threads, runtime="llama")
    ldec = llama.decoder_for(1, 1)
    print(f"native decoder loaded in {result['native_load_s']:.1f}s ({ndec.simd} kernels, {args.activations} "
          "activations)", flush=True)

    greedy = []
    for msgs in shared_prompts():
        a = native.generate(msgs, max_new_tokens=args.gen)
        b = llama.generate(msgs, max_new_tokens=args.gen)
        row = {"prompt": msgs[0]["content"][-60:], "prompt_tokens": a.prompt_tokens, "equal": a.token_ids == b.token_ids,
               "native": a.text, "llama": b.text}
        if not row["equal"]:
            k = next((i for i, (x, y) in enumerate(zip(a.token_ids, b.token_ids)) if x != y),
                     min(len(a.token_ids), len(b.token_ids)))
            row["first_difference"] = k
            if k < min(len(a.token_ids), len(b.token_ids)):
                logits = ndec.start(native.prompt_ids(msgs) + a.token_ids[:k])
                row["gap_at_difference"] = float(logits[a.token_ids[k]] - logits[b.token_ids[k]])
        greedy.append(row)
        print(f"{'=' if row['equal'] else '≠'} {row['prompt']!r}: native {a.text[:50]!r} | llama.cpp {b.text[:50]!r}"
              + (f" (part at token {row['first_difference']}, logit gap {row.get('gap_at_difference', 0):.3f})"
                 if not row["equal"] else ""), flush=True)
    result["greedy"] = greedy
    print(f"greedy tokens equal on {sum(r['equal'] for r in greedy)}/{len(greedy)} prompts", flush=True)

    ids = document_ids(native, args.prompt)
    run(ndec, ids[:32], 2)
    run(ldec, ids[:32], 2)
    rounds = {"native": [], "llama.cpp": []}
    for _ in range(args.reps):
        rounds["native"].append(run(ndec, ids, args.new))
        rounds["llama.cpp"].append(run(ldec, ids, args.new))
    speed = {}
    for name, rs in rounds.items():
        speed[name] = {"prefill_tok_s": len(ids) / min(r[0] for r in rs), "decode_tok_s": args.new / min(r[1] for r in rs),
                       "rounds": rs}
    pf = sorted(b[0] / a[0] for a, b in zip(rounds["native"], rounds["llama.cpp"]))
    dc = sorted(b[1] / a[1] for a, b in zip(rounds["native"], rounds["llama.cpp"]))
    speed["paired_native_over_llama"] = {"prefill": pf, "decode": dc, "prefill_median": statistics.median(pf),
                                         "decode_median": statistics.median(dc)}
    result["speed"] = speed
    print(f"\n{len(ids)} prompt tokens, {args.new} decoded, best of {args.reps}, {args.threads} threads")
    for name in ("native", "llama.cpp"):
        print(f"{name:10s} prefill {speed[name]['prefill_tok_s']:7.1f} tok/s   decode {speed[name]['decode_tok_s']:6.2f} tok/s")
    print(f"paired native / llama.cpp (above 1 = native faster): prefill median {statistics.median(pf):.2f}x "
          f"({', '.join(f'{x:.2f}' for x in pf)}), decode median {statistics.median(dc):.2f}x "
          f"({', '.join(f'{x:.2f}' for x in dc)})")
    result["uptime_after"] = uptime()
    print(result["uptime_after"], flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return result


if __name__ == "__main__":
    main()
