"""Soak: the store fuzzer of tests/store/_store_fuzz.py for a long time (default 10 minutes).

    python bench/soak/soak_store_fuzz.py [SECONDS] [SEED]

Prints the number of trials and their outcomes (error / same / repaired, and
any failure: a wrong answer without an error, a non-momoka exception, or the
fuzzer dying by a signal). Exit status 1 on any failure.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

FUZZ = Path(__file__).resolve().parents[2] / "tests" / "store" / "_store_fuzz.py"


def main() -> int:
    seconds = sys.argv[1] if len(sys.argv) > 1 else "600"
    seed = sys.argv[2] if len(sys.argv) > 2 else "1"
    with tempfile.TemporaryDirectory(prefix="momoka-soak-") as tmp:
        p = subprocess.run([sys.executable, str(FUZZ), tmp, seconds, str(10**9), seed], capture_output=True, text=True)
    if p.returncode != 0:
        print(f"FAIL: the fuzzer died with status {p.returncode}\n{p.stderr[-3000:]}")
        return 1
    rep = json.loads(p.stdout.strip().splitlines()[-1])
    print(f"{rep['trials']} trials in {rep['seconds']}s over {rep['files']} files: {rep['outcomes']}")
    for f, counts in sorted(rep["per_file"].items()):
        print(f"  {f:<40} {counts}")
    if rep["n_failures"]:
        print(f"FAIL: {rep['n_failures']} failures, e.g. {rep['failures'][:3]}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
