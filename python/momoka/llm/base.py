"""The batch machinery every client shares.

A batch goes: normalise and validate → hash each item → send identical items
once → answer what the on-disk cache knows → send the rest with at most
``concurrency`` requests in flight, retrying transient failures → write each
answer to the cache as it arrives (in small transactions, so an interrupted
batch loses nothing that finished) → account for everything.

Subclasses implement :meth:`BaseClient._send` (one request, raising
:class:`~momoka.llm.retry.RetryableError` for transient failures) and
:meth:`BaseClient._check_params`.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from ..errors import (
    ConfigError,
    InputError,
    LLMBatchError,
    LLMCapabilityError,
    LLMError,
    LLMResponseError,
    LLMTimeoutError,
)
from .. import settings
from .._validate import check_int
from ..progress import Progress
from . import _loop
from .accounting import Accounting
from .cache import ResponseCache, default_cache_path, make_key
from .._retry import RetryableError, RetryPolicy
from .types import Completion, MessagesLike, Parsed, normalize_messages

#: Environment variables: seconds per request, and the overall deadline of a client (an LLM stage).
ENV_TIMEOUT = "MOMOKA_LLM_TIMEOUT"
ENV_DEADLINE = "MOMOKA_LLM_DEADLINE"
#: Environment variable: the share of failed calls above which an LLM stage stops (default 0.25).
ENV_MAX_FAILED = "MOMOKA_LLM_MAX_FAILED"


def max_failed_share() -> float:
    """The share of failed calls above which an LLM stage stops with an error (``$MOMOKA_LLM_MAX_FAILED``)."""
    return settings.get_float(ENV_MAX_FAILED)


_LIMITER: Any = None


def set_request_limiter(limiter: Any) -> None:
    """Make every request of every client in this process also hold a slot of ``limiter``
    (an object with ``async acquire()`` and ``async release()``; None removes it).

    Distributed indexing gives each worker process the same limiter, so LLM-bound stages keep one
    concurrency limit across all workers (see :mod:`momoka.methods.distributed`)."""
    global _LIMITER
    _LIMITER = limiter


class _global_slot:
    """``async with``: a slot of the process-wide request limiter (a no-op without one)."""

    async def __aenter__(self) -> None:
        self.lim = _LIMITER
        if self.lim is not None:
            await self.lim.acquire()

    async def __aexit__(self, *exc: Any) -> None:
        if self.lim is not None:
            await self.lim.release()


#: Keyword arguments of the batch calls that steer momoka and are never sent to the model.
CONTROL_KEYS = ("method", "use_cache", "progress", "budget_s")


def _open_cache(cache: Any) -> ResponseCache | None:
    if cache is None or cache is False:
        return None
    if cache is True:
        return ResponseCache(default_cache_path())
    if isinstance(cache, ResponseCache):
        return cache
    if isinstance(cache, (str, os.PathLike)):
        return ResponseCache(Path(cache))
    raise ConfigError(f"cache must be True, False, a path or a ResponseCache, got {type(cache).__name__}")


class _CacheWriter:
    """New answers of one batch, written to the cache in groups (64 rows or every 0.25 s, off the event loop)
    and the rest at the end."""

    def __init__(self, cache: Any, loop: asyncio.AbstractEventLoop):
        self.cache, self.loop = cache, loop
        self.pending: list[tuple[str, str, str, dict]] = []
        self.last = time.monotonic()

    async def add(self, row: tuple[str, str, str, dict]) -> None:
        if self.cache is None:
            return
        self.pending.append(row)
        now = time.monotonic()
        if len(self.pending) < 64 and now - self.last < 0.25:
            return
        rows, self.pending, self.last = self.pending, [], now
        await self.loop.run_in_executor(None, self.cache.put_many, rows)

    def close(self) -> None:
        if self.cache is not None and self.pending:
            rows, self.pending = self.pending, []
            self.cache.put_many(rows)


class BaseClient:
    """Shared implementation of the :class:`~momoka.llm.types.LLMClient` protocol."""

    model: str = ""
    #: The server's URL (part of every cache key; empty for the local model).
    endpoint: str = ""

    def _cache_scope(self, kind: str) -> str | None:
        """What besides the model and the request a cached answer of ``kind`` depends on (part of its
        key, :func:`~momoka.llm.cache.make_key`): the server's URL, None for the local model."""
        return self.endpoint or None

    def __init__(
        self,
        *,
        model: str,
        cache: Any = True,
        accounting: Accounting | None = None,
        default_params: Mapping[str, Any] | None = None,
        progress: bool | None = None,
        concurrency: int = 16,
        retry: RetryPolicy | None = None,
        timeout: float | None = None,
        budget_s: float | None = None,
        prices: Mapping[str, object] | None = None,
        seed: int | None = None,
        deadline_s: float | None = None,
    ):
        timeout = settings.get_float(ENV_TIMEOUT) if timeout is None else timeout
        deadline_s = settings.get_float(ENV_DEADLINE) if deadline_s is None else deadline_s
        if deadline_s is not None and not (isinstance(deadline_s, (int, float)) and deadline_s > 0):
            raise ConfigError(f"deadline_s must be > 0 seconds or None, got {deadline_s!r}")
        #: Overall deadline of this client, counted from its first request (None: none).
        self.deadline_s = deadline_s
        self._deadline_at: float | None = None
        concurrency = check_int(concurrency, "concurrency", minimum=1)
        if not (isinstance(timeout, (int, float)) and timeout > 0):
            raise ConfigError(f"timeout must be > 0 seconds, got {timeout!r}")
        if budget_s is not None and not (isinstance(budget_s, (int, float)) and budget_s > 0):
            raise ConfigError(f"budget_s must be > 0 seconds or None, got {budget_s!r}")
        self.model = model
        self.concurrency = concurrency
        self.timeout = float(timeout)
        self.budget_s = budget_s
        self.retry = retry or RetryPolicy()
        self.progress = progress
        self.cache = _open_cache(cache)
        self.accounting = accounting if accounting is not None else Accounting()
        if prices:
            self.accounting.set_prices(prices)
        self.default_params = self._check_params(dict(default_params or {}))
        self._sem: asyncio.Semaphore | None = None
        self._sem_loop: asyncio.AbstractEventLoop | None = None
        #: Seconds a batch must run before its progress bar appears.
        self.progress_delay = 2.0
        self._rng = random.Random(seed)

    # -- to implement --------------------------------------------------------

    async def _send(self, kind: str, payload: dict, timeout: float) -> Completion:  # pragma: no cover
        raise NotImplementedError

    def _check_params(self, params: dict) -> dict:  # pragma: no cover
        return params

    # -- public synchronous API ---------------------------------------------

    def complete(self, messages: MessagesLike, **params: Any) -> str:
        """Answer one conversation (or one user string); raises on failure."""
        return self.complete_many([messages], **params)[0]

    def complete_many(self, batch: Sequence[MessagesLike], **params: Any) -> list[str]:
        """Answer every item of ``batch``; the answers come back in order.

        ``params`` are sent to the model (``temperature``, ``max_tokens``,
        ``top_p``, ``stop``, ``seed``, ...) except the control keywords
        ``method`` (accounting label), ``use_cache``, ``progress`` and
        ``budget_s`` (wall-clock budget of the batch). If any item fails for
        good, :class:`~momoka.errors.LLMBatchError` is raised after the whole
        batch ran (its ``results`` holds every item; the answers that arrived
        are cached, so rerunning resends only the failed items).
        """
        results = self.complete_batch(batch, **params)
        failed = [i for i, r in enumerate(results) if not r.ok]
        if failed:
            first = results[failed[0]].error
            raise LLMBatchError(
                f"{len(failed)} of {len(results)} LLM requests failed (first, item {failed[0]}: {first})", results
            )
        return [r.text for r in results]  # type: ignore[misc]

    def complete_batch(self, batch: Sequence[MessagesLike], **params: Any) -> list[Completion]:
        """Like :meth:`complete_many` but never raises for a failed item: each result carries
        its text or its error, its token usage, whether it was cached, and its attempts."""
        kind, payloads, ctl = self._prepare_chat(batch, params)
        return _loop.run_sync(self._run(kind, payloads, **ctl))

    async def acomplete_batch(self, batch: Sequence[MessagesLike], **params: Any) -> list[Completion]:
        """Async :meth:`complete_batch` (awaitable from any event loop)."""
        kind, payloads, ctl = self._prepare_chat(batch, params)
        return await _loop.run_async(self._run(kind, payloads, **ctl))

    async def acomplete_many(self, batch: Sequence[MessagesLike], **params: Any) -> list[str]:
        """Async :meth:`complete_many`."""
        results = await self.acomplete_batch(batch, **params)
        failed = [i for i, r in enumerate(results) if not r.ok]
        if failed:
            raise LLMBatchError(f"{len(failed)} of {len(results)} LLM requests failed: {results[failed[0]].error}", results)
        return [r.text for r in results]  # type: ignore[misc]

    def complete_parsed(
        self,
        batch: Sequence[MessagesLike],
        parser: Callable[[str], Any],
        *,
        max_reasks: int = 2,
        reminder: str | None = None,
        **params: Any,
    ) -> list[Parsed]:
        """Answer every item and parse the answer with ``parser``.

        ``parser(text)`` returns a value or raises
        :class:`~momoka.errors.LLMResponseError`. A malformed answer is re-asked
        up to ``max_reasks`` times: the conversation is extended with the
        model's answer and a reminder (``reminder``, else ``parser.reminder``,
        plus the reason). An item still malformed after that is returned with
        ``ok=False`` and counted as a ``parse_failure``; nothing is replaced by a
        default value.
        """
        if not callable(parser):
            raise ConfigError("parser must be callable (text -> value)")
        max_reasks = check_int(max_reasks, "max_reasks", minimum=0)
        method = params.get("method", "default")
        base_reminder = reminder if reminder is not None else getattr(parser, "reminder", "Please answer in the required format.")
        convos = [normalize_messages(m) for m in batch]
        out: list[Parsed | None] = [None] * len(convos)
        sent: list[list] = [[] for _ in convos]  # the conversations sent per item (one per round)
        malformed: set[int] = set()
        active = list(range(len(convos)))
        for rnd in range(max_reasks + 1):
            if not active:
                break
            for i in active:
                sent[i].append(convos[i])
            results = self.complete_batch([convos[i] for i in active], **params)
            nxt = []
            for i, res in zip(active, results):
                p = out[i] or Parsed()
                p.rounds = rnd + 1
                p.messages = convos[i]
                p.history.append(res.text)
                out[i] = p
                if not res.ok:
                    p.error = res.error
                    malformed.discard(i)
                    continue
                p.raw = res.text
                try:
                    p.value = parser(res.text or "")
                    p.ok = True
                    p.error = None
                    malformed.discard(i)
                except LLMResponseError as exc:
                    p.error = exc
                    malformed.add(i)
                    if rnd < max_reasks:
                        convos[i] = convos[i] + [
                            {"role": "assistant", "content": res.text or ""},
                            {"role": "user", "content": f"{base_reminder} ({exc})"},
                        ]
                        nxt.append(i)
            if nxt:
                self.accounting.record(method, self.model, reasks=len(nxt))
            active = nxt
        final = [p if p is not None else Parsed() for p in out]
        bad = len(malformed)
        if bad:
            self.accounting.record(method, self.model, parse_failures=bad)
            # Malformed answers leave the cache, so a rerun asks again instead of reading them back.
            self.forget([c for i in sorted(malformed) for c in sent[i]], **params)
        return final

    def forget(self, conversations: Sequence[MessagesLike], **params: Any) -> None:
        """Remove the cached answers of these conversations (sent with ``params``), so that asking
        again sends them to the model: for answers that parsed but could not be used."""
        if self.cache is None or not conversations:
            return
        kind, payloads, _ = self._prepare_chat(list(conversations), dict(params))
        self.cache.delete(make_key(kind, self.model, p, self._cache_scope(kind)) for p in payloads)

    def logprob(self, prompt: str, continuation: str) -> float:
        """Natural-log probability of ``continuation`` following ``prompt`` (raw text, no chat template)."""
        return self.logprob_many([(prompt, continuation)])[0]

    def logprob_many(self, pairs: Sequence[tuple[str, str]], *, mean: bool = False, **params: Any) -> list[float]:
        """:meth:`logprob` for many ``(prompt, continuation)`` pairs (cached, concurrent).

        With ``mean=True`` each value is the mean log-probability per continuation
        token instead of the sum (ETS's exp(mean log p) needs the token count).
        Raises :class:`~momoka.errors.LLMCapabilityError` when the backend cannot score text.
        """
        ctl = {k: params.pop(k) for k in CONTROL_KEYS if k in params}
        ctl.setdefault("method", "logprob")
        if params:
            raise ConfigError(f"logprob_many takes no model parameters, got {sorted(params)}")
        payloads = []
        for i, pair in enumerate(pairs):
            if not (isinstance(pair, (tuple, list)) and len(pair) == 2 and all(isinstance(s, str) for s in pair)):
                raise InputError(f"item {i} must be a (prompt, continuation) pair of str")
            prompt, cont = pair
            if not prompt:
                raise InputError(f"item {i}: the prompt is empty (its first token would have no probability)")
            if not cont:
                raise InputError(f"item {i}: the continuation is empty")
            payloads.append({"prompt": prompt, "continuation": cont, "mean": True} if mean
                            else {"prompt": prompt, "continuation": cont})
        self._before_logprob()
        results = _loop.run_sync(self._run("logprob", payloads, **ctl))
        failed = [r for r in results if not r.ok]
        if failed:
            err = failed[0].error
            if isinstance(err, LLMCapabilityError):
                raise err
            raise LLMBatchError(f"{len(failed)} of {len(results)} log-prob requests failed: {err}", results)
        return [float(r.logprob) for r in results]  # type: ignore[arg-type]

    def _before_logprob(self) -> None:
        """Hook: raise LLMCapabilityError early when scoring is known to be unsupported."""

    # -- helpers -------------------------------------------------------------

    def _prepare_chat(self, batch: Sequence[MessagesLike], params: dict) -> tuple[str, list[dict], dict]:
        if isinstance(batch, (str, bytes)) or not isinstance(batch, Sequence):
            raise InputError("batch must be a list of conversations (use complete() for a single one)")
        ctl = {k: params.pop(k) for k in CONTROL_KEYS if k in params}
        merged = dict(self.default_params)
        merged.update(self._check_params(params))
        payloads = [{"messages": normalize_messages(m), "params": merged} for m in batch]
        return "chat", payloads, ctl

    def _get_sem(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        if self._sem is None or self._sem_loop is not loop:
            self._sem = asyncio.Semaphore(self.concurrency)
            self._sem_loop = loop
        return self._sem

    def _deadline(self, budget_s: float | None) -> tuple[float | None, str | None]:
        """The monotonic deadline of a batch (the tighter of its time budget and the client's
        ``deadline_s``, counted from the first batch) and the words that name it in errors."""
        budget = budget_s if budget_s is not None else self.budget_s
        deadline = None if budget is None else time.monotonic() + float(budget)
        if self.deadline_s is not None:
            if self._deadline_at is None:
                self._deadline_at = time.monotonic() + float(self.deadline_s)
            if deadline is None or self._deadline_at < deadline:
                deadline, budget = self._deadline_at, f"{self.deadline_s:g}s deadline (--llm-deadline)"
        return deadline, (f"{budget}s" if isinstance(budget, (int, float)) else budget)

    async def _send_retrying(self, kind: str, payload: dict, method: str, deadline: float | None,
                             budget_text: str | None, sem: asyncio.Semaphore) -> Completion:
        """One request with the retry policy, within the deadline: the answer, or a Completion holding the
        error that ended it."""
        acc = self.accounting
        attempts = 0
        start = time.perf_counter()
        while True:
            if deadline is not None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return Completion(error=LLMTimeoutError(f"the time budget of {budget_text} ran out"), attempts=attempts)
                timeout = min(self.timeout, remaining)
            else:
                timeout = self.timeout
            attempts += 1
            try:
                async with sem, _global_slot():
                    res = await self._send(kind, payload, timeout)
                res.attempts = attempts
                res.latency_s = time.perf_counter() - start
                acc.record(method, self.model, requests=1, prompt_tokens=res.prompt_tokens, completion_tokens=res.completion_tokens)
                return res
            except RetryableError as exc:
                acc.record(method, requests=1)
                if attempts > self.retry.max_retries:
                    return Completion(error=exc.cause, attempts=attempts)
                wait = self.retry.delay(attempts - 1, exc.retry_after, self._rng)
                if deadline is not None and time.monotonic() + wait > deadline:
                    return Completion(
                        error=LLMTimeoutError(f"the time budget of {budget_text} ran out while retrying after: {exc.cause}"),
                        attempts=attempts,
                    )
                acc.record(method, retries=1)
                await asyncio.sleep(wait)
            except LLMError as exc:
                acc.record(method, requests=1)
                return Completion(error=exc, attempts=attempts)

    async def _run(
        self,
        kind: str,
        payloads: list[dict],
        *,
        method: str = "default",
        use_cache: bool = True,
        progress: bool | None = None,
        budget_s: float | None = None,
    ) -> list[Completion]:
        """Answers to ``payloads`` in order: cached ones from the cache, identical payloads asked once, the rest
        sent by :attr:`concurrency` workers (:meth:`_send_retrying`), new answers written to the cache in small
        batches, with a progress line for long runs."""
        if not isinstance(method, str) or not method:
            raise ConfigError("method must be a non-empty str label")
        t0 = time.perf_counter()
        deadline, budget_text = self._deadline(budget_s)
        n = len(payloads)
        keys = [make_key(kind, self.model, p, self._cache_scope(kind)) for p in payloads]
        first: dict[str, int] = {}
        for i, k in enumerate(keys):
            first.setdefault(k, i)
        results: list[Completion | None] = [None] * n
        cache = self.cache if use_cache else None
        hits = cache.get_many(first.keys()) if cache is not None else {}
        todo = []
        for k, i in first.items():
            h = hits.get(k)
            if h is not None:
                results[i] = Completion.from_cache(h)
            else:
                todo.append(i)
        acc = self.accounting
        acc.record(method, calls=n, cache_hits=len(hits), deduplicated=n - len(first))
        bar = Progress(f"llm {method}", total=len(todo), unit="req",
                       enabled=progress if progress is not None else self.progress,
                       delay=self.progress_delay) if todo else None
        writer = _CacheWriter(cache, asyncio.get_running_loop())
        sem = self._get_sem()
        it = iter(todo)
        state = {"failed": 0, "tokens": 0}

        async def worker() -> None:
            for i in it:
                res = await self._send_retrying(kind, payloads[i], method, deadline, budget_text, sem)
                results[i] = res
                if res.ok:
                    await writer.add((keys[i], kind, self.model, res.to_cache()))
                else:
                    acc.record(method, failures=1)
                    state["failed"] += 1
                state["tokens"] += (res.prompt_tokens or 0) + (res.completion_tokens or 0)
                if bar is not None:
                    bar.update(1, failed=state["failed"], tokens=state["tokens"])

        async def heartbeat() -> None:  # a line every few seconds even while no answer arrives
            while True:
                await asyncio.sleep(1.0)
                bar.update(0)

        beat = asyncio.ensure_future(heartbeat()) if bar is not None else None
        try:
            if todo:
                await asyncio.gather(*(worker() for _ in range(min(self.concurrency, len(todo)))))
        finally:
            if beat is not None:
                beat.cancel()
            writer.close()
            if bar is not None:
                bar.close()
            acc.record(method, wall_s=time.perf_counter() - t0)

        for i, k in enumerate(keys):
            if results[i] is None:
                src = results[first[k]]
                assert src is not None
                results[i] = replace(src, deduplicated=True, attempts=0, latency_s=0.0)
        return results  # type: ignore[return-value]

    # -- lifecycle -----------------------------------------------------------

    def close(self) -> None:
        """Release connections (the cache file stays)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def stats(self) -> str:
        """The accounting table of this client's run (see :meth:`Accounting.report`)."""
        return self.accounting.report()
