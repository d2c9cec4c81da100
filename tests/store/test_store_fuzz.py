"""Store fuzzing with a bounded budget: random bytes in every file never crash or silently change answers.

The fuzzer (``_store_fuzz.py``) runs in a child process, so a crash of the
interpreter (a segfault in a native reader) fails this test with its signal
instead of killing the test run. ``bench/soak/soak_store_fuzz.py`` runs it longer.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import momoka

FUZZ = Path(__file__).with_name("_store_fuzz.py")
REPO_PY = Path(momoka.__file__).resolve().parents[1]


def test_random_bytes_in_every_store_file(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(REPO_PY) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    # tried: 1-16 random bytes over a random offset, truncation, appended bytes; every file of the store
    # (manifest, documents, chunk columns, vectors, HNSW graphs, BM25) first once each, then at random
    p = subprocess.run([sys.executable, str(FUZZ), str(tmp_path), "12", "3000", "18"], capture_output=True,
                       text=True, env=env, timeout=300)
    assert p.returncode == 0, f"the fuzzer died (rc {p.returncode}): {p.stderr[-2000:]}"
    rep = json.loads(p.stdout.strip().splitlines()[-1])
    print(f"store fuzz: {rep['trials']} trials in {rep['seconds']}s over {rep['files']} files: {rep['outcomes']}")
    assert rep["n_failures"] == 0, rep["failures"]
    assert set(rep["outcomes"]) <= {"error", "same", "repaired"}
    assert rep["trials"] >= 200 and len(rep["per_file"]) == rep["files"]  # every file was damaged
    # damaged graphs are rebuilt from the vectors; everything else read at open is an error naming the file
    for f, counts in rep["per_file"].items():
        if f.endswith(".npy") or f.endswith("documents.jsonl") or f == "manifest.json" or "bm25/" in f:
            assert set(counts) == {"error"}, (f, counts)
