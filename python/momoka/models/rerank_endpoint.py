"""A reranker served over HTTP: the ``/rerank`` endpoint of Cohere, Jina, vLLM and compatible servers.

``EndpointReranker(base_url, model)`` posts ``{"model", "query", "documents",
"top_n", "return_documents": false}`` to ``{base_url}/rerank`` (``base_url`` is
the API root, e.g. ``http://127.0.0.1:8000/v1`` for vLLM's ``/v1/rerank``) and
reads ``{"results": [{"index": i, "relevance_score": s}, ...]}`` (``score`` is
accepted for ``relevance_score``). Scores come back in input order, whatever
order the server lists them in; every passage must get exactly one score, or
the answer is refused.

Failures are those of the LLM layer (:mod:`momoka.errors`), with its retry
rules (:class:`momoka.llm.retry.RetryPolicy`): a timeout, a dropped connection,
HTTP 429/408/5xx (but 501) and malformed JSON are retried, then raised as
``LLMTimeoutError``, ``LLMConnectionError``, ``LLMHTTPError`` (with ``status``)
or ``LLMResponseError``; other HTTP errors and answers of the wrong shape are
raised at once. Nothing is scored partially: a failed call raises.

This is the cross-encoder path when no ONNX cross-encoder file is at hand: no
PyPI package ships a trained one, while rerank servers (for example vLLM
serving ``BAAI/bge-reranker-base``, or the hosted Cohere and Jina APIs) do.
"""

from __future__ import annotations

import json
import math
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import settings
from .._retry import RetryableError, RetryPolicy, json_answer
from .._validate import check_int
from ..errors import ConfigError, LLMConnectionError, LLMResponseError, LLMTimeoutError
from ._inputs import check_query_passages

ENV_BASE_URL = "MOMOKA_RERANK_BASE_URL"
ENV_MODEL = "MOMOKA_RERANK_MODEL"
ENV_API_KEY = "MOMOKA_RERANK_API_KEY"


class EndpointReranker:
    """Scores from a ``/rerank`` HTTP endpoint (see the module docstring).

    Args:
        base_url: the API root (default ``$MOMOKA_RERANK_BASE_URL``); requests go to ``{base_url}/rerank``.
        model: the model name sent (default ``$MOMOKA_RERANK_MODEL``; servers serving one model may ignore it).
        api_key: sent as ``Authorization: Bearer`` (default ``$MOMOKA_RERANK_API_KEY``; none if unset).
        timeout: seconds per request.
        batch_size: most passages per request (larger lists are split; scores are comparable
            across requests for a cross-encoder, which scores each pair alone).
        retry: a :class:`momoka.llm.retry.RetryPolicy` (default: its defaults).
    """

    name = "endpoint"

    def __init__(self, base_url: str | None = None, model: str | None = None, *, api_key: str | None = None,
                 timeout: float = 60.0, batch_size: int = 64, retry: Any = None):
        base_url = base_url or settings.get_text(ENV_BASE_URL)
        if not base_url:
            raise ConfigError(f"the endpoint reranker needs base_url= (or ${ENV_BASE_URL}), e.g. http://127.0.0.1:8000/v1")
        if not base_url.startswith(("http://", "https://")):
            raise ConfigError(f"base_url must start with http:// or https://, not {base_url!r}")
        if not (isinstance(timeout, (int, float)) and math.isfinite(timeout) and timeout > 0):
            raise ConfigError(f"timeout must be seconds > 0, got {timeout!r}")
        batch_size = check_int(batch_size, "batch_size", minimum=1)
        self.url = base_url.rstrip("/") + "/rerank"
        self.model = model or settings.get_text(ENV_MODEL) or ""
        self._key = api_key or settings.get_text(ENV_API_KEY)
        self.timeout, self.batch_size = float(timeout), batch_size
        self.retry = retry if retry is not None else RetryPolicy()
        self.requests = 0  # HTTP requests sent, retries included

    def score(self, query: str, passages: Sequence[str]) -> np.ndarray:
        """One relevance score per passage (float32, input order), from the endpoint."""
        passages = check_query_passages(query, passages)
        out = np.zeros(len(passages), dtype=np.float32)
        for s in range(0, len(passages), self.batch_size):
            part = passages[s:s + self.batch_size]
            out[s:s + len(part)] = self._scores(self._post({
                "model": self.model, "query": query, "documents": part, "top_n": len(part),
                "return_documents": False}), len(part))
        return out

    def _post(self, body: dict) -> dict:
        """POST with retries; the parsed JSON object."""
        for attempt in range(self.retry.max_retries + 1):
            try:
                return self._post_once(body)
            except RetryableError as exc:
                if attempt == self.retry.max_retries:
                    raise exc.cause from None
                time.sleep(self.retry.delay(attempt, exc.retry_after))
        raise AssertionError("unreachable")  # pragma: no cover

    def _post_once(self, body: dict) -> dict:
        headers = {"Content-Type": "application/json"}
        if self._key:
            headers["Authorization"] = f"Bearer {self._key}"
        req = urllib.request.Request(self.url, json.dumps(body, ensure_ascii=False).encode("utf-8"), headers)
        self.requests += 1
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as exc:
            return json_answer(self.url, exc.code, exc.read(), exc.headers.get("Retry-After"),
                               hint=f"check the API key, {ENV_API_KEY}")
        except TimeoutError:
            raise RetryableError(LLMTimeoutError(f"no answer from {self.url} within {self.timeout:.3g}s")) from None
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, TimeoutError):
                raise RetryableError(LLMTimeoutError(f"no answer from {self.url} within {self.timeout:.3g}s")) from None
            raise RetryableError(LLMConnectionError(f"connection to {self.url} failed: {exc.reason}")) from None
        except (ConnectionError, OSError) as exc:  # dropped mid-answer (http.client raises these bare)
            raise RetryableError(LLMConnectionError(f"connection to {self.url} failed: {type(exc).__name__}: {exc}")) from None
        return json_answer(self.url, 200, raw)

    def _scores(self, obj: dict, n: int) -> np.ndarray:
        """Scores in input order from a ``results`` list; every index 0..n-1 exactly once."""
        results = obj.get("results")
        if not isinstance(results, list):
            raise LLMResponseError(f"the rerank answer has no 'results' list (keys: {sorted(obj)})")
        out = np.full(n, np.nan, dtype=np.float64)
        for r in results:
            if not isinstance(r, dict):
                raise LLMResponseError(f"a rerank result is a {type(r).__name__}, expected an object")
            i = r.get("index")
            s = r.get("relevance_score", r.get("score"))
            if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < n:
                raise LLMResponseError(f"a rerank result has index {i!r}; expected an int in [0, {n})")
            if isinstance(s, bool) or not isinstance(s, (int, float)) or not math.isfinite(s):
                raise LLMResponseError(f"the rerank result of passage {i} has score {s!r}; expected a finite number")
            if not math.isnan(out[i]):
                raise LLMResponseError(f"the rerank answer scores passage {i} twice")
            out[i] = float(s)
        missing = np.flatnonzero(np.isnan(out))
        if missing.size:
            raise LLMResponseError(f"the rerank answer leaves {missing.size} of {n} passages unscored "
                                   f"(first: {int(missing[0])})")
        return out.astype(np.float32)
