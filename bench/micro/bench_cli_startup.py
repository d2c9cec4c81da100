"""Wall time of ``momoka`` commands as processes: ``--help``, a BM25 query and a hybrid query.

Each command runs N times as a fresh process (``python -m momoka ...``), runs of
all commands and trees interleaved, and the median and the minimum wall time are
printed. Targets: ``--help`` and the BM25 query at most 0.3 s, the hybrid query
at most 0.5 s.

The store is a small one (the bundled example document, ``structure`` chunker),
built once in a temporary folder unless ``--store DIR`` names one. With
``--baseline TREE`` (a checkout of an earlier commit with its native module built
in ``TREE/python/momoka``, e.g. ``git worktree add --detach ../base HEAD~3``) the
same commands also run from that tree, side by side, each on a store it built (the same document).

Run:  PYTHONPATH=python python bench/micro/bench_cli_startup.py [-n 15] [--baseline TREE] [--store DIR]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
QUESTION = "how far can the light be seen?"
TARGETS = {"--help": 0.3, "query bm25": 0.3, "query hybrid": 0.5}


def _env(tree: Path) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(tree / "python")
    # modules compiled once, as an installed package's are at install (the warm-up run writes the .pyc files):
    # with PYTHONDONTWRITEBYTECODE every run would time Python compiling momoka's sources
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def _commands(store: Path) -> dict[str, list[str]]:
    return {
        "--help": ["--help"],
        "query bm25": ["query", str(store), QUESTION, "--retriever", "bm25"],
        "query hybrid": ["query", str(store), QUESTION, "--retriever", "hybrid"],
    }


def _run(tree: Path, args: list[str]) -> float:
    t = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "momoka", *args], env=_env(tree), capture_output=True, text=True)
    wall = time.perf_counter() - t
    if out.returncode != 0:
        raise SystemExit(f"momoka {' '.join(args)} from {tree} failed ({out.returncode}): {out.stderr.strip()}")
    return wall


def _build_store(path: Path, tree: Path = REPO) -> None:
    code = ("from momoka import Index; from momoka.examples import QUICKSTART_DOCUMENT; "
            f"Index.build([QUICKSTART_DOCUMENT], store={str(path)!r}, chunker='structure').close()")
    subprocess.run([sys.executable, "-c", code], env=_env(tree), check=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, default=15, help="runs of each command per tree (default 15)")
    ap.add_argument("--baseline", type=Path, default=None, metavar="TREE",
                    help="also run the commands from this checkout (its python/ on PYTHONPATH)")
    ap.add_argument("--store", type=Path, default=None, help="the store to query (default: a small one, built)")
    a = ap.parse_args()
    trees = {"this tree": REPO}
    if a.baseline is not None:
        if not any((a.baseline / "python" / "momoka").glob("_core*")):
            raise SystemExit(f"{a.baseline}: no native module in python/momoka (build or copy it first)")
        trees = {"baseline": a.baseline.resolve(), **trees}
    with tempfile.TemporaryDirectory(prefix="momoka-bench-cli-") as tmp:
        # each tree queries a store it built (the same document and chunker): a newer store format is
        # refused by an older release
        stores = {t: a.store or Path(tmp) / f"example-{i}.store" for i, t in enumerate(trees)}
        if a.store is None:
            for t, tree in trees.items():
                _build_store(stores[t], tree)
        cmds = {t: _commands(stores[t]) for t in trees}
        for t, tree in trees.items():  # warm the file cache and the model files once
            for args in cmds[t].values():
                _run(tree, args)
        walls: dict[tuple[str, str], list[float]] = {(t, c): [] for t in trees for c in cmds[t]}
        for _ in range(a.n):
            for t, tree in trees.items():
                for c, args in cmds[t].items():
                    walls[(t, c)].append(_run(tree, args))
    load = os.getloadavg()
    print(f"momoka commands as processes, {a.n} runs each, interleaved; load average {load[0]:.2f} {load[1]:.2f}; "
          f"{os.cpu_count()} CPUs")
    print(f"{'command':<14}" + "".join(f"{t + ' median':>18}{'min':>8}" for t in trees) + f"{'target':>9}")
    for c in TARGETS:
        row = f"{c:<14}"
        for t in trees:
            w = walls[(t, c)]
            row += f"{statistics.median(w):>16.3f} s{min(w):>6.3f} s"
        row += f"{TARGETS[c]:>7.1f} s"
        print(row)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
