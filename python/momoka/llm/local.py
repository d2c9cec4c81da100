"""The client protocol over momoka's embedded causal LM (runs offline, slowly but for real)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
from typing import Any, Mapping

from .._validate import check_int
from ..errors import ConfigError, LLMCapabilityError, LLMError, ModelError
from .accounting import Accounting
from .base import BaseClient
from .types import Completion, normalize_messages

#: Environment variable naming the local causal LM: a causal LM id of the registry or a model folder (else the
#: registry's default; :func:`momoka.models.installer.local_causal_lm_dir`).
ENV_LOCAL_MODEL = "MOMOKA_LLM_LOCAL_MODEL"

_PARAMS = {"max_tokens", "max_new_tokens", "temperature", "top_p", "seed", "stop"}


def _load_default_lm(model_dir: str | os.PathLike | None):
    """Load ``model_dir``, or the local causal LM ``$MOMOKA_LLM_LOCAL_MODEL`` picks (a registry id or a folder;
    default: the registry's default causal LM), never installing anything."""
    try:
        from ..models.causal_lm import CausalLM  # start-up: momoka.models.causal_lm
    except ImportError as exc:
        raise ModelError("the local causal LM (momoka.models.causal_lm) is not available in this build") from exc
    if model_dir is not None:
        return CausalLM(model_dir)
    from ..models.installer import local_causal_lm_dir  # start-up: momoka.models.installer

    return CausalLM(local_causal_lm_dir(auto_install=False))


class LocalClient(BaseClient):
    """The :class:`~momoka.llm.types.LLMClient` protocol on a local ``CausalLM``.

    ``LocalClient()`` loads the model ``$MOMOKA_LLM_LOCAL_MODEL`` picks if set (a causal LM id of ``momoka models
    list`` such as ``llm-qwen2.5-1.5b``, or a model folder), else the default causal LM of ``momoka.models`` (raises
    :class:`~momoka.errors.ModelNotInstalledError` when ``momoka models install``
    has not been run);
    ``LocalClient(model_dir=...)`` a given directory; ``LocalClient(lm)`` wraps
    any object with ``generate(messages, *, max_new_tokens, temperature,
    top_p, seed, stop)`` (returning ``.text``, ``.prompt_tokens``,
    ``.completion_tokens``, ``.finish_reason``) and
    ``continuation_logprob(prompt, continuation) -> float``.

    Requests run one at a time on a worker thread (the model uses its own
    threads); caching, deduplication, accounting, parsing and re-asking are the
    same as for :class:`~momoka.llm.openai_client.OpenAIClient`. Parameters:
    ``max_tokens`` (default 256), ``temperature`` (0 = greedy), ``top_p``,
    ``seed``, ``stop``; anything else raises :class:`ConfigError`.
    """

    def __init__(
        self,
        lm: Any = None,
        *,
        model_dir: str | os.PathLike | None = None,
        model_name: str | None = None,
        cache: Any = True,
        accounting: Accounting | None = None,
        default_params: Mapping[str, Any] | None = None,
        progress: bool | None = None,
        budget_s: float | None = None,
    ):
        if lm is None:
            lm = _load_default_lm(model_dir)
        for attr in ("generate", "continuation_logprob"):
            if not callable(getattr(lm, attr, None)):
                raise ConfigError(f"the local LM object has no {attr}() method")
        self.lm = lm
        name = model_name or getattr(lm, "name", None) or os.path.basename(str(getattr(lm, "model_dir", "") or "")) or type(lm).__name__
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="momoka-local-lm")
        super().__init__(
            model=f"local:{name}",
            cache=cache,
            accounting=accounting,
            default_params=default_params,
            progress=progress,
            concurrency=1,
            timeout=10**9,
            budget_s=budget_s,
        )

    def __repr__(self) -> str:
        return f"LocalClient(model={self.model!r})"

    @property
    def context_window(self) -> int | None:
        """The model's context length in tokens (prompt plus answer), when the model tells it."""
        if not callable(getattr(self.lm, "prompt_ids", None)):
            return None
        n = getattr(self.lm, "max_context", None)
        return int(n) if n else None

    def count_tokens(self, messages: Any) -> int:
        """Tokens of the prompt that ``complete(messages)`` would run (chat template included)."""
        return len(self.lm.prompt_ids(normalize_messages(messages)))

    def _check_params(self, params: dict) -> dict:
        bad = sorted(set(params) - _PARAMS)
        if bad:
            raise ConfigError(f"LocalClient does not support parameter(s) {bad}; supported: {sorted(_PARAMS)}")
        if "max_new_tokens" in params:
            params = dict(params)
            params["max_tokens"] = params.pop("max_new_tokens")
        mt = params.get("max_tokens")
        if mt is not None:
            check_int(mt, "max_tokens", minimum=1)
        t = params.get("temperature")
        if t is not None and (not isinstance(t, (int, float)) or t < 0):
            raise ConfigError(f"temperature must be >= 0, got {t!r}")
        tp = params.get("top_p")
        if tp is not None and (not isinstance(tp, (int, float)) or not 0 < tp <= 1):
            raise ConfigError(f"top_p must lie in (0, 1], got {tp!r}")
        stop = params.get("stop")
        if isinstance(stop, str):
            params = dict(params)
            params["stop"] = [stop]
        return params

    def _generate(self, payload: dict) -> Completion:
        p = payload["params"]
        kw = {"max_new_tokens": p.get("max_tokens", 256), "temperature": float(p.get("temperature", 0.0)),
              "top_p": float(p.get("top_p", 1.0)), "seed": p.get("seed"), "stop": p.get("stop")}
        r = self.lm.generate(payload["messages"], **kw)
        return Completion(
            text=r.text,
            prompt_tokens=int(getattr(r, "prompt_tokens", 0) or 0),
            completion_tokens=int(getattr(r, "completion_tokens", 0) or 0),
            finish_reason=getattr(r, "finish_reason", None),
        )

    def _score(self, payload: dict) -> Completion:
        if payload.get("mean"):
            return Completion(logprob=float(self.lm.continuation_logprob(payload["prompt"], payload["continuation"], mean=True)))
        return Completion(logprob=float(self.lm.continuation_logprob(payload["prompt"], payload["continuation"])))

    def _cache_scope(self, kind: str) -> str | None:
        """Generated answers depend on the generation runtime (llama.cpp's 8-bit activations can flip a
        near-tied token): a runtime other than onnxruntime is part of their cache key, so an answer cached
        under one runtime is never served under another. Scores always run on onnxruntime."""
        runtime_key = getattr(self.lm, "runtime_key", None)
        if kind != "chat" or not callable(runtime_key):
            return None
        key = runtime_key()
        return None if key == "onnx" else f"runtime:{key}"

    def text_logprobs(self, text: str) -> tuple[list[tuple[int, int]], list[float]]:
        """Each token of ``text`` (tokenised whole) as a character span, with its log-probability.

        What a server echoes for ``/completions`` with ``echo`` and ``logprobs``
        (:mod:`momoka.llm.server`). Runs on the client's model thread; needs an LM
        with ``text_logprobs`` (:class:`~momoka.models.causal_lm.CausalLM` has it).
        """
        fn = getattr(self.lm, "text_logprobs", None)
        if not callable(fn):
            raise LLMCapabilityError(f"{self.model} cannot score a text token by token")
        spans, lps = self._pool.submit(fn, text).result()
        self.accounting.record("serve", self.model, calls=1, requests=1, prompt_tokens=len(spans))
        return spans, [float(x) for x in lps]

    async def _send(self, kind: str, payload: dict, timeout: float) -> Completion:
        fn = self._generate if kind == "chat" else self._score
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self._pool, fn, payload)
        except LLMError:
            raise
        except Exception as exc:  # a model failure is final for this item (never retried)
            raise LLMError(f"local model failed: {type(exc).__name__}: {exc}") from exc

    def close(self) -> None:
        """Stop the worker thread (the model stays loaded until dropped)."""
        self._pool.shutdown(wait=False)
