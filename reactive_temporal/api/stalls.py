"""What a running run is stuck on, for `runs` and `progress`.

The step it keeps retrying (an activity, a local activity, or its workflow task), and the
step that waits for a worker none polls for.

The server is asked first, with what one `describe()` already holds; a failing workflow
task's history and a task queue's pollers only when that shows a step failing or waiting.
The run's worker is asked only about a workflow task held long (a local activity retried
under it), and never about a run whose workflow task fails or waits for a worker: it could
not answer, and `runs` would wait out its patience for nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from temporalio.client import (
    Client,
    WorkflowExecutionDescription,
    WorkflowExecutionStatus,
    WorkflowQueryFailedError,
)
from temporalio.service import RPCError

from reactive_temporal.api.failing_tasks import failing_workflow_task
from reactive_temporal.api.retrying_steps import (
    QUERY_PATIENCE_SECONDS,
    heartbeating,
    retrying_activity,
)
from reactive_temporal.api.worker_waits import TaskQueuePollers, waiting_for_worker
from reactive_temporal.contracts.retrying import RetryingStep, WaitingForWorker
from reactive_temporal.contracts.run import RunProgress
from workflows.agent_run import AgentRunWorkflow


@dataclass(frozen=True)
class Stall:
    """What a run is stuck on; both None for a run that moves (or has ended)."""

    retrying: RetryingStep | None = None
    waiting_for_worker: WaitingForWorker | None = None

    def onto(self, progress: RunProgress) -> RunProgress:
        """The run's own `progress` with what the server sees added.

        The server's count of a regular activity's attempts wins over the worker's report;
        the step no worker takes is the server's alone.
        """
        if self.retrying is not None:
            progress.retrying = self.retrying
        progress.waiting_for_worker = self.waiting_for_worker
        return progress


async def server_stall(
    client: Client,
    description: WorkflowExecutionDescription,
    pollers: TaskQueuePollers | None = None,
) -> Stall:
    """What Temporal's server alone tells of the run; no worker is asked.

    Its workflow task failing (first: the run cannot move past it), else the regular activity
    it retries; and the step that waits for a worker none polls for.
    """
    if description.status != WorkflowExecutionStatus.RUNNING:
        return Stall()
    retrying = await failing_workflow_task(client, description)
    if retrying is None:
        retrying = await retrying_activity(client, description)
    return Stall(retrying, await waiting_for_worker(client, description, pollers))


async def run_stall(
    client: Client,
    description: WorkflowExecutionDescription,
    pollers: TaskQueuePollers | None = None,
    *,
    patience: float = QUERY_PATIENCE_SECONDS,
) -> Stall:
    """The server's view, and what the run's worker says it retries.

    The worker is asked only when the server sees nothing and the run's workflow task is held
    long (a local activity retried under it).
    """
    stall = await server_stall(client, description, pollers)
    if stall.retrying is not None or stall.waiting_for_worker is not None:
        return stall
    if not heartbeating(description):
        return stall
    handle = client.get_workflow_handle(description.id, run_id=description.run_id)
    try:
        progress = await handle.query(
            AgentRunWorkflow.progress, rpc_timeout=timedelta(seconds=patience)
        )
    except (RPCError, WorkflowQueryFailedError):
        return stall  # no worker answered: nothing to add to the run's status
    return Stall(progress.retrying)
