"""Before/after of the generation runtime on what momoka generates offline: ``ask``, the MoC meta-chunker, one ETS question.

The same tasks run, in one process, rounds interleaved, with the local causal LM (SmolLM2-135M-Instruct Q4_1)
generating through each runtime of ``MOMOKA_LLM_RUNTIME``: ``onnx`` (momoka's KV-cache loop on onnxruntime,
"before"), ``llama`` (llama.cpp on the same GGUF, the ``llama`` extra) and ``native`` (momoka's C++ decoder
on the same GGUF, :mod:`momoka.models.causal_native`, what the default ``auto`` runs on a CPU with AVX2 or
AVX-512); log-probs run on onnxruntime in all three. Same threads (``--threads``, default 2), no response
cache.

* ``ask``: :class:`momoka.methods.standard.reader.LLMReader` (the ``local`` reader of ``momoka ask``) over
  the default pipeline's result at 5,000 characters (``hybrid`` on a store of the first ``--docs`` SQuAD
  documents, built once with the default chunker and embedder), ``--questions`` questions; seconds per
  question.
* ``meta-chunker``: :class:`momoka.methods.moc.meta.MetaChunker` (1,024-character windows, the LLM's outline
  recovered by edit distance) on the first ``--meta-chars`` characters of a SQuAD document; seconds per
  1,000 characters.
* ``ets``: :class:`momoka.methods.ets.refiner.ETSRefiner` with the paper's LM policy on the local model
  (``policy="lm"``) and the local reader's likelihood of its own answer as the value (each value generates
  an answer), on one question's ``hybrid`` result; seconds per question. (The refiner's offline default,
  ``policy="offline"`` with the coverage value, generates nothing.)

Each cell is the best of ``--reps`` rounds; the ratios are onnx time / llama time and onnx time / native time
(above 1 = faster than onnxruntime).
Prints ``uptime`` before and after; ``--out FILE.json`` keeps the numbers.

Run: PYTHONPATH=python python bench/micro/bench_models_runtime.py [--out bench/micro/bench_models_runtime.json]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
RUNTIMES = ("onnx", "llama", "native")


def uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return "?"


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--docs", type=int, default=4, help="SQuAD documents in the ask/ETS store")
    ap.add_argument("--questions", type=int, default=3, help="ask questions per round")
    ap.add_argument("--meta-chars", type=int, default=3000, help="characters the meta-chunker cuts per round")
    ap.add_argument("--reps", type=int, default=2, help="rounds; the best is kept")
    ap.add_argument("--tasks", default="ask,meta-chunker,ets", help="which tasks (comma-separated)")
    ap.add_argument("--out", default=None, help="write the numbers to this JSON file")
    args = ap.parse_args(argv)

    from momoka.models.causal_llama import llama_cpp_available

    if not llama_cpp_available():
        sys.exit("needs llama-cpp-python for the llama runtime: pip install '.[llama]'")
    from momoka import Index
    from momoka.eval import load_dataset
    from momoka.eval.datasets import find_shared_data
    from momoka.llm import LocalClient
    from momoka.methods.ets.reader import Reader
    from momoka.methods.ets.refiner import ETSRefiner
    from momoka.methods.moc.meta import MetaChunker
    from momoka.methods.standard.reader import LLMReader
    from momoka.models import Embedder
    from momoka.models.causal_lm import CausalLM
    from momoka.models.installer import model_dir

    data = find_shared_data(REPO)
    if data is None:
        sys.exit("needs ../shared/data (or MOMOKA_SHARED_DATA)")
    ds = load_dataset(data / "squad_v1_dev_half_a")
    docs = ds.documents[: args.docs]
    doc_ids = {d.doc_id for d in docs}
    questions = [q for q in ds.questions if q.doc_id in doc_ids]

    mdir = model_dir("smollm2-135m-instruct", auto_install=False)
    lms = {rt: CausalLM(mdir, threads=args.threads, runtime=rt) for rt in RUNTIMES}
    tasks = [t for t in args.tasks.split(",") if t]
    result = {"uptime_before": uptime(), "threads": args.threads, "reps": args.reps,
              "command": " ".join([Path(sys.argv[0]).name] + (argv if argv is not None else sys.argv[1:])),
              "tasks": {}}
    print(result["uptime_before"], flush=True)

    with tempfile.TemporaryDirectory() as tmp:
        store = None
        if {"ask", "ets"} & set(tasks):
            store = Index.build(docs, Path(tmp) / "store", progress=False)
        embedder = Embedder.default() if "ets" in tasks else None

        def ask(lm):
            reader = LLMReader(LocalClient(lm, cache=False, progress=False))
            for q in questions[: args.questions]:
                reader.answer(q.question, store.search(q.question, budget=5000))
            return args.questions

        meta_text = docs[0].text[: args.meta_chars]

        def meta(lm):
            MetaChunker(LocalClient(lm, cache=False, progress=False), max_failed=1.0)(meta_text)
            return len(meta_text) / 1000

        def ets(lm):
            q = questions[0].question
            ETSRefiner(embedder=embedder, policy="lm", value="reader", lm=lm, reader=Reader(lm), budget=None,
                       progress=False).refine(q, store.search(q, budget=5000))
            return 1

        runs = {"ask": (ask, "s per question"), "meta-chunker": (meta, "s per 1,000 characters"),
                "ets": (ets, "s per question")}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # fallback warnings of the meta-chunker are counted, not shown
            for lm in lms.values():  # first calls load sessions and pick kernels: not timed
                lm.generate([{"role": "user", "content": "Hi"}], max_new_tokens=2)
            for task in tasks:
                fn, unit = runs[task]
                times: dict[str, list[float]] = {rt: [] for rt in RUNTIMES}
                for _ in range(args.reps):
                    for rt, lm in lms.items():
                        t0 = time.perf_counter()
                        per = fn(lm)
                        times[rt].append((time.perf_counter() - t0) / per)
                best = {rt: min(v) for rt, v in times.items()}
                ratios = {f"onnx / {rt}": best["onnx"] / best[rt] for rt in RUNTIMES[1:]}
                print(f"{task:<14} " + "  ".join(f"{rt} {best[rt]:7.2f}" for rt in RUNTIMES) + f"  {unit}   "
                      + "  ".join(f"{k} {v:.2f}x" for k, v in ratios.items()), flush=True)
                result["tasks"][task] = {"unit": unit, "seconds": best, "all": times, "ratios": ratios}
    result["uptime_after"] = uptime()
    print(result["uptime_after"], flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return result


if __name__ == "__main__":
    main()
