"""Retry policy arithmetic, Retry-After parsing, and choosing a client from the environment."""

from __future__ import annotations

import random
import time
from email.utils import formatdate

import pytest

from momoka.errors import ConfigError, ModelError
from momoka.llm import OpenAIClient, RetryPolicy, client_from_env
from momoka.llm.retry import parse_retry_after


def test_backoff_grows_exponentially_within_the_jitter_band():
    p = RetryPolicy(backoff_base=0.5, backoff_max=3.0, jitter=0.5)
    rng = random.Random(0)
    for k, full in enumerate([0.5, 1.0, 2.0, 3.0, 3.0]):  # min(3, 0.5 * 2**k)
        for _ in range(50):
            d = p.delay(k, rng=rng)
            assert full * 0.5 <= d <= full
    assert RetryPolicy(jitter=0.0, backoff_base=0.25).delay(2) == 1.0


def test_retry_after_overrides_backoff_and_is_capped():
    p = RetryPolicy(backoff_base=0.01, retry_after_max=5.0)
    rng = random.Random(1)
    assert 2.0 <= p.delay(0, 2.0, rng) <= 2.2
    assert 5.0 <= p.delay(0, 60.0, rng) <= 5.5


def test_parse_retry_after():
    assert parse_retry_after("3") == 3.0
    assert parse_retry_after(" 1.5 ") == 1.5
    assert parse_retry_after(None) is None
    assert parse_retry_after("soon") is None
    when = parse_retry_after(formatdate(time.time() + 30, usegmt=True))
    assert when is not None and 27 <= when <= 31
    assert parse_retry_after(formatdate(time.time() - 30, usegmt=True)) == 0.0


def test_bad_policies():
    # negative retries
    with pytest.raises(ConfigError):
        RetryPolicy(max_retries=-1)
    # jitter outside [0, 1]
    with pytest.raises(ConfigError):
        RetryPolicy(jitter=1.5)
    # a negative backoff
    with pytest.raises(ConfigError):
        RetryPolicy(backoff_base=-1)


def test_client_from_env(monkeypatch, tmp_path):
    monkeypatch.setenv("MOMOKA_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("MOMOKA_LLM_MODEL", "m")
    c = client_from_env(cache=False)
    assert isinstance(c, OpenAIClient) and c.base_url == "http://127.0.0.1:9/v1" and c.model == "m"
    monkeypatch.delenv("MOMOKA_LLM_BASE_URL")
    pytest.importorskip("onnxruntime")
    # no server configured: the local model is used; a missing model directory is a ModelError
    monkeypatch.setenv("MOMOKA_LLM_LOCAL_MODEL", str(tmp_path / "absent"))
    with pytest.raises(ModelError):
        client_from_env(cache=False)
