"""The offline-or-LLM back-end choice shared by components that can run with or without an LLM."""

from __future__ import annotations

from typing import Any

from .. import settings


def endpoint_of(client: Any) -> str | None:
    """Where a component's LLM requests would go, without building its client: the given client's
    ``base_url``, else (no client given) ``MOMOKA_LLM_BASE_URL``; None when they would go to no endpoint
    (the local model answers, no request is made)."""
    from ..llm import ENV_BASE_URL  # start-up: momoka.llm

    if client is not None:
        return getattr(client, "base_url", None) or None
    return settings.get_text(ENV_BASE_URL) or None


class LLMBacked:
    """Mixin: ``backend`` (``"auto"``, ``"offline"``, ``"llm"``) and an optional client ``_llm``.

    ``"auto"`` means ``llm`` when a client was given or ``MOMOKA_LLM_BASE_URL`` is
    set, else ``offline``; the client is made from the environment on first use.
    """

    backend: str = "auto"
    _llm = None

    @property
    def effective_backend(self) -> str:
        """The back-end with ``"auto"`` resolved."""
        if self.backend != "auto":
            return self.backend
        return "llm" if self._llm is not None or settings.get_text("MOMOKA_LLM_BASE_URL") else "offline"

    @property
    def llm(self):
        """The LLM client (made from the environment on first use)."""
        if self._llm is None:
            from ..llm import client_from_env  # start-up: momoka.llm

            self._llm = client_from_env()
        return self._llm
