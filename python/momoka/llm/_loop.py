"""The one event loop every LLM client runs on.

A daemon thread runs an asyncio loop for the whole process; synchronous
facades submit coroutines to it. HTTP sessions live on this loop, so their
keep-alive connections survive from one batch to the next, and the facades
work the same inside a program that already runs its own loop (Jupyter).
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Coroutine

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_thread: threading.Thread | None = None


def get_loop() -> asyncio.AbstractEventLoop:
    """Return the shared loop, starting its thread on first use."""
    global _loop, _thread
    with _lock:
        if _loop is None or _thread is None or not _thread.is_alive():
            loop = asyncio.new_event_loop()
            t = threading.Thread(target=loop.run_forever, name="momoka-llm-loop", daemon=True)
            t.start()
            _loop, _thread = loop, t
        return _loop


def in_loop_thread() -> bool:
    """True when called from the shared loop's own thread."""
    return _thread is not None and threading.current_thread() is _thread


async def _guard(coro: Coroutine, done: threading.Event) -> Any:
    try:
        return await coro
    finally:
        done.set()


def run_sync(coro: Coroutine) -> Any:
    """Run ``coro`` on the shared loop and wait for its result.

    On KeyboardInterrupt (or any exception while waiting) the coroutine is
    cancelled and given a few seconds to run its ``finally`` blocks (which write
    finished answers to the cache) before the exception propagates.
    """
    if in_loop_thread():
        coro.close()
        raise RuntimeError("a synchronous LLM call was made from the LLM event loop itself; use the async API")
    loop = get_loop()
    done = threading.Event()
    fut = asyncio.run_coroutine_threadsafe(_guard(coro, done), loop)
    try:
        return fut.result()
    except BaseException:
        fut.cancel()
        done.wait(10.0)
        raise


async def run_async(coro: Coroutine) -> Any:
    """Await ``coro`` on the shared loop from any other running loop."""
    loop = get_loop()
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:  # pragma: no cover - only awaited from a loop
        running = None
    if running is loop:
        return await coro
    return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, loop))
