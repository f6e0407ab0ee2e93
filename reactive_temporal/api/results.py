"""Awaiting a workflow's result through a busy Temporal frontend.

A result is awaited with a long poll, and a frontend holds only so many long polls of one
kind per namespace at once (`frontend.namespaceCount`: 1,200 by default, per frontend and per
API method). Past that it answers RESOURCE_EXHAUSTED, the SDK retries for some seconds, and
`handle.result()` raises an RPCError although the run is fine: 2,000 awaits of 20-second
workflows from one process had 796 fail so on a dev server, and `bench.scale` lost 239 of 1,500
runs' results. The run goes on durably whatever its waiter does, so the wait goes on too:
`result_of` tries again, later, for as long as the server is busy (`reactive_temporal.refusals`).
A caller that will not wait that long bounds it itself (`asyncio.wait_for`).
"""

from __future__ import annotations

from typing import Any, TypeVar

from temporalio.client import WorkflowHandle

from reactive_temporal.refusals import while_busy

T = TypeVar("T")


UNREACHABLE_PATIENCE_SECONDS = 600.0
"""How long a wait for a run's result outlasts a Temporal server it cannot reach: the run goes
on meanwhile (a restart, a failover), and a caller told it failed would start it again."""


async def result_of(
    handle: WorkflowHandle[Any, T], *, unreachable_for: float = UNREACHABLE_PATIENCE_SECONDS
) -> T:
    """`handle.result()`, tried again while the server is busy or out of reach.

    Busy: too many long polls at once. Out of reach: for up to `unreachable_for` seconds
    (the runtime's `unreachable_patience`, from Settings).
    """
    return await while_busy(handle.result, f"{handle.id}'s result", unreachable_for=unreachable_for)
