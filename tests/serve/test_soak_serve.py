"""The short version of ``bench/soak/soak_serve.py``: ``momoka serve`` as a process, 8 clients for 10 s while a
writer process commits every 2 s, compacts, is SIGKILLed once and restarted, and hostile clients (20 idle, 4
slow, an oversize body, 7 malformed requests) come and go; then 1,000 searches with new options each."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SOAK = Path(__file__).resolve().parents[2] / "bench" / "soak" / "soak_serve.py"


def _soak():
    spec = importlib.util.spec_from_file_location("soak_serve", SOAK)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_analysis_finds_torn_reads_errors_and_lags():
    # the checker itself, on hand-made records: generation 2 holds a, b; an answer naming 2 with c is torn
    commits = {1: {"generation": 1, "kind": "build", "doc_ids": ["a"], "t": 100.0},
               2: {"generation": 2, "kind": "add", "doc_ids": ["a", "b"], "t": 101.0},
               3: {"generation": 3, "kind": "add", "doc_ids": ["a", "b", "c"], "t": 103.0}}
    answers = [{"status": 200, "generation": 1, "docs": ["a"], "ms": 1.0, "t": 100.5},
               {"status": 200, "generation": 2, "docs": ["a", "b"], "ms": 3.0, "t": 101.25},
               {"status": 200, "generation": 2, "docs": ["c"], "ms": 2.0, "t": 102.0},
               {"status": 500, "error": "boom", "ms": 0.0, "t": 102.5},
               {"status": 200, "generation": 9, "docs": ["a"], "ms": 4.0, "t": 104.0}]
    rep = _soak().analyse(answers, commits)
    assert rep["queries"] == 4 and rep["errors"] == 1 and rep["torn"] == 2 and rep["unverified"] == 1
    assert rep["max_lag_s"] == 1.0 and rep["median_lag_s"] == 0.625 and rep["unreflected_commits"] == 0
    assert rep["answers_with_later_documents"] == 2 and rep["p50_ms"] == 2.0 and rep["max_ms"] == 4.0


@pytest.mark.slow
@pytest.mark.data  # the shared sets' documents when present, else the bundled example
def test_short_soak(tmp_path):
    from momoka.eval.datasets import find_shared_data

    data = find_shared_data(Path(__file__).resolve().parents[2])  # the example document when absent
    cmd = [sys.executable, str(SOAK), "--seconds", "10", "--clients", "8", "--commit-every", "2", "--kill-at", "0.5",
           "--idle", "20", "--slow", "4", "--hostile-timeout", "2", "--distinct-options", "1000",
           "--work", str(tmp_path / "soak")] + (["--data", str(data)] if data else [])
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=240,
                       env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    rep = json.loads(p.stdout.strip().splitlines()[-1])
    print(p.stderr.strip().splitlines()[-1])
    assert p.returncode == 0 and rep["ok"], rep
    assert rep["queries"] > 100 and rep["errors"] == 0 and rep["torn"] == 0 and rep["unverified"] == 0
    assert rep["lost_at_kill"] == 0 and rep["lost_at_end"] == 0 and rep["commits_after_restart"] >= 1
    assert rep["commits"] >= 4 and rep["compactions"] >= 1 and rep["generations_served"] >= 3
    assert rep["answers_with_later_documents"] > 0  # the torn-read check saw documents added during the run
    assert rep["unreflected_commits"] <= 1 and rep["max_lag_s"] is not None and rep["max_lag_s"] < 5
    # hostile clients during the load: closed or refused, and the load above still had 0 errors
    h = rep["hostile"]
    assert h["idle_closed"] == 20 and 2 <= h["idle_closed_after_s"] < 5 and h["slow_408"] == 4, h
    assert h["oversize_413"] and h["malformed_400"] == h["malformed"] == 7, h
    assert rep["server_tracebacks"] == 0
    m = rep["memory"]  # a new options value per search: the retrievers kept stay at the cache's size
    assert m["non_200"] == 0 and m["retrievers_cached"] == 32 and m["growth_kb"] < 5 * 1024, m
