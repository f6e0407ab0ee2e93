"""A run's progress as `starter.py progress` and `agent.progress()` show it.

The run's own `progress` query (iteration, tool, tokens, approvals waiting, and the step it
is retrying that only its worker knows of), with what Temporal's server sees of it
(`reactive_temporal.api.stalls`): the regular activity it retries, its workflow task failing,
the step no worker takes.

The query is not sent when the server already shows no worker can answer it: a workflow task
that keeps failing (the server refuses queries then, or the worker fails them as it fails
the task), or one that waits for a worker none polls for (the query would wait out
`patience` for nothing).
"""

from __future__ import annotations

from datetime import timedelta

from temporalio.api.enums.v1 import TaskQueueType
from temporalio.client import Client, WorkflowQueryFailedError
from temporalio.service import RPCError

from reactive_temporal.api.failing_tasks import TIMED_OUT_CAUSE
from reactive_temporal.api.retrying_steps import QUERY_PATIENCE_SECONDS
from reactive_temporal.api.runs import require_run
from reactive_temporal.api.stalls import Stall, server_stall
from reactive_temporal.api.worker_waits import TaskQueuePollers
from reactive_temporal.contracts.retrying import WORKFLOW_TASK, RetryingStep, WaitingForWorker
from reactive_temporal.contracts.run import RunProgress
from workflows.agent_run import AgentRunWorkflow


class ProgressUnavailable(ValueError):
    """No worker answered the run's progress query, or none could.

    `retrying` is the step the server sees it retrying, if any (with no worker up, its next
    attempt waits for one; `workflow_task` when its workflow task keeps failing), and
    `waiting_for_worker` the step that no worker takes.
    """

    def __init__(
        self,
        message: str,
        retrying: RetryingStep | None,
        waiting_for_worker: WaitingForWorker | None = None,
    ) -> None:
        """`message` says which run, why, and what to look at; the rest what the server sees."""
        super().__init__(message)
        self.retrying = retrying
        self.waiting_for_worker = waiting_for_worker


async def run_progress(
    client: Client,
    run_id: str,
    *,
    patience: float = QUERY_PATIENCE_SECONDS,
    pollers: TaskQueuePollers | None = None,
) -> RunProgress:
    """The run's progress, with what it is stuck on.

    Its `retrying` names the step it is stuck on, if any, and its `waiting_for_worker` the
    step no worker takes. `pollers` is shared by a caller asking many runs (most are on one
    task queue: asked once).

    Raises:
        ValueError: no such run, or not an agent run.
        ProgressUnavailable: no worker answered within `patience` seconds, or none can (the
            run's workflow task keeps failing, or no worker polls its task queue).
    """
    description = await require_run(client, run_id)
    pollers = pollers or TaskQueuePollers(client)
    stall = await server_stall(client, description, pollers)
    queue = description.task_queue
    if (why := await unanswerable(run_id, stall, queue, pollers)) is not None:
        raise ProgressUnavailable(
            f"run {run_id!r} cannot answer its progress query: {why}",
            stall.retrying,
            stall.waiting_for_worker,
        )
    handle = client.get_workflow_handle(run_id, run_id=description.run_id)
    try:
        progress = await handle.query(
            AgentRunWorkflow.progress, rpc_timeout=timedelta(seconds=patience)
        )
    except (RPCError, WorkflowQueryFailedError) as err:
        # its workflow task may have failed since it was described: look again
        stall = await server_stall(client, await require_run(client, run_id), pollers)
        raise ProgressUnavailable(
            f"no worker answered run {run_id!r}'s progress query within {patience:g} s "
            f"(is one running for task queue {queue!r}?): {err}",
            stall.retrying,
            stall.waiting_for_worker,
        ) from err
    return stall.onto(progress)


async def unanswerable(
    run_id: str, stall: Stall, task_queue: str, pollers: TaskQueuePollers
) -> str | None:
    """Why no worker can answer the run's query now, as the server shows it; None if one may."""
    retrying = stall.retrying
    if retrying is not None and retrying.step == WORKFLOW_TASK:
        if retrying.cause != TIMED_OUT_CAUSE:
            return task_failing(run_id, retrying.attempt)
        # one that timed out was taken by a worker too busy to finish it in time (or that
        # died with it): it is handed out again and answers. Taken for one failing, a chat
        # turn to an agent whose first task a loaded worker was slow with was refused.
    waiting = stall.waiting_for_worker
    if waiting is None:
        return None
    kind = TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW
    if waiting.step == WORKFLOW_TASK or await pollers.silent(task_queue, kind):
        return no_worker_polls(task_queue)
    return None  # an activity waits, but a worker runs the run's workflow tasks


def task_failing(run_id: str, attempt: int | None = None) -> str:
    """The cause when the run's workflow task keeps failing (at `attempt`, when known)."""
    at = f" (attempt {attempt})" if attempt is not None else ""
    return (
        f"its workflow task keeps failing{at}: a worker whose code cannot replay it "
        "(nondeterminism after a deploy: roll back, or check with "
        f"`starter.py replay {run_id}`), a bug, or a payload it cannot decode"
    )


def no_worker_polls(task_queue: str) -> str:
    """The cause when no worker polls the run's task queue."""
    return (
        f"no worker polls its task queue {task_queue!r} (all down, or started for another "
        "task queue: TEMPORAL_TASK_QUEUE)"
    )
