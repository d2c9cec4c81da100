"""Numbers read from ``MOMOKA_*`` environment variables: one parser, one message for a bad value."""

from __future__ import annotations

import math
import os


def env_number(name: str, default: float | int | None = None, *, minimum: float = 0.0, strict: bool = False,
               integer: bool = False, unit: str = "") -> float | int | None:
    """The number in ``$name`` (``default`` when unset or blank).

    It must be at least ``minimum`` (above it with ``strict``) and, with ``integer``, a whole
    number; anything else is a :class:`~momoka.errors.ConfigError` naming the variable, never a
    silent default.
    """
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value: float | int | None = int(raw) if integer else float(raw)
    except ValueError:
        value = None
    if value is None or not math.isfinite(value) or (value <= minimum if strict else value < minimum):
        from .errors import ConfigError

        what = "an integer" if integer else "a number"
        of = f" of {unit}" if unit else ""
        raise ConfigError(f"{name} must be {what}{of} {'>' if strict else '>='} {minimum:g}, not {raw!r}")
    return value
