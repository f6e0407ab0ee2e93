"""How many runs on the worker's task queue wait for a person's approval, as a gauge
(`reactive_temporal_runs_waiting_for_approval{task_queue}`), counted in Temporal's visibility.

A run parked on approvals holds no worker slot and runs no code: nothing on a worker knows it
waits. Counters of approvals asked and decided (workflows/run_metrics.py) cannot say how many
wait either: they live in the process that counted them and start again at 0 with it, and a
wait that began on a worker gone since is in no process's count. The run's search attribute
`WaitingFor = 'approval'` is the truth (the `approvals` command lists runs by it), whichever
worker parked it and however many restarted since: so each worker with a metrics port counts
it for its task queue every COUNT_EVERY_SECONDS, one visibility call, and serves the count.
Every worker of a queue serves the same number: dashboards and rules take the max.

A count that fails (Temporal out of reach, the visibility store slow) keeps the last one and is
logged once until a count succeeds again; the poll failures have alerts of their own.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from reactive_temporal import search_attributes as sa
from reactive_temporal.contracts import names
from reactive_temporal.telemetry.metrics import RUNS_WAITING_FOR_APPROVAL

if TYPE_CHECKING:
    from temporalio.client import Client

log = logging.getLogger(__name__)

COUNT_EVERY_SECONDS = 60.0
"""Between two counts: approvals wait minutes to days, and every worker process of a fleet
counts (one visibility call each a minute)."""


def waiting_for_approval_query(task_queue: str) -> str:
    """The visibility query for `task_queue`'s runs parked on approvals (`approvals` lists
    them with the same conditions: reactive_temporal/api/control.py); ValueError for a queue
    name a query literal cannot hold."""
    if "'" in task_queue or "\\" in task_queue:
        raise ValueError(f"task queue {task_queue!r}: a quote or backslash in a query literal")
    return (
        f"WorkflowType = '{names.AGENT_RUN_WORKFLOW}' AND ExecutionStatus = 'Running' "
        f"AND {sa.WAITING_FOR.name} = 'approval' AND TaskQueue = '{task_queue}'"
    )


class ApprovalWatch:
    """Counts the runs of `task_queue` waiting for approval into the gauge."""

    def __init__(self, task_queue: str, every: float = COUNT_EVERY_SECONDS) -> None:
        self.task_queue = task_queue
        self.every = every
        self.query = waiting_for_approval_query(task_queue)
        self._failing = False

    async def count(self, client: Client) -> int | None:
        """Count once and set the gauge; None (the gauge unchanged) when visibility fails."""
        try:
            counted = (await client.count_workflows(self.query)).count
        except Exception as err:  # RPCError, a client closing: the next count tries again
            if not self._failing:
                log.warning(
                    "could not count the runs waiting for approval on %s (%s); the last count "
                    "is served until one succeeds",
                    self.task_queue,
                    err,
                )
            self._failing = True
            return None
        if self._failing:
            log.info("counting the runs waiting for approval on %s again", self.task_queue)
        self._failing = False
        RUNS_WAITING_FOR_APPROVAL.labels(task_queue=self.task_queue).set(counted)
        return counted

    async def run(self, client_of: Callable[[], Client]) -> None:
        """Count now, then every `every` seconds until cancelled; `client_of()` is the
        worker's client of the moment (credentials renewed replace it)."""
        while True:
            await self.count(client_of())
            await asyncio.sleep(self.every)
