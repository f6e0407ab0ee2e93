"""A workflow no worker can serve now, told before a command waits on it for nothing.

A decision, a cancel, a chat turn or a wait for a result reaches a run (or an agent's entity)
through its worker. With none polling its task queue (all down, or started for another), or
with its workflow task failing at every attempt (a bad deploy), the server holds the request
and the caller waited for minutes, or for good, then said nothing useful. The server tells
both cases (`api/stalls.py`, `api/worker_waits.py`), and its view is what `progress` already
acts on (`api/progress.py`); here it is for the other commands. A worker that is merely slow
(busy slots, a long model call) is never taken for a missing one: its polls stay recent.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import TypeVar

from temporalio.api.enums.v1 import TaskQueueType
from temporalio.client import Client, WorkflowExecutionDescription, WorkflowExecutionStatus
from temporalio.service import RPCError

from reactive_temporal.api import worker_waits
from reactive_temporal.api.progress import no_worker_polls, unanswerable
from reactive_temporal.api.stalls import Stall, server_stall
from reactive_temporal.api.worker_waits import TaskQueuePollers
from reactive_temporal.contracts.retrying import RetryingStep, WaitingForWorker
from reactive_temporal.errors import workflow_not_found

T = TypeVar("T")

CHECK_EVERY_SECONDS = 5.0
"""How often a wait on a workflow asks the server again whether a worker can serve it: a
`describe()` and, when a step waits or fails, a look at its task queue or history."""


class RunUnserved(ValueError):
    """No worker can serve the run (or entity) now, as the server shows it.

    The message says which workflow, why, and whether what was asked was sent (a cancel is
    recorded; a decision or chat turn refused before it was sent, or sent and not taken yet);
    `retrying` and `waiting_for_worker` are what the server sees, as in `ProgressUnavailable`.
    """

    def __init__(
        self,
        message: str,
        retrying: RetryingStep | None = None,
        waiting_for_worker: WaitingForWorker | None = None,
    ) -> None:
        """`message` names the workflow, the cause and what to do; the rest the server's view."""
        super().__init__(message)
        self.retrying = retrying
        self.waiting_for_worker = waiting_for_worker


async def why_unserved(
    client: Client,
    description: WorkflowExecutionDescription,
    pollers: TaskQueuePollers | None = None,
) -> tuple[str | None, Stall]:
    """Why no worker can serve the running workflow now (None if one may), and the stall.

    Besides a step failing or waiting (`unanswerable`, as `progress` says it), a workflow
    with no step pending (a run parked on an approval, an idle entity) is unserved when the
    workers that polled its task queue for workflow tasks have all been silent for
    POLL_SILENCE (`silent`): an update or a query sent to it would wait for one.
    """
    if description.status != WorkflowExecutionStatus.RUNNING:
        return None, Stall()
    pollers = pollers or TaskQueuePollers(client)
    try:
        stall = await server_stall(client, description, pollers)
        queue = description.task_queue
        why = await unanswerable(description.id, stall, queue, pollers)
        if why is None and await silent(pollers, queue):
            why = no_worker_polls(queue)
    except RPCError:  # the server out of reach for a moment: it cannot tell, the request may
        return None, Stall()  # go (its own wait rides out a restart)
    return why, stall


async def workflow_unserved(
    client: Client, workflow_id: str, start_queue: str | None = None
) -> str | None:
    """Why no worker can serve the workflow with this id now, or None.

    `start_queue`: a request that starts the workflow when it does not run (an agent's
    entity, by update-with-start) starts it there, and waits for a worker polling it.
    """
    return (await workflow_stall(client, workflow_id, start_queue))[0]


async def workflow_stall(
    client: Client, workflow_id: str, start_queue: str | None = None
) -> tuple[str | None, Stall]:
    """`workflow_unserved`'s answer, with the stall the server shows (what fails, since when)."""
    try:
        description = await client.get_workflow_handle(workflow_id).describe()
    except RPCError as err:
        if not workflow_not_found(err):
            return None, Stall()  # out of reach: the request's own wait rides out a restart
        description = None
    if description is not None and description.status == WorkflowExecutionStatus.RUNNING:
        return await why_unserved(client, description)
    if start_queue is not None and await silent(TaskQueuePollers(client), start_queue):
        return no_worker_polls(start_queue), Stall()
    return None, Stall()


async def silent(pollers: TaskQueuePollers, task_queue: str) -> bool:
    """Workers polled `task_queue` for workflow tasks, and none has within POLL_SILENCE.

    Alone, this is the one fact that says so, so it takes a poll the server remembers (five
    minutes) and no other: a queue with no poller known is not taken for one without workers.
    A worker just started is not listed yet (chat turns sent as it started were refused,
    "no worker polls", by a rule that took no poller for none), and past five minutes the
    server has forgotten the last one; either way the request is sent, and its wait says.
    """
    try:
        last = await pollers.last_poll(task_queue, TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW)
    except RPCError:
        return False
    return last is not None and datetime.now(UTC) - last >= worker_waits.POLL_SILENCE


async def require_served(
    client: Client, description: WorkflowExecutionDescription, refusal: Callable[[str], str]
) -> None:
    """RunUnserved, its message `refusal(cause)`, when no worker can serve the workflow now.

    For what is better not sent then: a decision or a chat turn admitted by the server would be
    delivered whenever a worker came back, long after its sender gave up.
    """
    why, stall = await why_unserved(client, description)
    if why is not None:
        raise RunUnserved(refusal(why), stall.retrying, stall.waiting_for_worker)


async def while_served(
    client: Client,
    workflow_id: str,
    waiting: Awaitable[T],
    gave_up: Callable[[str], str],
    *,
    give_up_after: float | None = None,
    every: float = CHECK_EVERY_SECONDS,
) -> T:
    """`waiting` awaited, for as long as a worker may serve the workflow.

    Every `every` seconds the server is asked again; once it shows no worker can serve the
    workflow (or, with `give_up_after`, once that many seconds passed), the wait is given up:
    RunUnserved, its message `gave_up(cause)`. What `waiting` waits for is not undone: the
    caller's message says what becomes of it.
    """
    task = asyncio.ensure_future(waiting)
    deadline = None if give_up_after is None else time.monotonic() + give_up_after
    try:
        while True:
            left = every if deadline is None else min(every, deadline - time.monotonic())
            done, _ = await asyncio.wait({task}, timeout=max(left, 0))
            if done:
                return task.result()
            try:
                description = await client.get_workflow_handle(workflow_id).describe()
            except RPCError:
                continue  # the wait itself says what is wrong, if anything is
            why, stall = await why_unserved(client, description)
            running = description.status == WorkflowExecutionStatus.RUNNING
            if why is None and running and deadline is not None and time.monotonic() >= deadline:
                why = (
                    f"no worker took it within {give_up_after:g} s (is one running for task "
                    f"queue {description.task_queue!r}?)"
                )
            if why is not None:
                raise RunUnserved(gave_up(why), stall.retrying, stall.waiting_for_worker)
    finally:
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
