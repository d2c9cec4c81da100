"""Fixtures of the LLM tests: a temporary cache, a fast retry policy (scripted servers: ``make_server`` in tests/conftest.py)."""

from __future__ import annotations

import pytest

from momoka.llm import RetryPolicy


@pytest.fixture
def cache_path(tmp_path):
    """A fresh cache file path."""
    return tmp_path / "llm-cache.sqlite"


@pytest.fixture
def fast_retry():
    """Retries with tiny backoffs so fault-injection tests stay fast."""
    return RetryPolicy(max_retries=3, backoff_base=0.01, backoff_max=0.05, jitter=0.5)
