"""Value types shared by every LLM client: messages, results, the client protocol."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Protocol, Sequence, Union, runtime_checkable

from ..errors import InputError, LLMError

#: One chat message: ``{"role": "system" | "user" | "assistant", "content": str}``.
Message = dict
#: What a batch item may be: a list of messages, or a plain string (one user message).
MessagesLike = Union[str, Sequence[Mapping[str, Any]]]

_ROLES = frozenset({"system", "user", "assistant", "tool", "developer"})


def normalize_messages(messages: MessagesLike) -> list[dict]:
    """Return ``messages`` as a fresh list of ``{"role", "content"}`` dicts.

    A plain string becomes one user message. Raises :class:`InputError` for
    anything that is not a non-empty list of messages with a known role and a
    string content.
    """
    if isinstance(messages, str):
        return [{"role": "user", "content": messages}]
    if isinstance(messages, Mapping) or not isinstance(messages, Iterable):
        raise InputError(
            f"a batch item must be a str or a list of messages, got {type(messages).__name__}"
        )
    out: list[dict] = []
    for i, m in enumerate(messages):
        if not isinstance(m, Mapping):
            raise InputError(f"message {i} must be a dict with 'role' and 'content', got {type(m).__name__}")
        role = m.get("role")
        content = m.get("content")
        if role not in _ROLES:
            raise InputError(f"message {i} has an unknown role {role!r} (expected one of {sorted(_ROLES)})")
        if not isinstance(content, str):
            raise InputError(f"message {i} ({role}) must have a str 'content', got {type(content).__name__}")
        out.append({"role": role, "content": content})
    if not out:
        raise InputError("a batch item holds no messages")
    return out


@dataclass
class Completion:
    """The outcome of one batch item.

    ``text`` is the answer (``None`` when the item failed; then ``error`` says
    why). ``logprob`` is set for log-probability requests. ``cached`` tells
    whether the answer came from the on-disk cache (or from an identical item of
    the same batch: ``deduplicated``); ``attempts`` counts the requests actually
    sent for this item (0 when cached), retries included.
    """

    text: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    finish_reason: str | None = None
    logprob: float | None = None
    cached: bool = False
    deduplicated: bool = False
    attempts: int = 0
    latency_s: float = 0.0
    error: LLMError | None = None

    @property
    def ok(self) -> bool:
        """True when the item has an answer."""
        return self.error is None

    def to_cache(self) -> dict:
        """The JSON-able part worth caching (never errors)."""
        d: dict = {"text": self.text, "pt": self.prompt_tokens, "ct": self.completion_tokens}
        if self.finish_reason is not None:
            d["fr"] = self.finish_reason
        if self.logprob is not None:
            d["lp"] = self.logprob
        return d

    @classmethod
    def from_cache(cls, d: Mapping) -> "Completion":
        """Rebuild a cached completion (``cached=True``, no attempts)."""
        return cls(
            text=d.get("text"),
            prompt_tokens=int(d.get("pt", 0)),
            completion_tokens=int(d.get("ct", 0)),
            finish_reason=d.get("fr"),
            logprob=d.get("lp"),
            cached=True,
        )


@dataclass
class Parsed:
    """The outcome of one item of :meth:`complete_parsed`.

    ``ok`` is False when the answer could not be parsed after every re-ask (or
    the request itself failed); then ``value`` is ``None`` and ``error`` says
    why. ``raw`` is the last answer received, ``rounds`` the number of times the
    item was asked (1 = no re-ask); ``messages`` the conversation of the last round
    (what :meth:`~momoka.llm.base.BaseClient.forget` takes to drop its cached answer).
    """

    value: Any = None
    ok: bool = False
    raw: str | None = None
    rounds: int = 0
    error: Exception | None = None
    history: list = field(default_factory=list)
    messages: list | None = None


@runtime_checkable
class Parser(Protocol):
    """Turns an answer into a value, raising :class:`momoka.errors.LLMResponseError` if it cannot.

    ``reminder`` is the sentence sent back to the model when it must be re-asked.
    """

    reminder: str

    def __call__(self, text: str) -> Any: ...


@runtime_checkable
class LLMClient(Protocol):
    """What every method of momoka needs from an LLM (both clients implement it)."""

    model: str

    def complete(self, messages: MessagesLike, **params: Any) -> str:
        """Answer one conversation."""
        ...

    def complete_many(self, batch: Sequence[MessagesLike], **params: Any) -> list[str]:
        """Answer a batch in order; raise if an item failed for good."""
        ...

    def complete_batch(self, batch: Sequence[MessagesLike], **params: Any) -> list[Completion]:
        """Answer a batch in order; each result carries its text or its error."""
        ...

    def complete_parsed(
        self, batch: Sequence[MessagesLike], parser: Callable[[str], Any], **params: Any
    ) -> list[Parsed]:
        """Answer and parse a batch, re-asking malformed answers a bounded number of times."""
        ...

    def logprob(self, prompt: str, continuation: str) -> float:
        """Natural-log probability of ``continuation`` after ``prompt``."""
        ...

    def logprob_many(self, pairs: Sequence[tuple[str, str]], **params: Any) -> list[float]:
        """:meth:`logprob` for many pairs."""
        ...

    def close(self) -> None:
        """Release resources."""
        ...
