"""Shared test fixtures.

``shared_data`` locates the real benchmark sets in ``../shared/data`` (beside
the repository, or wherever ``MOMOKA_SHARED_DATA`` points) and skips the test
cleanly when they are absent. The plain-Python oracles the native code and the
methods are checked against are the package ``tests/_oracles`` (importable as
``_oracles``: this folder is put on ``sys.path`` here, and ``bench/`` does the same).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from momoka.eval.datasets import find_shared_data

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parent))


@pytest.fixture(scope="session", autouse=True)
def _caches_in_a_temporary_folder(tmp_path_factory):
    """What the tests compute goes to folders of the test session, never to the user's ``$MOMOKA_HOME``:
    LLM answers (``MOMOKA_LLM_CACHE``, else ``llm.sqlite``) and computed model outputs such as the ppl
    chunker's log-probs (``MOMOKA_CACHE_DIR``, else ``cache/``). CLI subprocesses inherit both; tests that
    name their own cache still use theirs. Only ``momoka models install`` writes to ``$MOMOKA_HOME``."""
    mp = pytest.MonkeyPatch()
    mp.setenv("MOMOKA_LLM_CACHE", str(tmp_path_factory.mktemp("llm-cache") / "llm.sqlite"))
    mp.setenv("MOMOKA_CACHE_DIR", str(tmp_path_factory.mktemp("computed-cache")))
    yield
    mp.undo()


@pytest.fixture(scope="session")
def shared_data() -> Path:
    d = find_shared_data(REPO_ROOT)
    if d is None:
        pytest.skip("../shared/data is not available")
    return d


@pytest.fixture
def make_server():
    """Scripted OpenAI-compatible servers on 127.0.0.1 (:mod:`momoka.llm.testing`).

    Factory: ``make_server(script=None, delay=0.0, routes=None)`` -> a started ScriptedServer (stopped after the test).
    """
    from momoka.llm.testing import ScriptedServer

    started = []

    def make(script=None, delay=0.0, routes=None):
        srv = ScriptedServer(script, delay=delay, routes=routes).start()
        started.append(srv)
        return srv

    yield make
    for s in started:
        s.stop()
