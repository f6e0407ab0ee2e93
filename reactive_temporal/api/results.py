"""Awaiting a workflow's result through a busy Temporal frontend.

A result is awaited with a long poll, and a frontend holds only so many long polls of one
kind per namespace at once (`frontend.namespaceCount`: 1,200 by default, per frontend and per
API method). Past that it answers RESOURCE_EXHAUSTED, the SDK retries for some seconds, and
`handle.result()` raises an RPCError although the run is fine: 2,000 awaits of 20-second
workflows from one process had 796 fail so on a dev server, and `bench.scale` lost 239 of 1,500
runs' results. The run goes on durably whatever its waiter does, so the wait goes on too:
`result_of` tries again, later, for as long as the server is busy (`reactive_temporal.refusals`).
A caller that will not wait that long bounds it itself (`asyncio.wait_for`).

A run reset while it is awaited (`temporal workflow reset`, the Web UI's reset, `starter.py
rerun`) goes on as a new execution of the same workflow id, and the server terminates the
execution the wait was on. `handle.result()` raised that termination: `run`, `watch` (a
`finished` event with status "running" and no result) and `cancel` said the run had ended
while it went on. The wait follows the reset to the workflow's current execution instead.
"""

from __future__ import annotations

import functools
from typing import Any, TypeVar

from temporalio.client import WorkflowExecutionStatus, WorkflowFailureError, WorkflowHandle
from temporalio.exceptions import TerminatedError

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
    while True:
        try:
            return await while_busy(
                handle.result, f"{handle.id}'s result", unreachable_for=unreachable_for
            )
        except WorkflowFailureError as err:
            if not isinstance(err.cause, TerminatedError):
                raise
            successor = await while_busy(
                functools.partial(_reset_successor, handle),
                f"{handle.id}'s current execution",
                unreachable_for=unreachable_for,
            )
            if successor is None:
                raise
            handle = successor


async def _reset_successor(handle: WorkflowHandle[Any, T]) -> WorkflowHandle[Any, T] | None:
    """The workflow's current execution, once the one awaited was terminated.

    A handle on it when it is not terminated itself (a reset started it, in the same
    transaction that terminated the one awaited), else None (the termination is the run's
    end). The SDK gives a handle no public client or result type; a handle on another
    execution of the same workflow is made from the ones it holds.
    """
    current = await handle._client.get_workflow_handle(handle.id).describe()
    if current.status == WorkflowExecutionStatus.TERMINATED:
        return None
    return handle._client.get_workflow_handle(
        handle.id, run_id=current.run_id, result_type=handle._result_type
    )
