"""Indexing throughput on Ray (1 and 2 workers) against the single-process path, and the writer's cost.

``test_ray_throughput``: the documents of ../shared/data/squad_v1_dev_half_a (all 24, or the first
``MOMOKA_BENCH_RAY_DOCS``) built into a store three times in one run, same input and the same
batches (a commit every ``MOMOKA_BENCH_RAY_COMMIT`` documents, default 2): ``engine="local"``, then
``engine="ray"`` with 1 and 2 worker actors on a local Ray cluster of 2 CPUs (started once, not
timed). Prints documents/s and chunks/s, the ratio to the local path, the single writer's seconds
per document and per chunk (applying outputs; committing generations), and checks the three stores
hold the same vectors.

``test_writer_commit_cost``: what one commit costs the single writer as the store grows: a store
of N synthetic chunks (random unit vectors of 384 dimensions, 60-word texts) gets one more
document of 35 chunks, then ``save()`` is timed (a commit rewrites the chunk table, the vector
rows, the HNSW graph file and the BM25 index of the changed views).

Run:  PYTHONPATH=python python -m pytest bench/micro/bench_index_ray.py --benchmark-only -s
"""

from __future__ import annotations

import os
import time

import numpy as np
import pytest

ray = pytest.importorskip("ray")


def _load(shared_data):
    from momoka.eval import load_dataset

    ds = load_dataset(shared_data / "squad_v1_dev_half_a")
    n = int(os.environ.get("MOMOKA_BENCH_RAY_DOCS") or len(ds.documents))
    return ds.documents[:n]


def test_ray_throughput(shared_data, tmp_path, benchmark):
    from momoka import Index
    from momoka.methods.distributed import connect

    docs = _load(shared_data)
    commit = int(os.environ.get("MOMOKA_BENCH_RAY_COMMIT") or 2)
    connect(num_cpus=2)
    rows, stores = [], {}

    def run(label, **kw):
        t = time.perf_counter()
        ix = Index.build(docs, store=tmp_path / label, commit_docs=commit, progress=False, **kw)
        dt = time.perf_counter() - t
        n_chunks = ix.store.n_chunks
        tm = ix.report.get("timing")
        stores[label] = ix.store.vector_view("raw").get(ix.store.chunks.ids())
        ix.close()
        rows.append((label, dt, n_chunks, tm))

    def all_runs():
        run("local")
        run("ray-1", engine="ray", workers=1)
        run("ray-2", engine="ray", workers=2)

    benchmark.pedantic(all_runs, rounds=1, iterations=1)
    base = rows[0][1]
    print(f"\n{len(docs)} documents, commit every {commit}; load average {os.getloadavg()[0]:.1f} on "
          f"{os.cpu_count()} CPUs")
    print("engine | seconds | docs/s | chunks/s | vs local | writer apply ms/doc | writer commit ms/doc | "
          "writer ms/chunk")
    for label, dt, n_chunks, tm in rows:
        w = ""
        if tm:
            w = (f" | {1000 * tm['apply_s'] / len(docs):.1f} | {1000 * tm['commit_s'] / len(docs):.1f} | "
                 f"{1000 * (tm['apply_s'] + tm['commit_s']) / n_chunks:.2f}")
        print(f"{label} | {dt:.1f} | {len(docs) / dt:.3f} | {n_chunks / dt:.2f} | {base / dt:.2f}x{w}")
    for label in ("ray-1", "ray-2"):
        np.testing.assert_array_equal(stores[label], stores["local"])
    ray.shutdown()


@pytest.mark.parametrize("n_chunks", [10_000, 50_000])
def test_writer_commit_cost(tmp_path, n_chunks, benchmark):
    from momoka.store.store import Store
    from momoka.text.model import Chunk

    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(5000)]
    dim, per_doc = 384, 35
    st = Store.create(tmp_path / "s", chunker={"name": "recursive", "params": {"size": 200}})
    st.add_vector_view("raw", embedder={"model_id": "synthetic", "checksum": "0", "dim": dim})
    st.add_bm25_view("raw")

    def add_doc(i):
        texts = [" ".join(rng.choice(words, 60)) for _ in range(per_doc)]
        chunks, pos = [], 0
        for j, t in enumerate(texts):
            chunks.append(Chunk(t, pos, pos + len(t), f"d{i}", j, j, j))
            pos += len(t) + 1
        ids = st.add_documents([{"doc_id": f"d{i}", "title": None, "source": None, "length": pos}], [chunks])[0]
        v = rng.standard_normal((per_doc, dim)).astype(np.float32)
        st.vector_view("raw").add(ids, v / np.linalg.norm(v, axis=1, keepdims=True))
        st.bm25_view("raw").add(ids, texts)

    for i in range(n_chunks // per_doc):
        add_doc(i)
    st.save()
    times = []

    def one_commit():
        add_doc(len(st.documents))
        t = time.perf_counter()
        st.save()
        times.append(time.perf_counter() - t)

    benchmark.pedantic(one_commit, rounds=3, iterations=1)
    print(f"\nstore of {st.n_chunks} chunks: one commit (35 chunks added) {1000 * min(times):.0f} ms "
          f"(median {1000 * float(np.median(times)):.0f} ms); load average {os.getloadavg()[0]:.1f}")
    st.close()
