"""Store fuzzing: write random bytes into every file of a small store, then open and query it.

Usage: python _store_fuzz.py WORKDIR SECONDS [MAX_TRIALS] [SEED]

Builds a small store (hash embedder, raw and titled views, BM25), records the
answers of a few queries, then repeatedly damages one file (random bytes
overwritten, the file truncated, or bytes appended), opens the store, queries
it and restores the file. Every trial must end in a clear momoka error or the
clean answers (a damaged HNSW graph is rebuilt from the vectors, with a
warning). Prints one JSON line: trials, outcomes, per-file counts and the
failures (anything else: a wrong answer or a non-momoka exception). A crash
of the interpreter ends the process with a signal, which the caller sees.
Used by tests/store/test_store_fuzz.py (bounded budget) and
bench/soak/soak_store_fuzz.py (long runs).
"""

from __future__ import annotations

import json
import os
import random
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from conftest import TOPICS, HashEmbedder

from momoka.errors import MomokaError, StoreCorruptedError
from momoka import Index

QUERIES = [("apples harvest", "bm25", None), ("rocket engine thrust", "dense", None), ("violin strings", "hybrid", None),
           ("volcano lava", "dense", "titled"), ("chess king", "bm25", "titled")]


def build(root: Path) -> Path:
    docs = []
    for name, text in TOPICS.items():
        for v in range(3):
            body = "\n\n".join(f"{text} Part {v}.{i} on {name}, note {v * 7 + i}." for i in range(3))
            docs.append({"doc_id": f"{name}-{v}", "title": f"{name} {v}", "text": body})
    store = root / "store"
    Index.build(docs, store=store, embedder=HashEmbedder(), chunker="paragraph", enrich=[("title", {"mode": "document"})],
                progress=False).close()
    return store


def answers(store: Path) -> list:
    ix = Index.open(store, embedder=HashEmbedder())
    out = []
    for q, r, view in QUERIES:
        opts = {"view": view} if view else {}
        if r == "hybrid" or (view and r == "bm25"):
            opts = {}
        out.append([(it.doc_id, it.start, it.end, round(it.score, 5)) for it in ix.search(q, k=3, retriever=r, **opts)])
    out.append(sorted(ix.corpus.doc_ids))
    return out


def damage(p: Path, rng: random.Random) -> str:
    before = p.read_bytes()
    while True:  # a truncation at the end or bytes equal to those replaced would change nothing: draw again
        kind = _damage(p, before, rng)
        if p.read_bytes() != before:
            return kind


def _damage(p: Path, before: bytes, rng: random.Random) -> str:
    data = bytearray(before)
    mode = rng.random()
    if mode < 0.7 and data:
        off = rng.randrange(len(data))
        n = rng.randint(1, 16)
        data[off : off + n] = bytes(rng.randrange(256) for _ in range(min(n, len(data) - off)))
        kind = "overwrite"
    elif mode < 0.85:
        del data[rng.randrange(len(data) + 1):]
        kind = "truncate"
    else:
        data += bytes(rng.randrange(256) for _ in range(rng.randint(1, 64)))
        kind = "append"
    p.write_bytes(bytes(data))
    return kind


def main() -> None:
    work, seconds = Path(sys.argv[1]), float(sys.argv[2])
    max_trials = int(sys.argv[3]) if len(sys.argv) > 3 else 10**9
    rng = random.Random(int(sys.argv[4]) if len(sys.argv) > 4 else 0)
    store = build(work)
    want = answers(store)
    files = sorted(p for p in store.rglob("*") if p.is_file() and p.name != ".lock")
    pristine = {p: p.read_bytes() for p in files}
    outcomes = {"error": 0, "same": 0, "repaired": 0}
    per_file: dict[str, dict] = {}
    failures = []
    t0 = time.monotonic()
    trials = 0
    while trials < max_trials and time.monotonic() - t0 < seconds:
        trials += 1
        p = files[trials % len(files)] if trials <= len(files) else rng.choice(files)  # every file, then at random
        kind = damage(p, rng)
        rel = str(p.relative_to(store))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                got = answers(store)
                if got != want:
                    outcome = "WRONG"
                    failures.append({"file": rel, "damage": kind, "what": "different answers, no error"})
                elif any("rebuilding" in str(w.message) for w in caught):
                    outcome = "repaired"
                else:
                    outcome = "same"
            except StoreCorruptedError as exc:
                outcome = "error"
                if exc.path is None:
                    failures.append({"file": rel, "damage": kind, "what": f"error without a file: {exc}"})
            except MomokaError as exc:
                outcome = "error"
                if "corrupt" not in str(exc) and rel.split("/")[-1] not in str(exc):
                    failures.append({"file": rel, "damage": kind, "what": f"unclear error: {exc}"})
            except Exception as exc:  # noqa: BLE001 - anything else is a failure of the store
                outcome = "CRASH"
                failures.append({"file": rel, "damage": kind, "what": f"{type(exc).__name__}: {exc}"})
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
        pf = per_file.setdefault(rel, {})
        pf[outcome] = pf.get(outcome, 0) + 1
        p.write_bytes(pristine[p])
    print(json.dumps({"trials": trials, "seconds": round(time.monotonic() - t0, 1), "files": len(files),
                      "outcomes": outcomes, "per_file": per_file, "failures": failures[:20],
                      "n_failures": len(failures)}))


if __name__ == "__main__":
    main()
