"""One progress reporter for every long loop in momoka.

>>> with Progress("embedding", total=len(texts), unit="texts") as bar:
...     for batch in batches:
...         run(batch)
...         bar.update(len(batch))

On a terminal it redraws one line (``\\r``) at most every ``refresh`` seconds;
when the stream is not a terminal (output redirected to a file or a log) it
writes a plain line at most every ``interval`` seconds (default 5 s) and a
final line, so redirected output still shows progress. Each line shows
done/total, the rate and the ETA, plus any ``key=value`` postfix given to
:meth:`Progress.update`.

``enabled=False`` silences it, ``enabled=True`` forces it on, ``None`` (the
default) turns it on. The environment variable ``MOMOKA_PROGRESS=0`` (or
``1``) forces it off (or on) whatever the caller asked.
``MOMOKA_PROGRESS_INTERVAL=S`` sets the seconds between plain lines (when the
stream is not a terminal) whatever the caller asked; the first line then comes
after at most ``S`` seconds (``0``: a line at every update, as a log wants for
short runs).
"""

from __future__ import annotations

import math
import sys
import time
from typing import Callable, TextIO

from . import settings

__all__ = ["Progress", "ENV_PROGRESS", "ENV_PROGRESS_INTERVAL", "progress_enabled"]

#: Environment variable that forces progress reporting off (``0``) or on (``1``).
ENV_PROGRESS = "MOMOKA_PROGRESS"
#: Environment variable: seconds between plain progress lines (not on a terminal).
ENV_PROGRESS_INTERVAL = "MOMOKA_PROGRESS_INTERVAL"


def progress_enabled(enabled: bool | None = None) -> bool:
    """Whether progress is shown: ``MOMOKA_PROGRESS`` when set to 0/1, else ``enabled``
    (``None`` counts as on)."""
    forced = settings.get_flag(ENV_PROGRESS)
    if forced is not None:
        return forced
    return True if enabled is None else bool(enabled)


def _interval_from_env() -> float | None:
    """``MOMOKA_PROGRESS_INTERVAL`` in seconds, or None when unset; a bad value is a ConfigError."""
    return settings.get_float(ENV_PROGRESS_INTERVAL)


def _duration(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "?"
    s = int(round(seconds))
    h, rem = divmod(s, 3600)
    m, s = divmod(rem, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m:02d}:{s:02d}"


def _number(x: float) -> str:
    if x >= 100:
        return f"{x:.0f}"
    if x >= 10:
        return f"{x:.1f}"
    return f"{x:.2f}"


class Progress:
    """A progress line on ``stream`` (default stderr); use as a context manager.

    ``label``: what is being done; ``total``: the count expected (None: unknown,
    no ETA); ``unit``: what is counted ("texts", "req"); ``enabled``: see the
    module docstring; ``interval``: seconds between plain lines when ``stream``
    is not a terminal (``MOMOKA_PROGRESS_INTERVAL`` overrides it, and then caps
    ``delay`` there); ``refresh``: seconds between redraws on a terminal;
    ``delay``: seconds before anything is shown (default 1: a short loop stays silent);
    ``clock``: the time source (tests pass a fake one).
    """

    def __init__(
        self,
        label: str,
        total: int | None = None,
        unit: str = "",
        enabled: bool | None = None,
        stream: TextIO | None = None,
        *,
        interval: float = 5.0,
        refresh: float = 0.1,
        delay: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.label = label
        self.total = None if total is None else int(total)
        self.unit = unit
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = progress_enabled(enabled)
        self.interval = float(interval)
        self.refresh = float(refresh)
        self.delay = float(delay)
        self.tty = False
        try:
            self.tty = bool(self.stream.isatty())
        except (AttributeError, ValueError):
            pass
        env_interval = _interval_from_env() if self.enabled else None
        if env_interval is not None:
            self.interval = env_interval
            if not self.tty:
                self.delay = min(self.delay, env_interval)
        self.n = 0
        self.postfix: dict[str, object] = {}
        self._clock = clock
        self._start = clock()
        self._last: float | None = None  # time of the last line written
        self._last_n: int | None = None  # count shown by that line
        self._width = 0  # length of the last terminal line (to blank its tail)
        self._closed = False

    # ------------------------------------------------------------------ API

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def update(self, n: int = 1, **postfix) -> None:
        """Count ``n`` more items done; ``postfix`` items are shown as ``key=value``."""
        self.n += int(n)
        if postfix:
            self.postfix.update(postfix)
        if not self.enabled or self._closed:
            return
        now = self._clock()
        if now - self._start < self.delay:
            return
        every = self.refresh if self.tty else self.interval
        if self._last is None or now - self._last >= every:
            self._write(now, final=False)

    def step(self, step: int, total: int, message: str = "") -> None:
        """Report absolute progress: ``step`` of ``total`` done, now doing ``message`` (the
        ``progress(step, total, message)`` callback of :func:`momoka.models.gguf.convert_gguf`)."""
        self.total = int(total)
        self.update(int(step) - self.n, **({"step": message} if message else {}))

    def close(self) -> None:
        """Write the final line (when anything was shown or the delay has passed)."""
        if self._closed:
            return
        self._closed = True
        if not self.enabled:
            return
        now = self._clock()
        if self._last is None and now - self._start < self.delay:
            return  # finished before it was worth showing
        if not self.tty and self._last_n == self.n:
            return  # a plain line already showed this count
        self._write(now, final=True)

    # ------------------------------------------------------------------ text

    def line(self, now: float | None = None) -> str:
        """The progress text at time ``now``: label, done/total, rate, ETA, postfix."""
        now = self._clock() if now is None else now
        elapsed = max(now - self._start, 0.0)
        rate = self.n / elapsed if elapsed > 0 else float("nan")
        unit = f" {self.unit}" if self.unit else ""
        done = f"{self.n}/{self.total}" if self.total is not None else f"{self.n}"
        parts = [f"{self.label}: {done}{unit}"]
        if self.total:
            parts[0] += f" ({100.0 * self.n / self.total:.0f}%)"
        if math.isfinite(rate):
            parts.append(f"{_number(rate)}{unit}/s")
        parts.append(f"elapsed {_duration(elapsed)}")
        if self.total is not None and math.isfinite(rate) and rate > 0 and self.n < self.total:
            parts.append(f"eta {_duration((self.total - self.n) / rate)}")
        if self.postfix:
            parts.append(" ".join(f"{k}={v}" for k, v in self.postfix.items()))
        return ", ".join(parts)

    def _write(self, now: float, final: bool) -> None:
        text = self.line(now)
        if self.tty:
            pad = " " * max(self._width - len(text), 0)
            self._width = len(text)
            self.stream.write("\r" + text + pad + ("\n" if final else ""))
        else:
            self.stream.write(text + "\n")
        self.stream.flush()
        self._last = now
        self._last_n = self.n
