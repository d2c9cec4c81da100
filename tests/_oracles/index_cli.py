"""``momoka index`` run as a user runs it, for the tests of the LLM-backed stages.

A child process of this checkout's package over ``tmp_path/docs`` into ``tmp_path/s``, BM25 only, against a
(scripted) OpenAI-compatible server at ``url``, with a model home of the test's own, no progress output, and
no LLM settings inherited from the environment.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import momoka

REPO_PY = Path(momoka.__file__).resolve().parents[1]


def index_with_llm(tmp_path: Path, url: str, *args: str) -> subprocess.CompletedProcess:
    """``momoka index DOCS --store S --no-dense --llm-url URL --llm-model scripted ARGS...`` in a child process."""
    env = dict(os.environ, PYTHONPATH=str(REPO_PY) + os.pathsep + os.environ.get("PYTHONPATH", ""),
               MOMOKA_HOME=str(tmp_path / "home"), MOMOKA_PROGRESS="0")
    for k in ("MOMOKA_LLM_CACHE", "MOMOKA_LLM_MAX_FAILED", "MOMOKA_LLM_BASE_URL"):
        env.pop(k, None)
    cmd = [sys.executable, "-m", "momoka", "index", str(tmp_path / "docs"), "--store", str(tmp_path / "s"),
           "--no-dense", "--llm-url", url, "--llm-model", "scripted", *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=180)
