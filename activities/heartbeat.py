"""Heartbeats for activities that wait on something slow (an LLM, a tool, a server).

Without them Temporal notices an activity lost with its worker only when the activity's whole
start-to-close timeout has passed; with them, within its heartbeat timeout.

What they cost: Temporal Cloud bills each heartbeat that reaches the server. The SDK sends the
first `activity.heartbeat()` of an attempt at once and then at most one per 80% of the
heartbeat timeout (the latest details), however often it is called. So the first beat comes
a third of the heartbeat timeout into the block (10 s of the run's 30 s): a step shorter
than that — most model calls, every quick tool — pays nothing, a longer one one action per
24 s. Steps wrap their whole body, not only the slow call, so time spent waiting for a
Postgres connection or on a busy event loop before the call counts too; and a loop up to
20 s late still beats before the timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
from collections.abc import AsyncIterator
from typing import TypeVar

from pydantic import BaseModel, ValidationError
from temporalio import activity

_beating: contextvars.ContextVar[bool] = contextvars.ContextVar("heartbeating", default=False)


@contextlib.asynccontextmanager
async def heartbeating() -> AsyncIterator[None]:
    """Heartbeat while the block runs, three times per heartbeat timeout; nothing when the
    activity was scheduled without one, or when an enclosing block already heartbeats."""
    timeout = activity.info().heartbeat_timeout
    if not timeout or _beating.get():
        yield
        return
    interval = max(timeout.total_seconds() / 3, 0.2)

    async def beat() -> None:
        while True:  # a call that ends before the first interval never heartbeats
            await asyncio.sleep(interval)
            activity.heartbeat()

    task = asyncio.create_task(beat())
    token = _beating.set(True)
    try:
        yield
    finally:
        _beating.reset(token)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


M = TypeVar("M", bound=BaseModel)


def last_heartbeat(kind: type[M]) -> M | None:
    """What an earlier attempt of this activity left in its last heartbeat, read as `kind`;
    None when it left nothing, or details of another kind."""
    details = activity.info().heartbeat_details
    if not details:
        return None
    try:
        return kind.model_validate(details[0])
    except (ValidationError, TypeError):
        return None
