"""Shared by the adapter tests: the reference ranking, and does an awaitable leave the event loop free?"""

from __future__ import annotations

import asyncio
import threading

import pytest


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


def expected(index, question: str, k: int, name: str) -> list[tuple]:
    """The reference: ``(doc_id, start, end, score, text)`` of momoka's own ``Index.search``, in rank order."""
    return [(it.doc_id, it.start, it.end, pytest.approx(it.score, rel=1e-6), it.text)
            for it in index.search(question, k, retriever=name)]
