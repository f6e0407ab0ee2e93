"""A worker is told apart from none on a task queue served in partitions, as in production.

A self-hosted cluster serves each task queue in 4 partitions (Temporal Cloud partitions its
queues too), and `describe_task_queue` tells of the root alone. A worker whose slots a backlog
keeps full polls as each frees, on any partition, and a poll served from the backlog where it
lands is not recorded at the root: the root's last poll grew older than POLL_SILENCE while
the worker polled every few seconds elsewhere, and its runs were reported waiting for a
worker none polls for (`api/worker_waits.py`). The server here is started with the partitions
said outright; POLL_SILENCE is shortened so that what takes minutes in production (a worker
saturated by calls longer than it) happens in seconds.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest
from temporalio import activity, workflow
from temporalio.api.enums.v1 import PendingActivityState, TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client, WorkflowExecutionDescription, WorkflowHandle
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from reactive_temporal.api import unserved, worker_waits
from reactive_temporal.api.worker_waits import TaskQueuePollers, waiting_for_worker
from reactive_temporal.embedded.dev_server import DevServer
from tests.support.dev_servers import dev_server_with, partitioned

pytestmark = [pytest.mark.faults, pytest.mark.workflow]

ACTIVITY = TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY
WORKFLOW = TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW
SILENCE = timedelta(seconds=10)
"""POLL_SILENCE here: above a saturated worker's gap between polls (one WORK_SECONDS call),
below two of them, so two polls in a row served on other partitions leave the root silent."""
WORK_SECONDS = 4.0
WATCHED_SECONDS = 30.0
"""Watched at least this long, and until the root alone went silent (the case this is about):
each poll lands on a partition the server's load balancer picks, the root one time in four."""
WATCHED_AT_MOST = 55.0
"""A root that never went silent meanwhile (one run in ~1,000, if every poll lands on a
partition at random) fails the test: it would pass for nothing."""


@activity.defn(name="work")
async def work(seconds: float) -> str:
    await asyncio.sleep(seconds)
    return "done"


@workflow.defn(name="OneCall")
class OneCall:
    @workflow.run
    async def run(self, seconds: float) -> str:
        return await workflow.execute_activity(
            work, seconds, start_to_close_timeout=timedelta(seconds=60)
        )


@pytest.fixture(scope="module")
async def partitioned_server(
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[tuple[DevServer, Client]]:
    async with dev_server_with(tmp_path_factory.mktemp("partitioned"), *partitioned()) as server:
        yield server, await Client.connect(server.address)


def one_slot_worker(client: Client, task_queue: str) -> Worker:
    """A worker one call fills: it polls for activities as each call ends, and only then."""
    return Worker(
        client,
        task_queue=task_queue,
        workflows=[OneCall],
        activities=[work],
        workflow_runner=UnsandboxedWorkflowRunner(),
        max_concurrent_activities=1,
        disable_eager_activity_execution=True,  # every call through the task queue
    )


async def queued(handles: list[WorkflowHandle]) -> WorkflowExecutionDescription:
    """A run whose call waits in the backlog (scheduled, not started): the worker takes them
    in no set order, one partition's at a time."""
    for handle in handles:
        description = await handle.describe()
        if any(
            a.state == PendingActivityState.PENDING_ACTIVITY_STATE_SCHEDULED
            for a in description.raw_description.pending_activities
        ):
            return description
    raise AssertionError(f"no run of {len(handles)} waits in the backlog: it ran out")


async def root_poll(client: Client, task_queue: str) -> datetime | None:
    """The root partition's last activity poll: what legacy `describe_task_queue` tells."""
    response = await client.workflow_service.describe_task_queue(
        DescribeTaskQueueRequest(
            namespace=client.namespace,
            task_queue=TaskQueue(name=task_queue),
            task_queue_type=ACTIVITY,
        )
    )
    polls = [p.last_access_time.ToDatetime(tzinfo=UTC) for p in response.pollers]
    return max(polls, default=None)


async def test_a_worker_saturated_by_a_backlog_is_never_taken_for_none(
    partitioned_server: tuple[DevServer, Client], monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(worker_waits, "POLL_SILENCE", SILENCE)
    client = partitioned_server[1]
    queue = f"backlog-{uuid.uuid4().hex[:8]}"
    calls = int(WATCHED_AT_MOST / WORK_SECONDS) + 5  # a backlog until the end
    root_silent_for = timedelta(0)
    async with one_slot_worker(client, queue):
        handles: list[WorkflowHandle] = [
            await client.start_workflow(
                OneCall.run, WORK_SECONDS, id=f"{queue}-{n}", task_queue=queue
            )
            for n in range(calls)
        ]
        start = time.monotonic()
        checks = 0
        while (watched := time.monotonic() - start) < WATCHED_AT_MOST and (
            watched < WATCHED_SECONDS or root_silent_for < SILENCE
        ):
            await asyncio.sleep(2)
            pollers = TaskQueuePollers(client)
            last = await pollers.last_poll(queue, ACTIVITY)
            assert not await pollers.silent(queue, ACTIVITY), (
                f"after {time.monotonic() - start:.0f} s, a worker polling every "
                f"{WORK_SECONDS:g} s was taken for none: its last poll {last}"
            )
            waiting = await waiting_for_worker(client, await queued(handles), pollers)
            assert waiting is None, f"a run queued is said to wait for no worker: {waiting}"
            root = await root_poll(client, queue)
            silent_for = SILENCE if root is None else datetime.now(UTC) - root  # None: silent
            root_silent_for = max(root_silent_for, silent_for)
            checks += 1
        assert checks >= 12
    # the root alone missed the worker's polls longer than a silent queue's: without the other
    # partitions asked, the checks above saw it silent
    assert root_silent_for >= SILENCE, (
        f"the root partition's last poll was at most {root_silent_for} old: this test would "
        "pass for nothing"
    )
    # the worker gone, its runs are told waiting for one, once its last poll is old
    await asyncio.sleep(SILENCE.total_seconds() + 1)
    pollers = TaskQueuePollers(client)
    assert await pollers.silent(queue, ACTIVITY)
    waiting = await waiting_for_worker(client, await queued(handles), pollers)
    assert waiting is not None and waiting.task_queue == queue and waiting.last_poll is not None
    assert await unserved.silent(pollers, queue)  # polled for workflow tasks, none since


async def test_a_queue_nobody_polls_is_silent_once_its_last_poll_is_old(
    partitioned_server: tuple[DevServer, Client], monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(worker_waits, "POLL_SILENCE", SILENCE)
    client = partitioned_server[1]
    queue = f"left-{uuid.uuid4().hex[:8]}"
    async with one_slot_worker(client, queue):
        handle = await client.start_workflow(OneCall.run, 0.1, id=queue, task_queue=queue)
        assert await handle.result() == "done"
    pollers = TaskQueuePollers(client)
    assert not await pollers.silent(queue, ACTIVITY), "its worker polled a moment ago"
    assert not await unserved.silent(pollers, queue)
    await asyncio.sleep(SILENCE.total_seconds() + 1)
    pollers = TaskQueuePollers(client)
    assert await pollers.silent(queue, ACTIVITY) and await pollers.silent(queue, WORKFLOW)
    assert await unserved.silent(pollers, queue)
    # never polled: no poll within POLL_SILENCE, but unserved takes no poller known for none
    never = f"never-{uuid.uuid4().hex[:8]}"
    assert await TaskQueuePollers(client).silent(never, WORKFLOW)
    assert not await unserved.silent(TaskQueuePollers(client), never)
