"""Dense scaling: momoka's vector view beside raw hnswlib at 10k / 100k / 1M vectors.

For each size N, two child processes (one per implementation, so peak memory is each one's own)
build an HNSW graph over the same N vectors and answer the same queries:

  * momoka: ``VectorView.from_rows(...)`` then ``view.graph()``, the build a store runs when it
    saves a dense view (``bulk_insert``: hnswlib ``add_items`` in blocks of 65,536 rows, one thread
    up to 20,000 rows, every core above), then ``view.search(q, 10)`` per query;
  * raw hnswlib: ``Index(space="ip")``, ``init_index(M, ef_construction, random_seed=100)``, one
    ``add_items(all rows, num_threads=<the same as momoka's>)``, ``knn_query(q, k=10)`` per query.

Same parameters for both: M=32, ef_construction=200, ef_search=128 (momoka's defaults), 384
dimensions, inner product over unit vectors. Reported per implementation: build time (wall, and
CPU seconds over all threads), peak RSS of the child from the start of the build (VmHWM reset
then; the input vectors, N x 384 x 4 bytes, included) and how far it rose above the RSS before the
build, query latency p50 / p99 over 1,000 single queries, and recall@10 of
200 queries against brute force.

Vectors (say which in every report): real all-MiniLM-L6-v2 embeddings of real passages when
``MOMOKA_BENCH_VECTORS`` names .npy files (a glob; rows deduplicated and normalised), extended
past their count by copies with Gaussian noise of norm 0.5 (cosine about 0.9 to their source),
renormalised; otherwise random unit vectors (Gaussian, normalised). Queries are held-out vectors
with the same noise. Sizes from ``MOMOKA_BENCH_SIZES`` (default "10000,100000"; 1M takes long on
two cores: add 1000000 to run it).

Run:  MOMOKA_BENCH_VECTORS='/path/to/stores/*/gen-*/vectors/raw.npy' \\
      PYTHONPATH=python python -m pytest bench/micro/bench_scaling_dense.py --benchmark-only -s
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

DIM = 384
NOISE = 0.5
N_QUERIES = 1000
N_RECALL = 200
K = 10


def make_vectors(n: int, n_queries: int, pattern: str | None, seed: int = 0) -> tuple[np.ndarray, np.ndarray, str]:
    """(n base vectors, n_queries query vectors, a description of them)."""
    rng = np.random.default_rng(seed)
    files = sorted(glob.glob(pattern)) if pattern else []
    if files:
        real = np.unique(np.concatenate([np.load(f).astype(np.float32) for f in files]), axis=0)
        real = real[np.linalg.norm(real, axis=1) > 0]
        real /= np.linalg.norm(real, axis=1, keepdims=True)
        real = real[rng.permutation(len(real))]
        held, real = real[:n_queries], real[n_queries:]
        what = (f"{len(real):,} real MiniLM embeddings ({len(files)} files)"
                + (f" + {n - len(real):,} noisy copies (noise norm {NOISE})" if n > len(real) else ""))
    else:
        real = held = None
        what = "random unit vectors (Gaussian, normalised)"

    def noisy(src: np.ndarray, m: int) -> np.ndarray:
        out = np.empty((m, DIM), dtype=np.float32)
        for a in range(0, m, 100_000):
            b = min(m, a + 100_000)
            g = rng.standard_normal((b - a, DIM)).astype(np.float32)
            g *= NOISE / np.linalg.norm(g, axis=1, keepdims=True)
            out[a:b] = src[np.arange(a, b) % len(src)] + g
        out /= np.linalg.norm(out, axis=1, keepdims=True)
        return out

    if real is None:
        x = rng.standard_normal((n + n_queries, DIM)).astype(np.float32)
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        return x[:n], x[n:], what
    base = real[:n] if n <= len(real) else np.concatenate([real, noisy(real, n - len(real))])
    return np.ascontiguousarray(base), noisy(held, n_queries), what


def _rss_mb(field: str) -> float:
    """A memory figure of this process from /proc/self/status (VmRSS: now, VmHWM: peak), in MB."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _reset_peak() -> None:
    """Reset the peak RSS (VmHWM) of this process (Linux: clear_refs 5)."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def _child(impl: str, n: int, pattern: str | None) -> dict:
    """Runs in a child process: build, query, measure; returns the numbers."""
    import resource

    import gc

    x, q, what = make_vectors(n, N_QUERIES, pattern)
    from momoka.store import vectors as V

    gc.collect()
    rss_input = _rss_mb("VmRSS")
    _reset_peak()  # the peak below is that of the build and the queries, the input vectors included

    p = V.DEFAULT_HNSW
    threads = V.insert_threads(n)
    t0, c0 = time.perf_counter(), time.process_time()
    if impl == "momoka":
        view = V.VectorView.from_rows(None, "raw", embedder={"model_id": "bench", "checksum": "-", "dim": DIM},
                                      rows=x, has=np.ones(n, dtype=bool))
        view.graph()
        search = lambda v: [c for c, _ in view.search(v, K)]  # noqa: E731
    else:
        import hnswlib

        ix = hnswlib.Index(space="ip", dim=DIM)
        ix.init_index(max_elements=n, M=p["M"], ef_construction=p["ef_construction"], random_seed=100)
        ix.add_items(x, np.arange(n), num_threads=threads)
        ix.set_ef(p["ef_search"])
        search = lambda v: ix.knn_query(v[None, :], k=K)[0][0].tolist()  # noqa: E731
    build_wall, build_cpu = time.perf_counter() - t0, time.process_time() - c0
    lat = []
    for v in q:
        t = time.perf_counter()
        search(v)
        lat.append(time.perf_counter() - t)
    hits = 0
    for v in q[:N_RECALL]:
        exact = set(np.argpartition(-(x @ v), K)[:K].tolist())
        hits += len(exact & set(search(v)))
    return {"impl": impl, "n": n, "vectors": what, "threads": threads, "build_s": build_wall, "build_cpu_s": build_cpu,
            "peak_rss_mb": _rss_mb("VmHWM"), "input_rss_mb": rss_input,
            "process_peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "input_mb": x.nbytes / 1e6, "p50_ms": float(np.percentile(lat, 50) * 1e3),
            "p99_ms": float(np.percentile(lat, 99) * 1e3), "recall": hits / (K * N_RECALL)}


def run_child(impl: str, n: int, pattern: str | None) -> dict:
    code = (f"import json, sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); "
            f"import bench_scaling_dense as b; print(json.dumps(b._child({impl!r}, {n}, {pattern!r})))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_dense_scaling(benchmark):
    pytest.importorskip("hnswlib")
    sizes = [int(s) for s in os.environ.get("MOMOKA_BENCH_SIZES", "10000,100000").split(",")]
    pattern = os.environ.get("MOMOKA_BENCH_VECTORS")
    rows = []
    print(f"\ndense scaling: M=32, ef_construction=200, ef_search=128, {DIM} dims, k={K}; load {os.getloadavg()}")
    for n in sizes:
        for impl in ("momoka", "hnswlib"):  # interleaved per size
            r = run_child(impl, n, pattern)
            rows.append(r)
            print(f"  {n:>9,} {impl:8s} threads {r['threads']:>2}: build {r['build_s']:8.1f} s "
                  f"(CPU {r['build_cpu_s']:8.1f} s), peak RSS {r['peak_rss_mb']:7.0f} MB "
                  f"(+{r['peak_rss_mb'] - r['input_rss_mb']:6.0f} MB over the {r['input_rss_mb']:.0f} MB before the build; "
                  f"vectors {r['input_mb']:.0f} MB), query p50 {r['p50_ms']:.3f} / p99 {r['p99_ms']:.3f} ms, "
                  f"recall@10 {r['recall']:.3f}   [{r['vectors']}]", flush=True)
    print(f"  load after: {os.getloadavg()}")
    out = os.environ.get("MOMOKA_BENCH_JSON")
    if out:
        Path(out).write_text(json.dumps(rows, indent=1))
    benchmark.pedantic(lambda: None, rounds=1, iterations=1)
