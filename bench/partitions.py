"""Who sees a worker's polls on a task queue served in partitions, as production serves it.

`describe_task_queue` (legacy mode) tells of one partition, the root; a self-hosted cluster
serves each task queue in 4 (`matching.numTaskqueueReadPartitions`, the dev server's default
too). A dev server of its own, with the 4 partitions said outright, and a bare worker on a
fresh task queue, in two scenarios:

- idle: the SDK's default pollers, no work;
- saturated: one activity slot, calls of `--call-seconds`, a backlog that outlasts the watch.

Every 3 s the activity queue's last poll is read as: the root (legacy mode); each other
partition (`/_sys/<queue>/<n>`); the ENHANCED mode (`report_pollers`); and the project's
`TaskQueuePollers` (the root, then the other partitions when the root's is old). Printed per
scenario: the oldest each view's last poll got while the worker ran, and how many reads each
would have called silent (older than POLL_SILENCE, 75 s). The worker never stops polling, so
every silent read is a false one.

    .venv/bin/python -m bench.partitions [--quick] [--seconds S] [--call-seconds C]
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from tempfile import TemporaryDirectory

from temporalio import activity, workflow
from temporalio.api.enums.v1 import DescribeTaskQueueMode, TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue, TaskQueueVersionSelection
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from bench._stack import log, machine, parser, print_table, run
from reactive_temporal.api.worker_waits import POLL_SILENCE, TaskQueuePollers, partition_name
from reactive_temporal.embedded.dev_server import DevServer

ACTIVITY = TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY
PARTITIONS = 4
EVERY_SECONDS = 3.0


@activity.defn(name="call")
async def call(seconds: float) -> str:
    await asyncio.sleep(seconds)
    return "done"


@workflow.defn(name="OneCall")
class OneCall:
    @workflow.run
    async def run(self, seconds: float) -> str:
        return await workflow.execute_activity(
            call, seconds, start_to_close_timeout=timedelta(seconds=300)
        )


@dataclass
class Watch:
    """The oldest last poll each view showed, and how many reads it would call silent."""

    oldest: dict[str, float] = field(default_factory=dict)
    silent: dict[str, int] = field(default_factory=dict)
    landed: set[int] = field(default_factory=set)
    reads: int = 0

    def saw(self, view: str, last: datetime | None, now: datetime) -> None:
        age = (now - last).total_seconds() if last is not None else float("inf")
        self.oldest[view] = max(self.oldest.get(view, 0.0), age)
        silent = age >= POLL_SILENCE.total_seconds()
        self.silent[view] = self.silent.get(view, 0) + int(silent)


async def latest(client: Client, name: str) -> datetime | None:
    response = await client.workflow_service.describe_task_queue(
        DescribeTaskQueueRequest(
            namespace=client.namespace, task_queue=TaskQueue(name=name), task_queue_type=ACTIVITY
        )
    )
    return max((p.last_access_time.ToDatetime(tzinfo=UTC) for p in response.pollers), default=None)


async def enhanced(client: Client, queue: str) -> datetime | None:
    response = await client.workflow_service.describe_task_queue(
        DescribeTaskQueueRequest(
            namespace=client.namespace,
            task_queue=TaskQueue(name=queue),
            api_mode=DescribeTaskQueueMode.DESCRIBE_TASK_QUEUE_MODE_ENHANCED,
            versions=TaskQueueVersionSelection(unversioned=True),
            task_queue_types=[ACTIVITY],
            report_pollers=True,
        )
    )
    polls = [
        p.last_access_time.ToDatetime(tzinfo=UTC)
        for info in response.versions_info.values()
        for kind, typed in info.types_info.items()
        if kind == ACTIVITY
        for p in typed.pollers
    ]
    return max(polls, default=None)


async def watch(client: Client, queue: str, seconds: float) -> Watch:
    seen = Watch()
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        await asyncio.sleep(EVERY_SECONDS)
        now = datetime.now(UTC)
        root = await latest(client, queue)
        others = [await latest(client, partition_name(queue, n)) for n in range(1, PARTITIONS)]
        every = [p for p in (root, *others) if p is not None]
        seen.saw("root (legacy mode)", root, now)
        seen.saw("all 4 partitions, the latest", max(every, default=None), now)
        seen.saw("ENHANCED mode, report_pollers", await enhanced(client, queue), now)
        seen.saw("TaskQueuePollers", await TaskQueuePollers(client).last_poll(queue, ACTIVITY), now)
        freshest = max(every, default=None)
        if freshest is not None:  # where the latest poll was recorded
            seen.landed |= {n for n, p in enumerate((root, *others)) if p == freshest}
        seen.reads += 1
    return seen


async def scenario(client: Client, saturated: bool, seconds: float, call_seconds: float) -> Watch:
    queue = f"parts-{uuid.uuid4().hex[:8]}"
    async with Worker(
        client,
        task_queue=queue,
        workflows=[OneCall],
        activities=[call],
        workflow_runner=UnsandboxedWorkflowRunner(),
        max_concurrent_activities=1 if saturated else None,  # None: the SDK's default
        disable_eager_activity_execution=True,
    ):
        if saturated:
            for n in range(int(seconds / call_seconds) + 5):
                await client.start_workflow(
                    OneCall.run, call_seconds, id=f"{queue}-{n}", task_queue=queue
                )
        return await watch(client, queue, seconds)


async def main() -> None:
    p = parser(__doc__ or "")
    p.add_argument("--seconds", type=float, default=None, help="each scenario's watch")
    p.add_argument("--call-seconds", type=float, default=20.0, help="a saturated call's time")
    args = p.parse_args()
    seconds = args.seconds or (45.0 if args.quick else 130.0)
    print(f"{machine()} · {PARTITIONS} partitions · watched {seconds:g} s each\n")
    with TemporaryDirectory() as directory:
        settings = [
            f"matching.numTaskqueueReadPartitions={PARTITIONS}",
            f"matching.numTaskqueueWritePartitions={PARTITIONS}",
        ]
        extra = [arg for s in settings for arg in ("--dynamic-config-value", s)]
        server = DevServer(
            db_file=None, log_file=Path(directory) / "temporal.log", extra_args=extra
        )
        client = await server.start()
        try:
            for saturated in (False, True):
                name = (
                    f"saturated (1 slot, {args.call_seconds:g} s calls, a backlog)"
                    if saturated
                    else "idle (SDK default pollers)"
                )
                log(name)
                seen = await scenario(client, saturated, seconds, args.call_seconds)
                print(f"### {name}: {seen.reads} reads\n")
                landed = ", ".join(str(n) for n in sorted(seen.landed))
                print(f"The latest poll was recorded on partitions {landed} (0 is the root).\n")
                print_table(
                    ["view", "oldest last poll, s", f"reads silent (>= {POLL_SILENCE.seconds} s)"],
                    [[v, f"{age:.1f}", seen.silent[v]] for v, age in seen.oldest.items()],
                )
                print()
        finally:
            await server.stop()


if __name__ == "__main__":
    run(main)
