"""A run whose next step no worker takes, because none polls its task queue.

All workers down after an outage, or a worker deployed on another task queue than the runs':
the run's workflow task (or an activity's next attempt) sits scheduled, never started, and
the run looks "running". Two facts together say so, and neither alone:

- `describe()` shows the step ready (scheduled, out of any retry backoff) and not started
  for WAITING_AFTER. A run whose model is merely slow has its `llm_step` started.
- `describe_task_queue` shows no worker polled the run's task queue, for that kind of step,
  within POLL_SILENCE. A worker's poll waits up to a minute for work (measured on the dev
  server: its last poll is up to ~60 s old while it sits idle), so a poll more recent than
  that may still be waiting; and a busy worker, its slots full, polls as each one frees.

A task queue is served in partitions (4 by default, `matching.numTaskqueueReadPartitions`;
the dev server's too), a worker's poll lands on any, and `describe_task_queue` tells of one:
the root, unless a partition is named (`/_sys/<queue>/<n>`). An idle worker's poll on another
partition is forwarded to the root, which records it; a poll served from a backlog where it
lands is not. Measured (dev server 1.32, 4 partitions, one activity slot, 20 s activities, 39
waiting): the worker polled every 20 s, on partitions 1 and 3, and the root's last activity
poll grew to 90 s old while the freshest partition's stayed within 21 s; the ENHANCED mode
(`report_pollers`) gave the root's 90 s too. The root alone made a worker saturated by a
backlog look gone, and the runs queued behind it unserved. So a root poll older than
POLL_SILENCE less ROOT_SETTLES is checked against the other partitions: three more calls,
only then (an idle worker's poll, forwarded, was at most 55 s old at the root).
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from temporalio.api.enums.v1 import (
    PendingActivityState,
    PendingWorkflowTaskState,
    TaskQueueType,
)
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import (
    DescribeTaskQueueRequest,
    DescribeWorkflowExecutionResponse,
)
from temporalio.client import Client, WorkflowExecutionDescription, WorkflowExecutionStatus
from temporalio.service import RPCError

from reactive_temporal.access_calls import mapped_refusals
from reactive_temporal.contracts.retrying import WORKFLOW_TASK, WaitingForWorker

WAITING_AFTER = timedelta(seconds=10)
"""A step ready this long and not started waits for a worker: a polling worker takes one in
milliseconds, and a worker restarted by a rolling deploy polls again within it."""
POLL_SILENCE = timedelta(seconds=75)
"""No poll for this long: no worker is polling. A worker's poll lasts up to 60 s, then it
polls again."""
ROOT_SETTLES = timedelta(seconds=15)
"""A root partition's poll within POLL_SILENCE less this settles it, no other partition asked:
an answer is kept while its caller (a `runs` listing) works, and a poll just inside
POLL_SILENCE may not stay so. A root poll older (idle workers': up to 55 s) costs 3 calls."""
READ_PARTITIONS = 4
"""The partitions asked: Temporal's default `matching.numTaskqueueReadPartitions` (the dev
server's and a self-hosted cluster's). A cluster set to more has polls on the others unseen,
when served from a backlog there (an idle one is forwarded to the root, which records it)."""


class TaskQueuePollers:
    """When a task queue was last polled, asked of the server once per queue and kind.

    `runs` shares one among the runs it lists: most are on one task queue.
    """

    def __init__(self, client: Client) -> None:
        """Nothing is asked yet."""
        self._client = client
        self._asked: dict[tuple[str, TaskQueueType.ValueType], asyncio.Task[datetime | None]] = {}

    async def last_poll(self, task_queue: str, kind: TaskQueueType.ValueType) -> datetime | None:
        """The latest poll of `task_queue` for `kind` tasks the server remembers (5 minutes).

        The root partition's, when it is recent (within POLL_SILENCE less ROOT_SETTLES); else
        the latest of the root's and READ_PARTITIONS - 1 other partitions', asked together.

        Raises:
            RPCError: the server would not say (of the root, or of another partition).
        """
        key = (task_queue, kind)
        if key not in self._asked:
            self._asked[key] = asyncio.ensure_future(self._ask(task_queue, kind))
        return await asyncio.shield(self._asked[key])

    async def silent(self, task_queue: str, kind: TaskQueueType.ValueType) -> bool:
        """No worker has polled `task_queue` for `kind` tasks within POLL_SILENCE.

        On any partition asked (`last_poll`). False when the server would not say.
        """
        try:
            last = await self.last_poll(task_queue, kind)
        except RPCError:
            return False
        return last is None or datetime.now(UTC) - last >= POLL_SILENCE

    async def _ask(self, task_queue: str, kind: TaskQueueType.ValueType) -> datetime | None:
        root = await self._latest_poll(task_queue, kind)
        if root is not None and datetime.now(UTC) - root < POLL_SILENCE - ROOT_SETTLES:
            return root
        # a poll served from a backlog on another partition is not recorded at the root
        others = await asyncio.gather(
            *(
                self._latest_poll(partition_name(task_queue, n), kind)
                for n in range(1, READ_PARTITIONS)
            )
        )
        return max((p for p in (root, *others) if p is not None), default=None)

    async def _latest_poll(self, name: str, kind: TaskQueueType.ValueType) -> datetime | None:
        """The latest poll one partition remembers (legacy mode describes one partition)."""
        with mapped_refusals(self._client, "describe a task queue", "DescribeTaskQueue"):
            response = await self._client.workflow_service.describe_task_queue(
                DescribeTaskQueueRequest(
                    namespace=self._client.namespace,
                    task_queue=TaskQueue(name=name),
                    task_queue_type=kind,
                )
            )
        polls = [
            p.last_access_time.ToDatetime(tzinfo=UTC)
            for p in response.pollers
            if p.HasField("last_access_time")
        ]
        return max(polls, default=None)


def partition_name(task_queue: str, partition: int) -> str:
    """The name the server takes for one of `task_queue`'s partitions other than its root (0).

    Raises:
        ValueError: `partition` is not 1 or more (the root is named by the queue's own name).
    """
    if partition < 1:
        raise ValueError(
            f"partition {partition} of task queue {task_queue!r}: the root (0) "
            "is named by the task queue's own name; others are 1 or more"
        )
    return f"/_sys/{task_queue}/{partition}"


async def waiting_for_worker(
    client: Client,
    description: WorkflowExecutionDescription,
    pollers: TaskQueuePollers | None = None,
) -> WaitingForWorker | None:
    """The run's step that waits for a worker none polls for, or None.

    That is, a step ready WAITING_AFTER and not started, when no worker has polled the
    run's task queue for such steps within POLL_SILENCE. The server is asked about the task
    queue only when a step has waited that long.
    """
    if description.status != WorkflowExecutionStatus.RUNNING:
        return None
    ready = waiting_step(description.raw_description, datetime.now(UTC))
    if ready is None:
        return None
    step, kind, since = ready
    pollers = pollers or TaskQueuePollers(client)
    if not await pollers.silent(description.task_queue, kind):
        return None
    last_poll = await pollers.last_poll(description.task_queue, kind)  # asked once: kept
    return WaitingForWorker(
        task_queue=description.task_queue, step=step, since=since, last_poll=last_poll
    )


def waiting_step(
    raw: DescribeWorkflowExecutionResponse, now: datetime
) -> tuple[str, TaskQueueType.ValueType, datetime] | None:
    """The step ready longest and not started, if it has been ready WAITING_AFTER.

    Its name, the kind of task a worker polls for it, and since when it is ready, from the
    run's `describe()`.
    """
    ready: list[tuple[str, TaskQueueType.ValueType, datetime]] = []
    if raw.HasField("pending_workflow_task"):
        task = raw.pending_workflow_task
        if task.state == PendingWorkflowTaskState.PENDING_WORKFLOW_TASK_STATE_SCHEDULED:
            since = task.scheduled_time.ToDatetime(tzinfo=UTC)
            ready.append((WORKFLOW_TASK, TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW, since))
    for activity in raw.pending_activities:
        if activity.state != PendingActivityState.PENDING_ACTIVITY_STATE_SCHEDULED:
            continue  # started (a slow model), or asked to cancel
        times = []
        if activity.HasField("scheduled_time"):
            times.append(activity.scheduled_time.ToDatetime(tzinfo=UTC))
        if activity.HasField("next_attempt_schedule_time"):
            times.append(activity.next_attempt_schedule_time.ToDatetime(tzinfo=UTC))
        if times:  # in a retry backoff until its next attempt's time
            kind = TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY
            ready.append((activity.activity_type.name, kind, max(times)))
    waited = [r for r in ready if now - r[2] >= WAITING_AFTER]
    return min(waited, key=lambda r: r[2]) if waited else None
