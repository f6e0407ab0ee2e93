"""Heartbeats for activities that wait on something slow (an LLM, a tool, a server).

Without them Temporal notices an activity lost with its worker only when the activity's whole
start-to-close timeout has passed; with them, within its heartbeat timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from temporalio import activity


@contextlib.asynccontextmanager
async def heartbeating() -> AsyncIterator[None]:
    """Heartbeat while the block runs, three times per heartbeat timeout; nothing when the
    activity was scheduled without one."""
    timeout = activity.info().heartbeat_timeout
    if not timeout:
        yield
        return
    interval = max(timeout.total_seconds() / 3, 0.2)

    async def beat() -> None:
        while True:  # a call that ends before the first interval never heartbeats
            await asyncio.sleep(interval)
            activity.heartbeat()

    task = asyncio.create_task(beat())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
