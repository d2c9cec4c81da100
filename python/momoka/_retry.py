"""Retry policy of the HTTP clients (the LLM clients and the endpoint reranker): which failures are retried, and
how long to wait before the next try. Public as :mod:`momoka.llm.retry`."""

from __future__ import annotations

import json
import random
import time
from dataclasses import dataclass
from email.utils import parsedate_to_datetime

from .errors import ConfigError, LLMError, LLMHTTPError, LLMResponseError


class RetryableError(LLMError):
    """A transient failure (timeout, connection error, 429, 5xx, garbled answer) worth another try.

    ``cause`` is the error reported if the retries run out; ``retry_after`` the
    server's Retry-After in seconds, when it sent one.
    """

    def __init__(self, cause: LLMError, retry_after: float | None = None):
        super().__init__(str(cause))
        self.cause = cause
        self.retry_after = retry_after


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with jitter.

    The wait before retry ``k`` (0-based) is ``d = min(backoff_max, backoff_base * 2**k)``
    scaled by a random factor in ``[1 - jitter, 1]``. A Retry-After header
    overrides it (capped at ``retry_after_max``, plus up to 10 % jitter so that
    many clients do not come back in the same instant). ``max_retries`` is the
    number of re-sends after the first try.
    """

    max_retries: int = 5
    backoff_base: float = 0.5
    backoff_max: float = 30.0
    jitter: float = 0.5
    retry_after_max: float = 120.0

    def __post_init__(self):
        if self.max_retries < 0:
            raise ConfigError("max_retries must be >= 0")
        if self.backoff_base < 0 or self.backoff_max < 0 or self.retry_after_max < 0:
            raise ConfigError("backoff times must be >= 0")
        if not 0.0 <= self.jitter <= 1.0:
            raise ConfigError("jitter must lie in [0, 1]")

    def delay(self, retry_index: int, retry_after: float | None = None, rng: random.Random | None = None) -> float:
        """Seconds to wait before retry number ``retry_index`` (0-based)."""
        r = rng or random
        if retry_after is not None and retry_after >= 0:
            ra = min(retry_after, self.retry_after_max)
            return ra + r.uniform(0.0, 0.1 * ra)
        d = min(self.backoff_max, self.backoff_base * (2.0 ** retry_index))
        return d * (1.0 - self.jitter * r.random())


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header (delta-seconds or an HTTP date); None if absent or unreadable."""
    if value is None:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - time.time())


def retryable_status(status: int) -> bool:
    """Status codes that are retried: 429 (rate limit), 408 (request timeout) and 5xx server errors,
    except 501 Not Implemented, which no retry can change."""
    return status == 429 or status == 408 or (status >= 500 and status != 501)


def json_answer(url: str, status: int, raw: bytes, retry_after: str | None = None, *, hint: str = "") -> dict:
    """The JSON object of an HTTP answer, or the error it stands for.

    A status >= 400 raises :class:`LLMHTTPError` (``hint`` is added for 401/403),
    wrapped in :class:`RetryableError` when :func:`retryable_status` says so
    (with the Retry-After seconds); malformed JSON raises a retryable
    :class:`LLMResponseError`, and so does JSON that is not an object.
    """
    if status >= 400:
        snippet = raw[:300].decode("utf-8", "replace").strip()
        err = LLMHTTPError(f"HTTP {status} from {url}: {snippet}", status)
        if retryable_status(status):
            raise RetryableError(err, parse_retry_after(retry_after))
        if status in (401, 403) and hint:
            err = LLMHTTPError(f"HTTP {status} from {url} ({hint}): {snippet}", status)
        raise err
    try:
        obj = json.loads(raw)
    except ValueError as exc:
        snippet = raw[:120].decode("utf-8", "replace")
        raise RetryableError(LLMResponseError(f"the server sent malformed JSON ({exc}): {snippet!r}")) from exc
    if not isinstance(obj, dict):
        raise RetryableError(LLMResponseError(f"the server sent a JSON {type(obj).__name__}, expected an object"))
    return obj
