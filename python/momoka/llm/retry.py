"""Retry policy: which failures are retried, and how long to wait before the next try (:mod:`momoka._retry`, shared
with the endpoint reranker of :mod:`momoka.models`, which sits below the LLM clients)."""

from __future__ import annotations

from .._retry import RetryableError, RetryPolicy, json_answer, parse_retry_after, retryable_status

__all__ = ["RetryPolicy", "RetryableError", "json_answer", "parse_retry_after", "retryable_status"]
