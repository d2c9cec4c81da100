"""``momoka eval`` reports progress per retriever while it answers the questions, and slicing changes nothing.

Tried: ``run_eval`` on the first 10 SQuAD questions with evidence (their documents only), BM25 and dense,
once in slices of 3 questions and once in one slice: the same per-question figures; and the CLI with
stderr a pipe and ``MOMOKA_PROGRESS_INTERVAL=0``: one ``eval NAME: i/10 questions`` line per slice per
retriever, none with ``MOMOKA_PROGRESS=0``.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from momoka.eval import runner

pytestmark = [pytest.mark.data, pytest.mark.models]


def test_slices_change_no_result(shared_data, monkeypatch):
    data = shared_data / "squad_v1_dev_half_a"
    whole = runner.run_eval(data, ["bm25", "dense"], limit=10, documents="questions", progress=False)
    monkeypatch.setattr(runner, "EVAL_SLICE", 3)
    sliced = runner.run_eval(data, ["bm25", "dense"], limit=10, documents="questions", progress=False)
    for name in ("bm25", "dense"):
        assert sliced["retrievers"][name]["item"]["means"] == whole["retrievers"][name]["item"]["means"]
    assert sliced["intervals"] == whole["intervals"] and sliced["margins"] == whole["margins"]


def test_cli_prints_progress_per_retriever(shared_data, tmp_path):
    env = {**os.environ, "MOMOKA_PROGRESS_INTERVAL": "0"}
    cmd = [sys.executable, "-m", "momoka", "eval", "--data", str(shared_data / "squad_v1_dev_half_a"),
           "--retriever", "bm25", "--limit", "40", "--documents", "questions"]
    run = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    lines = [ln for ln in run.stderr.splitlines() if ln.startswith("eval bm25: ")]
    assert [ln.split(" questions")[0] for ln in lines] == [
        "eval bm25: 32/40", "eval bm25: 40/40"]
    quiet = subprocess.run(cmd, env={**env, "MOMOKA_PROGRESS": "0"}, cwd=tmp_path, capture_output=True, text=True,
                           timeout=300)
    assert quiet.returncode == 0 and not any(ln.startswith("eval bm25") for ln in quiet.stderr.splitlines())
