"""Re-running a failed run: from its last good point (a Temporal reset), or from the start.

A run that failed on something since mended (an endpoint, a tool, a bug) need not do its
good steps again: `starter.py rerun` resets it to the workflow task that scheduled the
failing step, once the failed attempt's debrief has settled so that nothing it writes lands
over the rerun's; `--from-start` starts a new run with the input the failed one had.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from typing import Any

from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.api.workflowservice.v1 import ResetWorkflowExecutionRequest
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError
from temporalio.service import RPCError

from reactive_temporal.access_calls import mapped_refusals
from reactive_temporal.api.runs import require_run
from reactive_temporal.contracts import names
from reactive_temporal.contracts.run import AgentRunInput
from reactive_temporal.errors import workflow_not_found

log = logging.getLogger("reactive_temporal")

_FAILED = {
    EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED,
    EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT,
    EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_FAILED,
    EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_TIMED_OUT,
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED,
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT,
}


def _scheduled_event_id(event: HistoryEvent) -> int | None:
    for field in (
        "activity_task_failed_event_attributes",
        "activity_task_timed_out_event_attributes",
    ):
        if event.HasField(field):  # type: ignore[arg-type]
            return int(getattr(event, field).scheduled_event_id)
    for field in (
        "child_workflow_execution_failed_event_attributes",
        "child_workflow_execution_timed_out_event_attributes",
    ):
        if event.HasField(field):  # type: ignore[arg-type]
            return int(getattr(event, field).initiated_event_id)
    return None


def reset_point(events: list[HistoryEvent]) -> int:
    """The last good point before a run's failure.

    That is the completed workflow task that scheduled the failing step (so the step runs
    again), else the last one before the end.

    Raises:
        ValueError: the history shows no failure, or no completed workflow task to go back to.
    """
    failure = next((e for e in reversed(events) if e.event_type in _FAILED), None)
    if failure is None:
        raise ValueError("this run has no failed step or failure to re-run from")
    cut = _scheduled_event_id(failure) or failure.event_id
    completed = [
        e.event_id
        for e in events
        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED and e.event_id < cut
    ]
    if not completed:
        raise ValueError(
            "the run failed before its first workflow task completed: use --from-start"
        )
    return completed[-1]


DEBRIEF_SETTLE_SECONDS = 60.0
"""How long a rerun waits for the failed run's debrief to be written before stopping it."""


async def settle_debrief(
    client: Client,
    workflow_id: str,
    *,
    wait: float = DEBRIEF_SETTLE_SECONDS,
    notice: Callable[[str], None] | None = None,
) -> None:
    """Let the run's debrief workflow finish before the run is reset.

    It is waited for up to `wait` seconds, then terminated. Left writing, it wrote the failed
    run's debrief, lessons and last run over the rerun's once the rerun had kept its own, and
    the rerun's own debrief child could not start under the same id.
    """
    handle = client.get_workflow_handle(names.debrief_workflow_id(workflow_id))
    try:
        description = await handle.describe()
    except RPCError as err:
        if workflow_not_found(err):
            return  # memory off, or a debrief kept in the run itself
        raise
    if description.status != WorkflowExecutionStatus.RUNNING:
        return
    running = client.get_workflow_handle(handle.id, run_id=description.run_id)
    if notice is not None:
        notice(f"waiting for the failed run's debrief to be written (up to {wait:.0f} s)")
    try:
        await asyncio.wait_for(running.result(), wait)
    except TimeoutError:
        await running.terminate(reason=f"superseded by a rerun of {workflow_id}")
        log.warning("%s: its debrief took over %.0f s; stopped for the rerun", workflow_id, wait)
    except WorkflowFailureError:
        pass  # it ended; nothing more of it will be written


async def rerun_from_failure(
    client: Client, workflow_id: str, *, notice: Callable[[str], None] | None = None
) -> str:
    """Reset the run to its last good point, once its debrief is settled (`settle_debrief`).

    Returns:
        The new run's Temporal run id.
    """
    handle = client.get_workflow_handle(workflow_id)
    description = await handle.describe()
    if description.status == WorkflowExecutionStatus.RUNNING:
        raise ValueError(f"run {workflow_id!r} is still running")
    history = await handle.fetch_history()
    event_id = reset_point(list(history.events))
    await settle_debrief(client, workflow_id, notice=notice)
    with mapped_refusals(client, "rerun a run from its last good point", "ResetWorkflowExecution"):
        response = await client.workflow_service.reset_workflow_execution(
            ResetWorkflowExecutionRequest(
                namespace=client.namespace,
                workflow_execution=WorkflowExecution(
                    workflow_id=workflow_id, run_id=description.run_id
                ),
                reason="rerun from the last good point (starter.py rerun)",
                workflow_task_finish_event_id=event_id,
                request_id=str(uuid.uuid4()),
            )
        )
    return str(response.run_id)


async def original_input(client: Client, workflow_id: str) -> AgentRunInput:
    """The input a run was started with, decoded with the client's converter."""
    await require_run(client, workflow_id)
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    started = history.events[0].workflow_execution_started_event_attributes
    values: list[Any] = await client.data_converter.decode(started.input.payloads, [AgentRunInput])
    return AgentRunInput.model_validate(values[0])
