"""The Ray driver's peak memory and wall time: workers shipping their vectors to the driver against workers
writing them into the store (``MOMOKA_RAY_WRITE_PARTS``), and both against the single-process build.

Passages are real text: the paragraphs of every ``documents.jsonl`` under ../shared/data, cut into pieces of
at most 60 words (pieces of fewer than 15 words dropped), the first ``--passages`` of them (default 20,000),
each a document. Each build runs in a fresh process (so its peak RSS, ``VmHWM`` of ``/proc/self/status``, is
its own) with the default chunker and embedder, default commits (every 256 documents), ``--workers`` Ray
workers on a local Ray cluster that the process starts before the clock starts (not timed, its own memory
not counted: the driver's is). The driver's RSS is also sampled every 50 ms (the build's own high-water
mark, ``peak_build``, without what the process held before the build started). Then the stores are compared:
same chunk ids and texts, vectors bit for bit, and the same top 5 of 200 passages used as queries for the
dense, BM25 and hybrid retrievers.

``--baseline DIR`` adds a build by another copy of momoka (``DIR`` on ``PYTHONPATH``, e.g. the ``python/``
folder of an earlier commit, exported with ``git archive COMMIT python | tar -x -C /tmp/base`` and the compiled
core copied beside it): how the driver fared before (its workers then ship their vectors).

Run:  PYTHONPATH=python python bench/micro/bench_ray_driver_memory.py [--passages 20000] [--workers 2] [--no-local]
      [--baseline DIR]
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve()
DATA = HERE.parents[3] / "shared" / "data"


def passages(n: int) -> list[dict]:
    """The first ``n`` passages (pieces of at most 60 words of the shared data's paragraphs) as documents."""
    out: list[str] = []
    for f in sorted(glob.glob(str(DATA / "*" / "documents.jsonl"))):
        with open(f, encoding="utf-8") as fh:
            for line in fh:
                for para in (json.loads(line).get("text") or "").split("\n"):
                    words = para.split()
                    for i in range(0, len(words), 60):
                        if len(words[i : i + 60]) >= 15:
                            out.append(" ".join(words[i : i + 60]))
    if len(out) < n:
        sys.exit(f"only {len(out)} passages under {DATA}, fewer than {n}")
    return [{"doc_id": f"p{i:06d}", "text": t} for i, t in enumerate(out[:n])]


def _status(key: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    return 0


def build(mode: str, n: int, workers: int, store: str) -> None:
    """One build in this process; prints one JSON line."""
    if mode == "local":
        from momoka import Index
    else:
        os.environ["MOMOKA_RAY_WRITE_PARTS"] = "1" if mode == "ray-write" else "0"
        from momoka import Index
        from momoka.methods.distributed import connect

        connect(num_cpus=workers)
    docs = passages(n)
    before = _status("VmRSS")
    peak = [before]
    done = threading.Event()

    def sample():
        while not done.wait(0.05):
            peak[0] = max(peak[0], _status("VmRSS"))

    threading.Thread(target=sample, daemon=True).start()
    t = time.perf_counter()
    kw = {} if mode == "local" else {"engine": "ray", "workers": workers}
    ix = Index.build(docs, store=store, progress=False, **kw)
    ix.close()
    dt = time.perf_counter() - t
    done.set()
    import momoka

    print(json.dumps({"mode": mode, "momoka": str(Path(momoka.__file__).parent), "seconds": dt, "rss_before": before, "peak_build": peak[0],
                      "hwm": _status("VmHWM"), "timing": ix.report.timing}))


def compare(stores: dict[str, str], n_queries: int = 200) -> list[str]:
    """Differences between the stores (empty when they are the same)."""
    import numpy as np

    from momoka import Index
    from momoka.store._verify import verify_store

    bad = []
    ixs = {k: Index.open(p) for k, p in stores.items()}
    first, ref = next(iter(ixs.items()))
    ids = ref.store.chunks.ids()
    qs = [ref.store.chunks.text(int(c)) for c in ids[:: max(1, len(ids) // n_queries)][:n_queries]]
    want = {r: [[it.spans for it in g] for g in ref.search_batch(qs, k=5, retriever=r)]
            for r in ("dense", "bm25", "hybrid")}
    for k, ix in ixs.items():
        if verify_store(stores[k])["damaged"]:
            bad.append(f"{k}: verify_store finds damage")
        if k == first:
            continue
        if list(ix.store.chunks.ids()) != list(ids):
            bad.append(f"{k}: chunk ids differ from {first}")
            continue
        if [ix.store.chunks.text(int(c)) for c in ids] != [ref.store.chunks.text(int(c)) for c in ids]:
            bad.append(f"{k}: texts differ from {first}")
        if not np.array_equal(ix.store.vector_view("raw").get(ids), ref.store.vector_view("raw").get(ids)):
            bad.append(f"{k}: vectors differ from {first}")
        for r, w in want.items():
            got = [[it.spans for it in g] for g in ix.search_batch(qs, k=5, retriever=r)]
            diff = sum(g != x for g, x in zip(got, w))
            if diff:
                bad.append(f"{k}: {diff} of {len(qs)} {r} top-5 lists differ from {first}")
    for ix in ixs.values():
        ix.close()
    return bad


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--passages", type=int, default=20_000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--no-local", action="store_true", help="skip the single-process build")
    ap.add_argument("--baseline", help="PYTHONPATH of another momoka copy to build with too (mode 'baseline')")
    ap.add_argument("--build", nargs=2, metavar=("MODE", "STORE"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.build:
        build(a.build[0], a.passages, a.workers, a.build[1])
        return
    modes = (["baseline"] if a.baseline else []) + ["ray-ship", "ray-write"] + ([] if a.no_local else ["local"])
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        stores = {m: str(Path(tmp) / m) for m in modes}
        for m in modes:
            env = dict(os.environ, PYTHONPATH=a.baseline) if m == "baseline" else None
            r = subprocess.run([sys.executable, str(HERE), "--passages", str(a.passages), "--workers", str(a.workers),
                                "--build", "ray-ship" if m == "baseline" else m, stores[m]], capture_output=True,
                               text=True, check=False, env=env)
            lines = [x for x in r.stdout.splitlines() if x.startswith("{")]
            if r.returncode or not lines:
                sys.exit(f"{m} failed:\n{r.stderr[-3000:]}")
            rows[m] = json.loads(lines[-1])
            print(f"{m} done; load average {os.getloadavg()}", flush=True)
        bad = compare(stores)
    mib = 1 / 2**20
    print(f"\n{a.passages} passages, {a.workers} Ray workers; load average {os.getloadavg()} on {os.cpu_count()} CPUs")
    print("| build | seconds | driver peak RSS (MiB) | RSS before the build (MiB) | build's own growth (MiB) | "
          "writer apply+commit s |")
    print("|---|---|---|---|---|---|")
    for m, r in rows.items():
        tm = r.get("timing") or {}
        w = f"{tm['apply_s'] + tm['commit_s']:.1f}" if tm else ""
        print(f"| {m} | {r['seconds']:.1f} | {r['hwm'] * mib:.0f} | {r['rss_before'] * mib:.0f} | "
              f"{(r['peak_build'] - r['rss_before']) * mib:.0f} | {w} |")
    if a.baseline:
        print(f"baseline: {rows['baseline']['momoka']}")
    print("stores equal" if not bad else "DIFFERENCES:\n" + "\n".join(bad))


if __name__ == "__main__":
    main()
