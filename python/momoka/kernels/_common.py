"""Argument checks shared by the kernel wrappers."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np

from ..errors import ConfigError, KernelInputError


def check_bound(name: str, value: Any, *, allow_none: bool = True) -> int:
    """Return a non-negative int bound, or -1 for ``None`` (no bound)."""
    if value is None:
        if allow_none:
            return -1
        raise ConfigError(f"{name} must be an int >= 0, got None")
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        if isinstance(value, float) and math.isnan(value):
            raise ConfigError(f"{name} must be an int >= 0, got NaN")
        raise ConfigError(f"{name} must be an int >= 0, got {type(value).__name__} {value!r}")
    if value < 0:
        raise ConfigError(f"{name} must be >= 0, got {value}")
    return int(value)


def check_threads(threads: int | None) -> int:
    """``None`` means every core (0 for the native side)."""
    if threads is None:
        return 0
    if isinstance(threads, bool) or not isinstance(threads, (int, np.integer)) or threads < 1:
        raise ConfigError(f"threads must be None or an int >= 1, got {threads!r}")
    return int(threads)


def check_str(name: str, value: Any) -> str:
    if not isinstance(value, str):
        what = type(value).__name__
        if isinstance(value, float) and math.isnan(value):
            what = "float (NaN)"
        raise KernelInputError(f"{name}: expected str, got {what}")
    return value


def str_list(name: str, items: Iterable[str] | np.ndarray) -> list:
    """A batch of str as a list (numpy string arrays and other iterables accepted).

    Items are checked one by one on the native side; a non-str item raises
    :class:`KernelInputError` naming its index.
    """
    if isinstance(items, str):
        raise KernelInputError(f"{name}: expected a sequence of str, got a single str (wrap it in a list)")
    if isinstance(items, np.ndarray):
        if items.ndim != 1:
            raise KernelInputError(f"{name}: expected a 1-D array, got shape {items.shape}")
        return items.tolist()
    if isinstance(items, (list, tuple)):
        return items if isinstance(items, list) else list(items)
    if isinstance(items, Iterable):
        return list(items)
    raise KernelInputError(f"{name}: expected a sequence of str, got {type(items).__name__}")


def native_call(fn, *args, **kwargs):
    """Call a native function, turning its TypeError / ValueError into KernelInputError."""
    try:
        return fn(*args, **kwargs)
    except (TypeError, ValueError) as exc:  # raised by the binding for bad items
        raise KernelInputError(str(exc)) from exc


def slice_bounds(n: int, start: Any, end: Any) -> tuple[int, int]:
    """Normalise ``start``/``end`` like a Python slice (negative counts from the end)."""
    for name, v in (("start", start), ("end", end)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, np.integer))):
            raise ConfigError(f"{name} must be an int or None, got {type(v).__name__} {v!r}")
    lo, hi, _ = slice(start, end).indices(n)
    return lo, max(lo, hi)


__all__ = ["check_bound", "check_threads", "check_str", "str_list", "native_call", "slice_bounds"]
