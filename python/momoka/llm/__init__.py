"""momoka.llm: one protocol for any OpenAI-compatible server and the local model.

- :class:`OpenAIClient` — chat completions against any OpenAI-compatible URL
  (vLLM, llama.cpp, Ollama, hosted APIs), async with bounded concurrency and
  keep-alive under a synchronous batch facade.
- :class:`LocalClient` — the same protocol on the embedded causal LM.
- Both: ``complete``, ``complete_many`` (→ list[str]), ``complete_batch``
  (→ list[:class:`Completion`] with usage and errors), ``complete_parsed``
  (validation and bounded re-asking), ``logprob`` / ``logprob_many``; on-disk
  cache (:class:`ResponseCache`), retries (:class:`RetryPolicy`), accounting
  (:class:`Accounting`), progress bars.
- :mod:`momoka.llm.prompts` — the papers' prompts; :mod:`momoka.llm.parsers` — answer parsers.
- :func:`client_from_env` — an :class:`OpenAIClient` when ``MOMOKA_LLM_BASE_URL``
  is set, else a :class:`LocalClient`.
"""

from __future__ import annotations

from typing import Any

from .. import settings
from . import parsers, prompts
from .accounting import Accounting, MethodStats
from .base import BaseClient
from .cache import ResponseCache, default_cache_path, make_key
from .local import LocalClient
from .openai_client import ENV_API_KEY, ENV_BASE_URL, ENV_MODEL, OpenAIClient
from .parsers import BinaryParser, JSONListParser, NumberedListParser, parse_binary, parse_json_list, parse_numbered_list
from .retry import RetryPolicy
from .types import Completion, LLMClient, Parsed, normalize_messages


def client_from_env(**kwargs: Any) -> BaseClient:
    """An :class:`OpenAIClient` configured from ``MOMOKA_LLM_*`` when ``MOMOKA_LLM_BASE_URL`` is set,
    otherwise a :class:`LocalClient` on the default local model. ``kwargs`` go to the constructor."""
    if settings.get_text(ENV_BASE_URL):
        return OpenAIClient(**kwargs)
    return LocalClient(**kwargs)


__all__ = [
    "Accounting",
    "BaseClient",
    "BinaryParser",
    "Completion",
    "ENV_API_KEY",
    "ENV_BASE_URL",
    "ENV_MODEL",
    "JSONListParser",
    "LLMClient",
    "LocalClient",
    "MethodStats",
    "NumberedListParser",
    "OpenAIClient",
    "Parsed",
    "ResponseCache",
    "RetryPolicy",
    "client_from_env",
    "default_cache_path",
    "make_key",
    "normalize_messages",
    "parse_binary",
    "parse_json_list",
    "parse_numbered_list",
    "parsers",
    "prompts",
]
