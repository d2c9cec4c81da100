"""Fixtures of the LLM tests: scripted servers on 127.0.0.1, a temporary cache, a fast retry policy."""

from __future__ import annotations

import pytest

from momoka.llm import RetryPolicy
from momoka.llm.testing import ScriptedServer


@pytest.fixture
def make_server():
    """Factory: ``make_server(script=None, delay=0.0, routes=None)`` -> a started ScriptedServer (stopped after the test)."""
    started = []

    def make(script=None, delay=0.0, routes=None):
        srv = ScriptedServer(script, delay=delay, routes=routes).start()
        started.append(srv)
        return srv

    yield make
    for s in started:
        s.stop()


@pytest.fixture
def cache_path(tmp_path):
    """A fresh cache file path."""
    return tmp_path / "llm-cache.sqlite"


@pytest.fixture
def fast_retry():
    """Retries with tiny backoffs so fault-injection tests stay fast."""
    return RetryPolicy(max_retries=3, backoff_base=0.01, backoff_max=0.05, jitter=0.5)
