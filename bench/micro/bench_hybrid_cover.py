"""What the hybrid retriever's coverage re-rank costs: held terms read from the BM25 postings against
tokenising every candidate chunk's text in Python on every query (the code before, kept here verbatim).

A store of ``$MOMOKA_SHARED_DATA/hotpotqa_dev500_pages`` (4,858 pages) is built once with the default
pipeline and embedder (``--store DIR``: reused when it holds a store). In one process, after a warm-up
pass, each of the first ``--n`` questions runs ``Index.search(q)`` with the defaults (hybrid, assembled to
5,000 characters) once each way, the two ways alternating question by question so that both see the same
load; the results must be equal (items, offsets, scores). Prints p50, p90 and p99 of each, and of the
coverage step alone.

With ``--baseline DIR`` (a folder holding a ``momoka`` package with its built ``_core*.so``, e.g. the
release before), the whole code of each side is also timed the same way in child processes of its own,
the sides alternating for ``--rounds`` rounds (medians over rounds), and their results compared; both
children run with ``PYTHONHASHSEED=0``, as the coverage sums follow the query's set order.

Run:  PYTHONPATH=python python bench/micro/bench_hybrid_cover.py --store /tmp/pages.store [--baseline DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
from _oracles.coverage import cover_by_tokenising as tokenising_cover  # noqa: E402  (the step as it was)


def _data() -> Path:
    return Path(os.environ.get("MOMOKA_SHARED_DATA") or ROOT.parent / "shared" / "data") / "hotpotqa_dev500_pages"


def child(store: str, n: int) -> dict:
    """One side's whole code: a warm-up pass, then ``Index.search(q)`` per question, timed."""
    import numpy as np

    from momoka import Index
    from momoka.eval import load_dataset

    questions = [q.question for q in load_dataset(_data()).questions[:n]]
    ix = Index.open(store)
    for q in questions:
        ix.search(q)
    times, results = [], []
    for q in questions:
        t = time.perf_counter()
        r = ix.search(q)
        times.append((time.perf_counter() - t) * 1000)
        results.append([[m.doc_id, m.start, m.end, it.score] for it in r for m in it.members])
    p50, p90, p99 = np.percentile(times, [50, 90, 99])
    return {"p50_ms": float(p50), "p90_ms": float(p90), "p99_ms": float(p99), "results": results}


def sides(store: Path, baseline: str, n: int, rounds: int) -> None:
    """The current code and the baseline in child processes, alternating."""
    paths = {"current": str(ROOT / "python"), "baseline": str(Path(baseline).resolve())}
    runs: dict[str, list[dict]] = {s: [] for s in paths}
    for r in range(rounds):
        for side, path in paths.items():
            env = dict(os.environ, PYTHONPATH=path, PYTHONHASHSEED="0")
            out = subprocess.run([sys.executable, __file__, "--child", str(store), "--n", str(n)],
                                 env=env, capture_output=True, text=True, check=True).stdout
            runs[side].append(json.loads(out.strip().splitlines()[-1]))
            print(f"round {r + 1} {side}: p50 {runs[side][-1]['p50_ms']:.1f} ms", file=sys.stderr)
    same = runs["current"][0]["results"] == runs["baseline"][0]["results"]
    print(f"whole code, child processes, {rounds} rounds (medians), load {os.getloadavg()[0]:.1f}; "
          f"results equal: {same}")
    for side, v in runs.items():
        med = {k: sorted(x[k] for x in v)[len(v) // 2] for k in ("p50_ms", "p90_ms", "p99_ms")}
        print(f"{side:10s} search p50 {med['p50_ms']:.1f} p90 {med['p90_ms']:.1f} p99 {med['p99_ms']:.1f} ms")


def main() -> None:
    import numpy as np

    from momoka import Index
    from momoka.eval import load_dataset
    from momoka.methods.standard.retrievers import HybridRetriever

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", help="store folder (built there first when it holds none)")
    ap.add_argument("--n", type=int, default=200, help="questions timed")
    ap.add_argument("--baseline", help="folder holding the baseline momoka package: also time it, whole")
    ap.add_argument("--rounds", type=int, default=3, help="rounds of the child processes (with --baseline)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.n)))
        return
    if not _data().is_dir():
        print(f"skipped: {_data()} is absent", file=sys.stderr)
        return
    ds = load_dataset(_data())
    if not args.store:
        ap.error("--store is required")
    store = Path(args.store)
    if not (store / "manifest.json").exists():
        Index.build(ds.documents, store=store).close()
    ix = Index.open(store)
    questions = [q.question for q in ds.questions[:args.n]]
    native_cover = HybridRetriever._cover
    cover_s = {"native": [], "tokenising": []}

    def timed(fn, key):
        def cover(self, queries, fused, k):
            t = time.perf_counter()
            out = fn(self, queries, fused, k)
            cover_s[key].append(time.perf_counter() - t)
            return out
        return cover

    def run(q, key):
        HybridRetriever._cover = timed(native_cover if key == "native" else tokenising_cover, key)
        t = time.perf_counter()
        r = ix.search(q)
        dt = time.perf_counter() - t
        return dt, [(m.doc_id, m.start, m.end, it.score) for it in r for m in it.members]

    for q in questions:  # warm-up: the embedder, the title tables, the page cache
        run(q, "native")
        run(q, "tokenising")
    for key in cover_s:
        cover_s[key].clear()
    total = {"native": [], "tokenising": []}
    for i, q in enumerate(questions):
        order = ("native", "tokenising") if i % 2 == 0 else ("tokenising", "native")
        got = {}
        for key in order:
            dt, got[key] = run(q, key)
            total[key].append(dt)
        assert got["native"] == got["tokenising"], q
    HybridRetriever._cover = native_cover
    print(f"{ix.store.n_chunks} chunks, {len(questions)} questions; in one process, the coverage step each way, "
          f"alternating; load {os.getloadavg()[0]:.1f}")
    for key in total:
        t = np.percentile(np.array(total[key]) * 1000, [50, 90, 99])
        c = np.percentile(np.array(cover_s[key]) * 1000, [50, 90, 99])
        print(f"{key:10s} search p50 {t[0]:.1f} p90 {t[1]:.1f} p99 {t[2]:.1f} ms;  coverage step p50 {c[0]:.2f} "
              f"p90 {c[1]:.2f} p99 {c[2]:.2f} ms")
    ix.close()
    if args.baseline:
        sides(store, args.baseline, args.n, args.rounds)


if __name__ == "__main__":
    main()
