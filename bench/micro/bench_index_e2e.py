"""End-to-end ``momoka index`` of real documents: this checkout against an earlier release, side by side.

``test_index_e2e``: 171 real documents (about 5.3 MB: all of hotpotqa_dev500_long, leval_nq,
leval_qasper and quality_leval, and the first 12 of dragonball_finance_en, from ../shared/data),
written as ``.txt`` files, are indexed by ``python -m momoka index DIR --store S`` (default
pipeline: recursive chunker at 100 tokens, the default int8 embedder, BM25) in a child process,
once with this checkout's code and once with the code of ``MOMOKA_BENCH_E2E_BASE`` (a git
revision, default the commit before the embedding-bound indexing work; its ``python/`` tree is
extracted with ``git archive`` and given this checkout's native module, which that work did not
change). Runs alternate (base, new, base, new, ...) ``MOMOKA_BENCH_E2E_REPEATS`` times (default
1); the median is reported. Per run: wall seconds, CPU seconds (user + system of the child),
peak RSS of the child (``ru_maxrss`` from ``os.wait4``), MB/s and seconds per MB, then the
ratios new/base from the same run and the load average. The two stores' vectors are compared
chunk by chunk (cosine; same chunker, so the chunks are the same).

``MOMOKA_BENCH_E2E_MB``: index only the first documents of the list, in a spread order, up to
this many MB (e.g. 1 for iterations; default all 171).

``test_int8_ceiling``: what bounds embedding-bound indexing. The machine's int8 GEMM throughput
in onnxruntime (a ``MatMulInteger`` of uint8 (M x K) by int8 (K x N) activations at the shapes
of the model's feed-forward layers and at a large square shape, one thread, per CPU-second), the
default model's FLOPs per token (its ``MatMulInteger`` weights, 2 x K x N each, plus the
attention products, 4 x L x d per layer at L tokens), and the seconds per MB this allows at the
corpus's tokens per MB -- the floor in CPU-seconds per MB the end-to-end CPU time is compared with.

Run:  PYTHONPATH=python python -m pytest bench/micro/bench_index_e2e.py --benchmark-only -s
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
#: The release the new code is measured against: main before the embedding-bound indexing work.
BASE_REV = "1ca2394"
SETS = (("hotpotqa_dev500_long", None), ("leval_nq", None), ("leval_qasper", None), ("quality_leval", None),
        ("dragonball_finance_en", 12))


def corpus(shared_data: Path, dest: Path, mb: float | None) -> tuple[int, int]:
    """Write the benchmark documents into ``dest`` as .txt files; returns (documents, bytes)."""
    docs = []
    for name, limit in SETS:
        with open(shared_data / name / "documents.jsonl", encoding="utf-8") as f:
            rows = [json.loads(line) for line in f if line.strip()]
        docs.extend((name, r) for r in rows[:limit])
    if mb is not None:  # a spread subset: every set contributes
        order = sorted(range(len(docs)), key=lambda i: (i * 7919) % len(docs))
        keep, size = [], 0
        for i in order:
            if size >= mb * 1e6:
                break
            keep.append(i)
            size += len(docs[i][1]["text"].encode("utf-8"))
        docs = [docs[i] for i in sorted(keep)]
    dest.mkdir(parents=True, exist_ok=True)
    total = 0
    for k, (name, r) in enumerate(docs):
        data = r["text"].encode("utf-8")
        (dest / f"{k:03d}_{name}.txt").write_bytes(data)
        total += len(data)
    return len(docs), total


def base_tree(rev: str, dest: Path) -> Path:
    """``python/`` of git revision ``rev`` under ``dest``, with this checkout's native module."""
    dest.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "-C", str(REPO), "archive", rev, "python"], check=True, capture_output=True)
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)
    for so in (REPO / "python" / "momoka").glob("_core*.so"):
        shutil.copy2(so, dest / "python" / "momoka" / so.name)
    return dest / "python"


def run_index(pythonpath: Path, docs: Path, store: Path) -> dict:
    """``python -m momoka index docs --store store`` in a child; wall, CPU seconds and peak RSS of that child."""
    env = dict(os.environ, PYTHONPATH=str(pythonpath), MOMOKA_PROGRESS="0")
    t = time.perf_counter()
    p = subprocess.Popen([sys.executable, "-m", "momoka", "index", str(docs), "--store", str(store)], env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    err = p.stderr.read()
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t
    p.returncode = os.waitstatus_to_exitcode(status)
    assert p.returncode == 0, err.decode(errors="replace")[-2000:]
    return {"wall": wall, "cpu": ru.ru_utime + ru.ru_stime, "rss_mb": ru.ru_maxrss / 1024}


def _vectors(store: Path) -> tuple[list, np.ndarray]:
    from momoka import Index

    ix = Index.open(store)
    ids = ix.store.chunks.ids()
    keys = [(ix.store.chunks.get(int(i)).doc_id, ix.store.chunks.get(int(i)).start) for i in ids]
    v = ix.store.vector_view("raw").get(ids)
    ix.close()
    return keys, v


def test_index_e2e(shared_data, tmp_path, benchmark):
    mb = float(os.environ["MOMOKA_BENCH_E2E_MB"]) if os.environ.get("MOMOKA_BENCH_E2E_MB") else None
    repeats = int(os.environ.get("MOMOKA_BENCH_E2E_REPEATS") or 1)
    rev = os.environ.get("MOMOKA_BENCH_E2E_BASE") or BASE_REV
    n_docs, n_bytes = corpus(shared_data, tmp_path / "docs", mb)
    trees = {"base": base_tree(rev, tmp_path / "base"), "new": REPO / "python"}
    runs: dict[str, list] = {"base": [], "new": []}

    def all_runs():
        for r in range(repeats):
            for label in ("base", "new"):
                store = tmp_path / f"store-{label}-{r}"
                runs[label].append(run_index(trees[label], tmp_path / "docs", store))

    benchmark.pedantic(all_runs, rounds=1, iterations=1)
    mbs = n_bytes / 1e6
    print(f"\n{n_docs} documents, {mbs:.2f} MB; base = {rev}; {repeats} run(s) each, interleaved; "
          f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}")
    med = {}
    for label in ("base", "new"):
        med[label] = {k: statistics.median(x[k] for x in runs[label]) for k in ("wall", "cpu", "rss_mb")}
        m = med[label]
        print(f"  {label:5s} wall {m['wall']:7.1f} s  cpu {m['cpu']:7.1f} s  peak RSS {m['rss_mb']:6.0f} MB  "
              f"{mbs / m['wall']:.4f} MB/s  {m['wall'] / mbs:6.1f} s/MB (wall)  {m['cpu'] / mbs:6.1f} CPU-s/MB  "
              f"runs: {[round(x['wall'], 1) for x in runs[label]]}")
    print(f"  new vs base: {med['base']['wall'] / med['new']['wall']:.2f}x faster (wall), "
          f"{med['base']['cpu'] / med['new']['cpu']:.2f}x less CPU, peak RSS {med['new']['rss_mb']:.0f} MB "
          f"vs {med['base']['rss_mb']:.0f} MB")
    kb, vb = _vectors(tmp_path / "store-base-0")
    kn, vn = _vectors(tmp_path / "store-new-0")
    assert kb == kn, "the two builds cut different chunks"
    cos = (vb * vn).sum(axis=1)
    print(f"  vectors new vs base: {len(cos)} chunks, cosine mean {cos.mean():.5f} min {cos.min():.5f}")


# ---------------------------------------------------------------------------------- the ceiling


def _matmul_integer_model(k: int, n: int) -> bytes:
    import onnx
    from onnx import TensorProto, helper

    rng = np.random.default_rng(0)
    w = helper.make_tensor("B", TensorProto.INT8, [k, n], rng.integers(-127, 128, (k, n), dtype=np.int8).tobytes(),
                           raw=True)
    node = helper.make_node("MatMulInteger", ["A", "B"], ["Y"])
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("A", TensorProto.UINT8, ["M", k])],
                          [helper.make_tensor_value_info("Y", TensorProto.INT32, ["M", n])], initializer=[w])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m.SerializeToString()


def int8_gemm_gops(m: int, k: int, n: int, seconds: float = 2.0) -> tuple[float, float]:
    """Measured int8 GEMM throughput of onnxruntime's MatMulInteger (2 x M x K x N per product), one thread:
    (GOPS per wall second, GOPS per CPU-second of this process -- the load-independent figure)."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.log_severity_level = 3
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(_matmul_integer_model(k, n), sess_options=so, providers=["CPUExecutionProvider"])
    a = np.random.default_rng(1).integers(0, 256, (m, k), dtype=np.uint8)
    sess.run(None, {"A": a})
    reps, t, c = 0, time.perf_counter(), time.process_time()
    while time.perf_counter() - t < seconds:
        sess.run(None, {"A": a})
        reps += 1
    ops = 2 * m * k * n * reps / 1e9
    return ops / (time.perf_counter() - t), ops / max(time.process_time() - c, 1e-9)


def model_flops_per_token(path: Path, tokens: int) -> float:
    """FLOPs per token of an int8 encoder: 2 K N per MatMulInteger weight, 4 L d per layer of attention."""
    import onnx

    g = onnx.load(str(path)).graph
    inits = {i.name: tuple(i.dims) for i in g.initializer}
    gemm = sum(2 * inits[nd.input[1]][0] * inits[nd.input[1]][1] for nd in g.node
               if nd.op_type == "MatMulInteger" and nd.input[1] in inits)
    layers = sum(1 for nd in g.node if nd.op_type == "Softmax")
    d = next(dims[-1] for name, dims in inits.items() if len(dims) == 2 and "word_embeddings" in name) \
        if any("word_embeddings" in n for n in inits) else 384
    return gemm + layers * 4 * tokens * d


def test_int8_ceiling(shared_data, tmp_path, benchmark):
    from momoka.registry import create
    from momoka.models import Embedder
    from momoka.text import Document

    emb = Embedder.default()
    n_docs, n_bytes = corpus(shared_data, tmp_path / "docs", 0.5)
    chunker = create("chunker", "recursive", size=100)
    texts = [c.text for p in sorted((tmp_path / "docs").iterdir())
             for c in chunker(Document.from_text(p.read_text(encoding="utf-8"), doc_id=p.stem))]
    encs, _ = emb.tokenize(texts)
    lengths = np.array([len(e.ids) for e in encs])
    tok_per_mb = lengths.sum() / (n_bytes / 1e6)
    fpt = model_flops_per_token(emb.path, int(np.mean(lengths)))
    res = {}

    def measure():
        res["ffn"] = int8_gemm_gops(int(np.mean(lengths)), 384, 1536)
        res["square"] = int8_gemm_gops(1024, 1024, 1024)

    benchmark.pedantic(measure, rounds=1, iterations=1)
    print(f"\ncorpus sample: {n_docs} documents, {n_bytes / 1e6:.2f} MB, {len(texts)} chunks, mean "
          f"{lengths.mean():.1f} tokens per chunk, {tok_per_mb:,.0f} tokens per MB")
    print(f"model: {fpt / 1e6:.1f} MFLOP per token at {int(np.mean(lengths))} tokens; "
          f"{tok_per_mb * fpt / 1e12:.2f} TFLOP per MB")
    for k, (g, gc) in res.items():
        print(f"int8 MatMulInteger {k}, one thread: {g:.0f} GOPS per wall second, {gc:.0f} per CPU-second -> "
              f"floor {tok_per_mb * fpt / (gc * 1e9):.1f} CPU-seconds per MB")
    print(f"load average {os.getloadavg()[0]:.2f}")
    assert all(g > 0 for g, _ in res.values())
