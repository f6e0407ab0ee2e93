"""A run's progress as `starter.py progress` and `agent.progress()` show it.

The run's own `progress` query (iteration, tool, tokens, approvals waiting, and the step it
is retrying that only its worker knows of), with the regular activity it is retrying as
Temporal's server sees it (`reactive_temporal.api.retrying_steps`).
"""

from __future__ import annotations

from datetime import timedelta

from temporalio.client import Client, WorkflowExecutionStatus, WorkflowQueryFailedError
from temporalio.service import RPCError

from reactive_temporal.api.operate import require_run
from reactive_temporal.api.retrying_steps import QUERY_PATIENCE_SECONDS, retrying_activity
from reactive_temporal.contracts.retrying import RetryingStep
from reactive_temporal.contracts.run import RunProgress
from workflows.agent_run import AgentRunWorkflow


class ProgressUnavailable(ValueError):
    """No worker answered the run's progress query.

    `retrying` is the step the server sees it retrying, if any (with no worker up, its next
    attempt waits for one).
    """

    def __init__(self, message: str, retrying: RetryingStep | None) -> None:
        """`message` says which run and task queue; `retrying` what the server sees."""
        super().__init__(message)
        self.retrying = retrying


async def run_progress(
    client: Client, run_id: str, *, patience: float = QUERY_PATIENCE_SECONDS
) -> RunProgress:
    """The run's progress; its `retrying` names the step it is stuck on, if any.

    Raises:
        ValueError: no such run, or not an agent run.
        ProgressUnavailable: no worker answered within `patience` seconds.
    """
    description = await require_run(client, run_id)
    running = description.status == WorkflowExecutionStatus.RUNNING
    retrying = await retrying_activity(client, description) if running else None
    handle = client.get_workflow_handle(run_id, run_id=description.run_id)
    try:
        progress = await handle.query(
            AgentRunWorkflow.progress, rpc_timeout=timedelta(seconds=patience)
        )
    except (RPCError, WorkflowQueryFailedError) as err:
        raise ProgressUnavailable(
            f"no worker answered run {run_id!r}'s progress query within {patience:g} s "
            f"(is one running for task queue {description.task_queue!r}?): {err}",
            retrying,
        ) from err
    if retrying is not None:  # the server's count of a regular activity's attempts
        progress.retrying = retrying
    return progress
