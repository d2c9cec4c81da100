"""BM25 query throughput, top-10 agreement and memory: momoka vs bm25s (numba).

Peer configuration: bm25s ``BM25(method="lucene", k1=1.5, b=0.75,
backend="numba")`` (its fastest documented backend; ``pip install bm25s
numba``), ``retrieve`` batched over all queries with the query tokens given
as vocabulary ids (its fastest input), ``n_threads=1`` and ``n_threads=-1``.
momoka runs ``BM25(idf="lucene")`` -- the same formula, so the top-10 must
agree -- with ``search_batch`` on the query strings, i.e. momoka's timings
include tokenising the queries, bm25s's do not.

Same tokens: both engines index momoka's tokeniser output (lowercased
letter/digit runs, no stemming, no stopwords); bm25s receives it as lists.

Corpora (varied real text from ../shared/data, all six sets):
  10k:  10,000 non-overlapping 100-word windows of the documents;
  100k, 1M: those windows (~10.5k), then passages recombined from the
        documents' sentences: each pass shuffles all sentences (seeded,
        a new order per pass) and packs consecutive ones into passages of
        >= 100 words; a passage equal to one already made is dropped, so no
        passage repeats verbatim. The sets hold ~1.05M words, so at 1M
        passages (~100M tokens) each sentence recurs in ~95 passages, each
        time among other sentences.
1M runs only with MOMOKA_BENCH_BM25_1M=1 (several GB and many minutes for
bm25s). Queries: the sets' 6,306 questions (at 1M every 6th of them, top-10
agreement over 50 of them, and bm25s's build memory is not measured in a child:
its in-memory score arrays are reported instead).

Scaling rows: build+save seconds and build peak memory (child processes,
below), serialized size, and single-query latency p50 over 300 questions
(momoka ``search``; bm25s ``retrieve`` of one query, numba, 1 thread).

Timing: the engines alternate within one process, median of REPEATS runs;
the 1-minute load average is printed with each table. Agreement: the fraction
of each engine's top-10 whose exact score (momoka get_scores, itself equal to
rank_bm25's formula) is >= the exact 10th best score.

Memory: each engine builds and saves in a fresh child process; build peak is
the peak RSS above the RSS just before the build (peak reset through
/proc/self/clear_refs), with the passages (momoka: strings; bm25s: token lists)
already loaded. Serialized size: momoka's one file; bm25s's saved directory
(score arrays, vocabulary, parameters).

Run:  PYTHONPATH=python python -m pytest bench/micro/bench_index_bm25.py --benchmark-only -s
"""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest

WORDS = 100
REPEATS = 5
SIZES = {"10k": 10_000, "100k": 100_000, "1M": 1_000_000}
LATENCY_QUERIES = 300
QUERY_STEP = {"1M": 6}  # 1M: every 6th question (~1,050), to keep the run within minutes under load


def _documents(data: Path) -> list[list[str]]:
    docs = []
    for d in sorted(data.iterdir()):
        f = d / "documents.jsonl"
        if f.exists():
            docs += [json.loads(line)["text"].split() for line in f.read_text(encoding="utf-8").splitlines()]
    return docs


def passages_of(data: Path, n: int) -> list[str]:
    """`n` distinct passages: the documents' 100-word windows, then sentence recombinations (module docstring)."""
    docs = _documents(data)
    out = [" ".join(w[i : i + WORDS]) for w in docs for i in range(0, max(1, len(w) - WORDS + 1), WORDS)]
    seen = set(out)
    sentences = [s for w in docs for s in re.split(r"(?<=[.!?])\s+", " ".join(w)) if s]
    rng = np.random.default_rng(0)
    while len(out) < n:
        cur: list[str] = []
        words = 0
        for i in rng.permutation(len(sentences)):
            cur.append(sentences[i])
            words += sentences[i].count(" ") + 1
            if words >= WORDS:
                p = " ".join(cur)
                if p not in seen:
                    seen.add(p)
                    out.append(p)
                    if len(out) == n:
                        break
                cur, words = [], 0
    return out[:n]


def questions_of(data: Path) -> list[str]:
    qs = []
    for d in sorted(data.iterdir()):
        f = d / "questions.jsonl"
        if f.exists():
            qs += [json.loads(line)["question"] for line in f.read_text(encoding="utf-8").splitlines()]
    return [q for q in qs if q.strip()]


def _load() -> str:
    return f"{os.getloadavg()[0]:.1f}"


# -- child process: build + save one engine, report memory -------------------

def _status(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    return 0


def _child(engine: str, passages_file: str, out_dir: str) -> None:
    from momoka.store import BM25

    passages = json.loads(Path(passages_file).read_text())
    tok = BM25()
    if engine == "bm25s":
        import bm25s

        interned: dict[str, str] = {}
        corpus = [[interned.setdefault(t, t) for t in tok.tokenize(p)] for p in passages]
        del interned
    del tok
    import gc

    gc.collect()
    Path("/proc/self/clear_refs").write_text("5")  # reset the peak RSS
    before = _status("VmRSS")
    t = time.perf_counter()
    if engine == "momoka":
        ix = BM25(idf="lucene")
        ix.add(passages)
        path = Path(out_dir) / "bm25.bin"
        ix.save(path)
        size = path.stat().st_size
        arrays = size
    else:
        ret = bm25s.BM25(method="lucene", k1=1.5, b=0.75, backend="numba")
        ret.index(corpus, show_progress=False)
        ret.save(out_dir)
        size = sum(f.stat().st_size for f in Path(out_dir).iterdir())
        arrays = sum(f.stat().st_size for f in Path(out_dir).glob("*.npy"))
    secs = time.perf_counter() - t
    print(json.dumps({"peak": _status("VmHWM") - before, "size": size, "arrays": arrays, "secs": secs}))


def build_memory(engine: str, passages: list[str]) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        pf = Path(tmp) / "passages.json"
        pf.write_text(json.dumps(passages))
        out = Path(tmp) / "out"
        out.mkdir()
        paths = [str(Path(__file__).resolve().parents[2] / "python"), os.environ.get("PYTHONPATH", "")]
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in paths if p))  # the caller's path too (bm25s, numba)
        r = subprocess.run([sys.executable, __file__, engine, str(pf), str(out)], capture_output=True, text=True,
                           env=env, check=True)
        return json.loads(r.stdout.strip().splitlines()[-1])


# -- the benchmark -------------------------------------------------------------

@pytest.mark.parametrize("size", list(SIZES))
def test_bm25_momoka_vs_bm25s_numba(shared_data, benchmark, size):
    if size == "1M" and os.environ.get("MOMOKA_BENCH_BM25_1M") != "1":
        pytest.skip("1M passages: set MOMOKA_BENCH_BM25_1M=1 (several GB, many minutes)")
    bm25s = pytest.importorskip("bm25s")
    pytest.importorskip("numba")
    from momoka.store import BM25

    passages = passages_of(shared_data, SIZES[size])
    queries = questions_of(shared_data)[:: QUERY_STEP.get(size, 1)]

    ix = BM25(idf="lucene")
    ix.add(passages)
    interned: dict[str, str] = {}
    ptoks = [[interned.setdefault(t, t) for t in ix.tokenize(p)] for p in passages]
    ret = bm25s.BM25(method="lucene", k1=1.5, b=0.75, backend="numba")
    ret.index(ptoks, show_progress=False)
    vocab = ret.vocab_dict
    qids = [[vocab[t] for t in ix.tokenize(q) if t in vocab] for q in queries]
    keep = [i for i, q in enumerate(qids) if q]
    queries = [queries[i] for i in keep]
    qids = [qids[i] for i in keep]
    nq = len(queries)

    runs = {
        "momoka search_batch, 1 thread": lambda: ix.search_batch(queries, 10, n_threads=1)[0],
        "bm25s numba retrieve, 1 thread": lambda: ret.retrieve(qids, k=10, show_progress=False, n_threads=1)[0],
        "momoka search_batch, 2 threads": lambda: ix.search_batch(queries, 10, n_threads=2)[0],
        "bm25s numba retrieve, 2 threads": lambda: ret.retrieve(qids, k=10, show_progress=False, n_threads=-1)[0],
    }
    results = {name: fn() for name, fn in runs.items()}  # warm-up (numba compiles here)
    times: dict[str, list[float]] = {name: [] for name in runs}
    cpus: dict[str, list[float]] = {name: [] for name in runs if "1 thread" in name}
    loads = []
    for _ in range(REPEATS):
        for name, fn in runs.items():
            c = time.process_time()
            t = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t)
            if name in cpus:
                cpus[name].append(time.process_time() - c)
        loads.append(_load())
    qps = {name: nq / statistics.median(ts) for name, ts in times.items()}

    # single-query latency, the engines alternating per query
    lat_q = range(0, nq, max(1, nq // LATENCY_QUERIES))
    lat_t: dict[str, list[float]] = {"momoka": [], "bm25s": []}
    for i in lat_q:
        t = time.perf_counter()
        ix.search(queries[i], 10)
        lat_t["momoka"].append(time.perf_counter() - t)
        t = time.perf_counter()
        ret.retrieve([qids[i]], k=10, show_progress=False, n_threads=1)
        lat_t["bm25s"].append(time.perf_counter() - t)
    lat = {e: statistics.median(v) for e, v in lat_t.items()}

    # agreement with the exact scorer on a subset of queries
    sub = range(0, nq, max(1, nq // (50 if size == "1M" else 300)))
    def agreement(ids):
        vals = []
        for i in sub:
            sc = ix.get_scores(queries[i])
            cut = np.sort(sc)[-10]
            vals.append(sum(sc[d] >= cut * (1 - 1e-6) for d in ids[i][:10] if d >= 0) / 10)
        return float(np.mean(vals))
    agree = {name: agreement(np.asarray(r)) for name, r in results.items()}

    # at 1M bm25s's child (a second tokenisation and build of 100M tokens in Python) is left out;
    # its score arrays are measured in this process instead
    mem = {e: build_memory(e, passages) for e in (("momoka",) if size == "1M" else ("momoka", "bm25s"))}
    bm25s_arrays = sum(a.nbytes for a in ret.scores.values() if hasattr(a, "nbytes"))
    print(f"\nbm25s score arrays in memory: {bm25s_arrays / (1 << 20):.1f} MB")
    benchmark.pedantic(runs["momoka search_batch, 1 thread"], rounds=1, iterations=1)

    print(f"\nBM25, {size}: {len(passages)} passages x {WORDS} words, {nq} queries, "
          f"median of {REPEATS} interleaved runs; load average per round: {' '.join(loads)}")
    print(f"{'engine':34s} {'queries/s':>10s} {'top10 agree':>12s}")
    for name in runs:
        cpu = f"  ({nq / statistics.median(cpus[name]):.0f} per CPU-second)" if name in cpus else ""
        print(f"{name:34s} {qps[name]:10.0f} {agree[name]:12.3f}{cpu}")
    print(f"single-query latency p50 over {len(lat_q)} questions: momoka search {lat['momoka'] * 1e3:.3f} ms, "
          f"bm25s retrieve {lat['bm25s'] * 1e3:.3f} ms")
    for th in ("1 thread", "2 threads"):
        r = qps[f"momoka search_batch, {th}"] / qps[f"bm25s numba retrieve, {th}"]
        print(f"ratio momoka/bm25s-numba ({th}): {r:.2f}x")
    rc = statistics.median(cpus["bm25s numba retrieve, 1 thread"]) / statistics.median(
        cpus["momoka search_batch, 1 thread"])
    print(f"ratio momoka/bm25s-numba (1 thread, CPU time): {rc:.2f}x")
    mb = 1 << 20
    for e, m in mem.items():
        print(f"{e:7s} build+save {m['secs']:6.1f} s, build peak {m['peak'] / mb:7.1f} MB above the loaded input, "
              f"serialized {m['size'] / mb:7.1f} MB (arrays {m['arrays'] / mb:.1f} MB), "
              f"peak/serialized {m['peak'] / m['size']:.2f}")
    assert agree["momoka search_batch, 1 thread"] == 1.0


if __name__ == "__main__":
    _child(*sys.argv[1:4])
