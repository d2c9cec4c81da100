"""Token and request accounting, per method and per run, with an optional price table."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Mapping

from ..errors import ConfigError
from ..stats import Stats


@dataclass
class MethodStats(Stats):
    """Counters of one method (or of the whole run).

    - ``calls``: batch items asked for (cached ones included)
    - ``requests``: requests actually sent to the server or model, retries included
    - ``prompt_tokens`` / ``completion_tokens``: as reported by the server for sent requests
    - ``cache_hits``: items answered from the on-disk cache
    - ``deduplicated``: items answered by an identical item of the same batch
    - ``retries``: requests re-sent after a timeout, connection error, 429 or 5xx
    - ``failures``: items that failed for good
    - ``reasks`` / ``parse_failures``: re-asks after a malformed answer, and items still malformed after them
    - ``wall_s``: wall time spent in batches
    """

    calls: int = 0
    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cache_hits: int = 0
    deduplicated: int = 0
    retries: int = 0
    failures: int = 0
    reasks: int = 0
    parse_failures: int = 0
    wall_s: float = 0.0


class Accounting:
    """Counters for one run, split by method label and by model.

    ``prices`` maps a model name to ``(prompt $/1M tokens, completion $/1M tokens)``
    (or a dict with keys ``prompt`` and ``completion``); :meth:`cost` uses it.
    One ``Accounting`` may be shared by several clients.
    """

    def __init__(self, prices: Mapping[str, object] | None = None):
        self._lock = threading.Lock()
        self._methods: dict[str, MethodStats] = {}
        self._models: dict[str, list[int]] = {}
        self.prices: dict[str, tuple[float, float]] = {}
        if prices:
            self.set_prices(prices)

    def set_prices(self, prices: Mapping[str, object]) -> None:
        """Add or replace price entries (see the class docstring)."""
        for model, p in prices.items():
            if isinstance(p, Mapping):
                try:
                    pair = (float(p["prompt"]), float(p["completion"]))
                except (KeyError, TypeError, ValueError) as exc:
                    raise ConfigError(f"price of {model!r} needs numeric 'prompt' and 'completion'") from exc
            else:
                try:
                    a, b = p  # type: ignore[misc]
                    pair = (float(a), float(b))
                except (TypeError, ValueError) as exc:
                    raise ConfigError(f"price of {model!r} must be (prompt, completion) $ per 1M tokens") from exc
            if pair[0] < 0 or pair[1] < 0:
                raise ConfigError(f"price of {model!r} must not be negative")
            self.prices[str(model)] = pair

    def record(self, method: str, model: str | None = None, **counts: float) -> None:
        """Add ``counts`` (names of :class:`MethodStats` fields) to ``method``'s counters."""
        with self._lock:
            st = self._methods.get(method)
            if st is None:
                st = self._methods[method] = MethodStats()
            for name, v in counts.items():
                st.count(name, v)
            if model is not None and ("prompt_tokens" in counts or "completion_tokens" in counts):
                m = self._models.setdefault(model, [0, 0])
                m[0] += int(counts.get("prompt_tokens", 0))
                m[1] += int(counts.get("completion_tokens", 0))

    @property
    def by_method(self) -> dict[str, MethodStats]:
        """A copy of the counters of each method label."""
        with self._lock:
            return {k: MethodStats().merge(v) for k, v in self._methods.items()}

    @property
    def total(self) -> MethodStats:
        """The counters summed over methods."""
        t = MethodStats()
        for st in self.by_method.values():
            t.merge(st)
        return t

    @property
    def tokens_by_model(self) -> dict[str, tuple[int, int]]:
        """(prompt, completion) tokens per model."""
        with self._lock:
            return {k: (v[0], v[1]) for k, v in self._models.items()}

    def cost(self) -> float | None:
        """Cost in dollars from the price table; None when a used model has no price."""
        total = 0.0
        for model, (pt, ct) in self.tokens_by_model.items():
            if pt == 0 and ct == 0:
                continue
            price = self.prices.get(model)
            if price is None:
                return None
            total += pt / 1e6 * price[0] + ct / 1e6 * price[1]
        return total

    def reset(self) -> None:
        """Zero every counter (prices stay)."""
        with self._lock:
            self._methods.clear()
            self._models.clear()

    def to_dict(self) -> dict:
        """JSON-able summary: per method, total, tokens per model, cost."""
        return {
            "by_method": {k: v.to_dict() for k, v in self.by_method.items()},
            "total": self.total.to_dict(),
            "tokens_by_model": {k: list(v) for k, v in self.tokens_by_model.items()},
            "cost": self.cost(),
        }

    def report(self) -> str:
        """A fixed-width table of the counters, one row per method plus the total."""
        cols = ("calls", "requests", "cache_hits", "prompt_tokens", "completion_tokens", "retries", "failures", "parse_failures", "wall_s")
        heads = ("method", "calls", "requests", "cache hits", "prompt tok", "compl tok", "retries", "failures", "parse fail", "wall s")
        rows = []
        for name, st in sorted(self.by_method.items()):
            rows.append([name] + [_fmt(getattr(st, c)) for c in cols])
        rows.append(["TOTAL"] + [_fmt(getattr(self.total, c)) for c in cols])
        widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(heads)]
        line = lambda r: "  ".join(s.ljust(w) if i == 0 else s.rjust(w) for i, (s, w) in enumerate(zip(r, widths)))
        out = [line(heads), line(["-" * w for w in widths])] + [line(r) for r in rows]
        c = self.cost()
        if self.prices:
            out.append(f"cost: ${c:.4f}" if c is not None else "cost: unknown (a model has no price)")
        return "\n".join(out)

    def __repr__(self) -> str:
        t = self.total
        return f"Accounting(calls={t.calls}, requests={t.requests}, cache_hits={t.cache_hits}, failures={t.failures})"


def _fmt(v: float) -> str:
    return f"{v:.2f}" if isinstance(v, float) else str(v)
