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
from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client, WorkflowHandle
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from reactive_temporal.api import unserved, worker_waits
from reactive_temporal.api.worker_waits import TaskQueuePollers, waiting_for_worker
from reactive_temporal.embedded.stack import DevServer
from tests.support.dev_servers import dev_server_with, partitioned

pytestmark = [pytest.mark.faults, pytest.mark.workflow]

ACTIVITY = TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY
WORKFLOW = TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW
SILENCE = timedelta(seconds=10)
"""POLL_SILENCE here: above a saturated worker's gap between polls (one WORK_SECONDS call),
below what the root alone missed of them in every measured minute."""
WORK_SECONDS = 3.0
WATCHED_SECONDS = 40.0
"""Long enough for a dozen polls, each on a partition the load balancer picks."""


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
    calls = int(WATCHED_SECONDS / WORK_SECONDS) + 8  # a backlog until the end
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
        while time.monotonic() - start < WATCHED_SECONDS:
            await asyncio.sleep(2)
            pollers = TaskQueuePollers(client)
            last = await pollers.last_poll(queue, ACTIVITY)
            assert not await pollers.silent(queue, ACTIVITY), (
                f"after {time.monotonic() - start:.0f} s, a worker polling every "
                f"{WORK_SECONDS:g} s was taken for none: its last poll {last}"
            )
            waiting = await waiting_for_worker(client, await handles[-1].describe(), pollers)
            assert waiting is None, f"the last run queued is said to wait for no worker: {waiting}"
            root = await root_poll(client, queue)
            if root is not None:
                root_silent_for = max(root_silent_for, datetime.now(UTC) - root)
            checks += 1
        assert checks >= 15
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
    waiting = await waiting_for_worker(client, await handles[-1].describe(), pollers)
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
