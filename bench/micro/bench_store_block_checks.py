"""What verifying every read costs: query latency with block checksums against a baseline without them.

A store of the documents of ``$MOMOKA_SHARED_DATA/squad_v1_dev_half_a`` is built once with the default
pipeline and embedder (by this checkout's code, so its manifest carries block checksums). Each side then
opens it in a child process of its own with ``MOMOKA_VERIFY_MB=0``: nothing is hashed at open, so the code
under test verifies every file by its block checksums as it reads it (files read whole at open when
loaded, chunk texts and vector rows a 64 KiB block at a time), while the baseline (a release without block
checksums, ``--baseline DIR``: a folder holding a ``momoka`` package with its built ``_core*.so``) reads
them unverified, as it did past its 64 MiB limit. Per side: the open, the first query (it touches the most
unverified blocks), and ``Index.search(q)`` with the defaults (hybrid, assembled to 5,000 characters) for
Q questions after one warm-up pass (p50, p99, mean). Sides alternate for ``--rounds`` rounds; the table
gives the medians over rounds and the ratio current / baseline (target for the warm query: at most 1.05).

Run:  PYTHONPATH=python python bench/micro/bench_store_block_checks.py --baseline ../baseline/python
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _data() -> Path:
    return Path(os.environ.get("MOMOKA_SHARED_DATA") or ROOT.parent / "shared" / "data") / "squad_v1_dev_half_a"


def child(store: str, n: int) -> dict:
    import numpy as np

    from momoka import Index
    from momoka.eval import load_dataset

    questions = [q.question for q in load_dataset(_data()).questions[:n]]
    t = time.perf_counter()
    ix = Index.open(store)
    opened = time.perf_counter() - t
    ix.corpus.embedder.embed(["warm the embedder"])  # the model's own start is not what this measures
    t = time.perf_counter()
    ix.search(questions[0])
    first = time.perf_counter() - t
    for q in questions:
        ix.search(q)
    times = []
    for q in questions:
        t = time.perf_counter()
        ix.search(q)
        times.append((time.perf_counter() - t) * 1000)
    p50, p99 = np.percentile(times, [50, 99])
    return {"open_ms": opened * 1000, "first_ms": first * 1000, "p50_ms": float(p50), "p99_ms": float(p99),
            "mean_ms": float(np.mean(times)), "chunks": ix.store.n_chunks}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", required=False, help="folder holding the baseline momoka package")
    ap.add_argument("--store", help="reuse (or build) the store here")
    ap.add_argument("--questions", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", help="write the results as JSON here")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        print(json.dumps(child(a.child, a.questions)))
        return 0
    if not _data().is_dir():
        print(f"skipped: {_data()} is absent", file=sys.stderr)
        return 0
    store = Path(a.store or Path(tempfile.mkdtemp()) / "squad.store")
    if not (store / "manifest.json").exists():
        from momoka import Index
        from momoka.eval import load_dataset

        Index.build(load_dataset(_data()).documents, store=store).close()
    sides = {"current": str(ROOT / "python")}
    if a.baseline:
        sides["baseline"] = str(Path(a.baseline).resolve())
    runs: dict[str, list[dict]] = {s: [] for s in sides}
    for r in range(a.rounds):
        for side, path in sides.items():
            env = dict(os.environ, PYTHONPATH=path, MOMOKA_VERIFY_MB="0")
            out = subprocess.run([sys.executable, __file__, "--child", str(store), "--questions", str(a.questions)],
                                 env=env, capture_output=True, text=True, check=True).stdout
            runs[side].append(json.loads(out.strip().splitlines()[-1]))
            print(f"round {r + 1} {side}: {runs[side][-1]}", file=sys.stderr)
    med = {s: {k: sorted(x[k] for x in v)[len(v) // 2] for k in v[0]} for s, v in runs.items()}
    load = os.getloadavg()[0]
    print(f"store: {med['current']['chunks']} chunks; {a.questions} questions x {a.rounds} rounds; load {load:.1f}")
    print(f"{'':10s} {'open ms':>9s} {'first ms':>9s} {'p50 ms':>8s} {'p99 ms':>8s} {'mean ms':>8s}")
    for s, m in med.items():
        print(f"{s:10s} {m['open_ms']:9.1f} {m['first_ms']:9.1f} {m['p50_ms']:8.2f} {m['p99_ms']:8.2f} {m['mean_ms']:8.2f}")
    if "baseline" in med:
        c, b = med["current"], med["baseline"]
        print("ratio      " + " ".join(f"{c[k] / b[k]:8.3f}x" for k in ("open_ms", "first_ms", "p50_ms", "p99_ms",
                                                                         "mean_ms")))
    if a.out:
        Path(a.out).write_text(json.dumps({"load": load, "runs": runs, "median": med}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
