"""Fixtures of the ETS tests: the real default causal LM (skip when not installed), fast retries; the default
embedder is tests/methods/conftest.py's ``embedder``."""

from __future__ import annotations

import pytest

from momoka.llm import RetryPolicy


@pytest.fixture(scope="session")
def lm():
    """The default causal LM (smollm2-135m-instruct)."""
    from momoka.errors import ModelNotInstalledError

    try:
        from momoka.models import default_causal_lm

        return default_causal_lm()
    except (ImportError, ModelNotInstalledError) as exc:
        pytest.skip(f"causal LM unavailable: {exc}")


@pytest.fixture(scope="session")
def reader(lm):
    """An ETS reader on the local LM."""
    from momoka.methods.ets import Reader

    return Reader(lm)


@pytest.fixture
def fast_retry():
    """Retries with tiny backoffs so fault-injection tests stay fast."""
    return RetryPolicy(max_retries=1, backoff_base=0.01, backoff_max=0.02, jitter=0.5)
