"""Checks of option values: one idiom, one message shape (``<name> must be <what>, got <value>``).

Each check returns the value normalised (a plain ``int`` for an integer, numpy's included; a ``float``
for a number) and raises ``error`` (:class:`~momoka.errors.ConfigError` unless told) for anything else.
``bool`` is never taken for a number. The module imports nothing heavy: the CLI and
:mod:`momoka.settings` use it at start-up.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Collection
from typing import Any

from .errors import ConfigError

__all__ = ["MAX_COUNT", "check_int", "check_float", "check_choice", "check_text", "describe_range"]

#: The largest count a caller may ask for (``k``, a budget in characters): what a 32-bit int holds, so that
#: no product of it (a retriever reads a few times ``k`` candidates) overflows the native core's integers.
MAX_COUNT = 2**31 - 1


def describe_range(minimum: float | None = None, maximum: float | None = None, *, integer: bool = False,
                   above: bool = False, below: bool = False, unit: str = "") -> str:
    """What a value in the range must be, in words: ``a positive integer``, ``an integer >= 2``,
    ``a number in [0, 1]``, ``a number of seconds > 0`` (``above``/``below``: the bound itself is excluded)."""
    if integer and minimum == 1 and maximum is None and not above and not unit:
        return "a positive integer"
    what = ("an integer" if integer else "a number") + (f" of {unit}" if unit else "")
    lo, hi = _shown(minimum, integer), _shown(maximum, integer)
    if minimum is not None and maximum is not None:
        return f"{what} in {'(' if above else '['}{lo}, {hi}{')' if below else ']'}"
    if minimum is not None:
        return f"{what} {'>' if above else '>='} {lo}"
    if maximum is not None:
        return f"{what} {'<' if below else '<='} {hi}"
    return what


def _shown(bound: float | None, integer: bool) -> str:
    """A bound in words: every digit of an integer bound (2147483647, not 2.14748e+09)."""
    if bound is None:
        return ""
    return str(int(bound)) if integer and float(bound).is_integer() else f"{bound:g}"


def _in_range(value: float, minimum: float | None, maximum: float | None, above: bool, below: bool) -> bool:
    if minimum is not None and (value <= minimum if above else value < minimum):
        return False
    return not (maximum is not None and (value >= maximum if below else value > maximum))


def check_int(value: Any, name: str, *, minimum: int | None = None, maximum: int | None = None,
              error: type[Exception] = ConfigError) -> int:
    """``value`` as an ``int`` when it is an integer (not a bool) within [``minimum``, ``maximum``];
    else ``error("<name> must be <what>, got <value>")``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not _in_range(
            value, minimum, maximum, False, False):
        raise error(f"{name} must be {describe_range(minimum, maximum, integer=True)}, got {value!r}")
    return int(value)


def check_float(value: Any, name: str, *, minimum: float | None = None, maximum: float | None = None,
                above: bool = False, below: bool = False, unit: str = "",
                error: type[Exception] = ConfigError) -> float:
    """``value`` as a ``float`` when it is a finite real number (not a bool) within the range
    (``above``/``below``: ``minimum``/``maximum`` themselves excluded); else ``error`` naming ``name``."""
    if (isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value)
            or not _in_range(value, minimum, maximum, above, below)):
        what = describe_range(minimum, maximum, above=above, below=below, unit=unit)
        raise error(f"{name} must be {what}, got {value!r}")
    return float(value)


def check_choice(value: Any, name: str, choices: Collection[Any], *, error: type[Exception] = ConfigError) -> Any:
    """``value`` when it is one of ``choices``; else ``error`` naming ``name`` and the choices."""
    if value not in choices:
        raise error(f"{name} must be one of {', '.join(map(str, choices))}; got {value!r}")
    return value


def check_text(value: str, name: str, *, error: type[Exception] = ConfigError) -> str:
    """``value`` when it is valid Unicode text: no lone surrogate, which is what a JSON ``\\ud800`` escape or
    bytes that are not UTF-8 on a command line (decoded with ``surrogateescape``) become; else ``error``
    naming ``name`` and the character's position (the text itself is not repeated)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise error(f"{name} is not valid text: character {exc.start + 1} is a lone surrogate "
                    f"(U+{ord(value[exc.start]):04X}; bytes that are not UTF-8?)") from None
    return value
