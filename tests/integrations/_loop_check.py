"""Shared by the adapter tests: does an awaitable leave the event loop free while it runs?"""

from __future__ import annotations

import asyncio
import threading


async def run_with_ticker(awaitable, interval: float = 0.01):
    """Await ``awaitable`` while a ticker coroutine counts ticks; returns (result, ticks, loop thread id)."""
    ticks = 0
    done = asyncio.Event()

    async def ticker():
        nonlocal ticks
        while not done.is_set():
            await asyncio.sleep(interval)
            ticks += 1

    task = asyncio.create_task(ticker())
    try:
        result = await awaitable
    finally:
        done.set()
        await task
    return result, ticks, threading.get_ident()
