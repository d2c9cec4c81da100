"""Client for any server that speaks the OpenAI chat-completions protocol.

vLLM, llama.cpp's server, Ollama, text-generation-inference and hosted APIs all
do. Requests run on momoka's one event loop over a keep-alive aiohttp session,
with at most ``concurrency`` in flight.
"""

from __future__ import annotations

import asyncio
import atexit
import errno
import json
import weakref
from typing import TYPE_CHECKING, Any, Mapping

from .. import settings
from ..errors import (
    ConfigError,
    LLMCapabilityError,
    LLMConnectionError,
    LLMHTTPError,
    LLMResponseError,
    LLMTimeoutError,
)
from . import _loop
from .accounting import Accounting
from .base import BaseClient
from .._retry import RetryableError, RetryPolicy, json_answer
from .types import Completion

if TYPE_CHECKING:
    import aiohttp


def _aiohttp():
    """aiohttp, imported when the first request is sent (it costs ~0.1 s; commands that never call an
    endpoint do not pay it)."""
    import aiohttp  # start-up: aiohttp

    return aiohttp

ENV_BASE_URL = "MOMOKA_LLM_BASE_URL"
ENV_MODEL = "MOMOKA_LLM_MODEL"
ENV_API_KEY = "MOMOKA_LLM_API_KEY"



_UNSUPPORTED = {"stream": "streaming is not supported by the batch client", "n": "only n=1 is supported"}

_clients: "weakref.WeakSet[OpenAIClient]" = weakref.WeakSet()
#: Clients with an open HTTP session, held strongly until they are closed, so a client dropped on an
#: error path is still closed by ``_close_all`` (at exit, or by the CLI) instead of warning at collection.
_open: "set[OpenAIClient]" = set()


class OpenAIClient(BaseClient):
    """Chat completions against an OpenAI-compatible ``base_url``.

    ``base_url`` is the API root as the OpenAI SDK takes it (for example
    ``http://127.0.0.1:8000/v1``); requests go to ``{base_url}/chat/completions``
    (and ``{base_url}/completions`` for :meth:`logprob`). ``model``,
    ``base_url`` and ``api_key`` default to ``$MOMOKA_LLM_MODEL``,
    ``$MOMOKA_LLM_BASE_URL`` and ``$MOMOKA_LLM_API_KEY``.

    Other arguments: ``concurrency`` (requests in flight, default 16),
    ``timeout`` (seconds per request; default ``$MOMOKA_LLM_TIMEOUT`` or 120),
    ``retry`` (a :class:`RetryPolicy`), ``budget_s`` (default wall-clock budget
    of a batch), ``deadline_s`` (overall deadline of the client from its first
    request; default ``$MOMOKA_LLM_DEADLINE`` or none), ``cache`` (True for
    the default file, a path, a :class:`ResponseCache`, or False),
    ``accounting`` (share one :class:`Accounting` between clients), ``prices``
    (model → $ per 1M prompt/completion tokens), ``default_params`` (sent with
    every request, e.g. ``{"temperature": 0}``), ``headers`` (extra HTTP
    headers), ``progress`` (None: progress on stderr for batches that run longer than
    ``progress_delay``; False: none; see :class:`momoka.progress.Progress`).
    """

    def __init__(
        self,
        model: str | None = None,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        concurrency: int = 16,
        timeout: float | None = None,
        retry: RetryPolicy | None = None,
        budget_s: float | None = None,
        cache: Any = True,
        accounting: Accounting | None = None,
        prices: Mapping[str, object] | None = None,
        default_params: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        progress: bool | None = None,
        seed: int | None = None,
        deadline_s: float | None = None,
    ):
        base_url = base_url or settings.get_text(ENV_BASE_URL)
        model = model or settings.get_text(ENV_MODEL)
        api_key = api_key if api_key is not None else settings.get_text(ENV_API_KEY)
        if not base_url:
            raise ConfigError(f"no LLM server: give --llm-url (base_url= in Python) or set {ENV_BASE_URL} "
                              "(e.g. http://127.0.0.1:8000/v1)")
        if not (base_url.startswith("http://") or base_url.startswith("https://")):
            raise ConfigError(f"base_url must start with http:// or https://, got {base_url!r}")
        self.base_url = base_url.rstrip("/")
        self.endpoint = self.base_url
        self._chat_url = self.base_url + "/chat/completions"
        self._completions_url = self.base_url + "/completions"
        self._headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        if headers:
            self._headers.update({str(k): str(v) for k, v in headers.items()})
        self._session: aiohttp.ClientSession | None = None
        self._session_loop: asyncio.AbstractEventLoop | None = None
        self._logprob_capable: bool | None = None
        super().__init__(
            model=model,
            cache=cache,
            accounting=accounting,
            default_params=default_params,
            progress=progress,
            concurrency=concurrency,
            retry=retry,
            timeout=timeout,
            budget_s=budget_s,
            deadline_s=deadline_s,
            prices=prices,
            seed=seed,
        )
        _clients.add(self)

    def __repr__(self) -> str:
        return f"OpenAIClient(model={self._model!r}, base_url={self.base_url!r}, concurrency={self.concurrency})"

    @property
    def model(self) -> str:
        """The model name: as given (or ``$MOMOKA_LLM_MODEL``), else the one model the server lists.

        Without a name, the first use asks ``GET {base_url}/models`` once; a server that
        lists exactly one model is used with it, any other answer is a
        :class:`~momoka.errors.ConfigError` that lists what the server offers.
        """
        if self._model is None:
            self._model = discover_model(self.base_url, self._headers, min(self.timeout, 10.0))
        return self._model

    @model.setter
    def model(self, value: str | None) -> None:
        self._model = value or None

    # -- parameters ----------------------------------------------------------

    def _check_params(self, params: dict) -> dict:
        for k, why in _UNSUPPORTED.items():
            if k in params and not (k == "n" and params[k] == 1) and not (k == "stream" and params[k] is False):
                raise ConfigError(f"parameter {k!r}: {why}")
        for k in ("model", "messages"):
            if k in params:
                raise ConfigError(f"parameter {k!r} is set by the client, not per call")
        try:
            json.dumps(params)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"request parameters must be JSON-serialisable: {exc}") from exc
        return params

    # -- transport -------------------------------------------------------------

    async def _get_session(self) -> aiohttp.ClientSession:
        s = self._session
        loop = asyncio.get_running_loop()
        if s is not None and self._session_loop is not loop:
            s = None  # a forked child runs a new loop: the parent's session cannot be used
        if s is None or s.closed:
            self._session_loop = loop
            aiohttp = _aiohttp()
            connector = aiohttp.TCPConnector(limit=self.concurrency, keepalive_timeout=60, ttl_dns_cache=300)
            s = self._session = aiohttp.ClientSession(connector=connector, headers=self._headers)
            _open.add(self)
        return s

    async def _post(self, url: str, body: dict, timeout: float) -> dict:
        session = await self._get_session()
        aiohttp = _aiohttp()
        data = json.dumps(body, ensure_ascii=False).encode("utf-8")
        try:
            async with session.post(url, data=data, timeout=aiohttp.ClientTimeout(total=timeout)) as resp:
                raw = await resp.read()
                status = resp.status
                retry_after = resp.headers.get("Retry-After")
        except (asyncio.TimeoutError, TimeoutError) as exc:
            raise RetryableError(LLMTimeoutError(f"no answer from {url} within {timeout:.3g}s")) from exc
        except aiohttp.ClientConnectorError as exc:
            if refused(exc.os_error):  # nothing listens there: no retry will change that soon
                raise LLMConnectionError(refused_message(url)) from None
            raise RetryableError(LLMConnectionError(f"connection to {url} failed: {type(exc).__name__}: {exc}")) from exc
        except (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError) as exc:
            raise RetryableError(LLMConnectionError(f"connection to {url} failed: {type(exc).__name__}: {exc}")) from exc
        except aiohttp.ClientError as exc:
            raise RetryableError(LLMConnectionError(f"bad HTTP exchange with {url}: {type(exc).__name__}: {exc}")) from exc
        return json_answer(url, status, raw, retry_after, hint=f"check the API key, {ENV_API_KEY}")

    async def _send(self, kind: str, payload: dict, timeout: float) -> Completion:
        if kind == "chat":
            body = {"model": self.model, "messages": payload["messages"]}
            body.update(payload["params"])
            obj = await self._post(self._chat_url, body, timeout)
            return _parse_chat(obj)
        if kind == "logprob":
            return await self._send_logprob(payload, timeout)
        raise ConfigError(f"unknown request kind {kind!r}")  # pragma: no cover

    # -- log-probabilities -------------------------------------------------

    def _before_logprob(self) -> None:
        if self._logprob_capable is False:
            raise LLMCapabilityError(
                f"{self.base_url} does not return prompt log-probabilities (needs /completions with echo and logprobs)"
            )

    async def _send_logprob(self, payload: dict, timeout: float) -> Completion:
        prompt, cont = payload["prompt"], payload["continuation"]
        full = prompt + cont
        body = {"model": self.model, "prompt": full, "max_tokens": 1, "temperature": 0, "echo": True, "logprobs": 0}
        try:
            obj = await self._post(self._completions_url, body, timeout)
        except LLMHTTPError as exc:
            if exc.status in (400, 404, 405, 422, 501):
                self._logprob_capable = False
                raise LLMCapabilityError(
                    f"{self.base_url} cannot score text (HTTP {exc.status} on /completions with echo+logprobs)"
                ) from exc
            raise
        try:
            choice = obj["choices"][0]
            lp = choice["logprobs"]
            offsets = lp["text_offset"]
            token_lps = lp["token_logprobs"]
            tokens = lp.get("tokens") or [""] * len(offsets)
        except (KeyError, IndexError, TypeError) as exc:
            self._logprob_capable = False
            raise LLMCapabilityError(
                f"{self.base_url} answered /completions without echoed token log-probabilities"
            ) from exc
        if not (isinstance(offsets, list) and isinstance(token_lps, list) and len(offsets) == len(token_lps)):
            raise LLMCapabilityError(f"{self.base_url} sent inconsistent log-probabilities")
        cut, end = len(prompt), len(full)
        total = 0.0
        scored = 0
        for off, tok, tlp in zip(offsets, tokens, token_lps):
            if off >= end:
                break  # generated tokens
            if off + len(tok or "") <= cut and off < cut:
                continue  # wholly in the prompt
            if tlp is None:
                raise LLMResponseError("the server gave no log-probability for a continuation token")
            total += float(tlp)
            scored += 1
        if scored == 0:
            raise LLMCapabilityError(f"{self.base_url} echoed no tokens of the continuation (echo unsupported?)")
        self._logprob_capable = True
        if payload.get("mean"):
            total /= scored
        usage = obj.get("usage") or {}
        return Completion(logprob=total, prompt_tokens=_int(usage.get("prompt_tokens")), completion_tokens=0)

    # -- lifecycle -------------------------------------------------------------

    def close(self) -> None:
        """Close the HTTP session (idempotent)."""
        s = self._session
        self._session = None
        _open.discard(self)
        if s is not None and not s.closed:
            try:
                _loop.run_sync(s.close())
            except RuntimeError:  # pragma: no cover - loop already gone
                pass


def _int(v: Any) -> int:
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else 0


def _parse_chat(obj: dict) -> Completion:
    try:
        choice = obj["choices"][0]
        msg = choice["message"]
        text = msg["content"]
    except (KeyError, IndexError, TypeError) as exc:
        snippet = json.dumps(obj)[:160]
        raise RetryableError(LLMResponseError(f"the server's answer has no choices[0].message.content: {snippet}")) from exc
    if not isinstance(text, str):
        raise RetryableError(LLMResponseError(f"choices[0].message.content is {type(text).__name__}, expected a string"))
    usage = obj.get("usage") or {}
    if not isinstance(usage, dict):
        usage = {}
    return Completion(
        text=text,
        prompt_tokens=_int(usage.get("prompt_tokens")),
        completion_tokens=_int(usage.get("completion_tokens")),
        finish_reason=choice.get("finish_reason") if isinstance(choice, dict) else None,
    )


@atexit.register
def _close_all() -> None:
    for c in set(_clients) | _open:
        try:
            c.close()
        except Exception:  # pragma: no cover - best effort at exit
            pass


def refused(exc: BaseException | None) -> bool:
    """Whether ``exc`` is a refused connection (nothing listens at the address)."""
    return isinstance(exc, ConnectionRefusedError) or getattr(exc, "errno", None) == errno.ECONNREFUSED


def refused_message(url: str) -> str:
    """The one-line error for a refused connection."""
    return f"connection to {url} refused: no LLM server is listening there (check --llm-url / {ENV_BASE_URL})"


def discover_model(base_url: str, headers: Mapping[str, str], timeout: float) -> str:
    """The one model ``GET {base_url}/models`` lists, else a :class:`ConfigError` saying what to give."""
    import urllib.error  # start-up: urllib.error
    import urllib.request  # start-up: urllib.request

    url = base_url.rstrip("/") + "/models"
    need = f"give --llm-model (model= in Python) or set {ENV_MODEL}"
    try:
        req = urllib.request.Request(url, headers={k: v for k, v in headers.items() if k != "Content-Type"})
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            obj = json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        raise ConfigError(f"no LLM model name, and {url} answered HTTP {exc.code}: {need}") from None
    except urllib.error.URLError as exc:
        if refused(exc.reason):
            raise LLMConnectionError(refused_message(url)) from None
        raise LLMConnectionError(f"no LLM model name, and {url} could not be asked: {exc.reason}; {need}") from None
    except (OSError, ValueError) as exc:
        raise ConfigError(f"no LLM model name, and {url} gave no model list ({exc}): {need}") from None
    data = obj.get("data") if isinstance(obj, dict) else None
    ids = [m.get("id") for m in data if isinstance(m, dict) and isinstance(m.get("id"), str)] \
        if isinstance(data, list) else []
    if len(ids) != 1:
        listed = f"it lists {len(ids)}" + (f": {', '.join(ids[:10])}" if ids else "")
        raise ConfigError(f"no LLM model name, and {url} does not list exactly one model ({listed}); {need}")
    return ids[0]
