"""The step a running run is stuck retrying, as `progress` and `runs` show it.

Two places know, and each sees what the other cannot:

- Temporal's server, for regular activities (the LLM step, tool calls): `describe()` lists
  them in `pending_activities` with their attempt and last failure, whether or not a worker
  is up. Their first attempt's time and summary are in the history (`ActivityTaskScheduled`).
- The run's worker, for local activities (the run's Postgres writes) and for its waits for
  Postgres: the `progress` query's `retrying` (`reactive_temporal.local_retries`). The server
  shows only a workflow task that stays in flight, heartbeating, while one is retried.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.enums.v1 import EventType, PendingWorkflowTaskState
from temporalio.api.history.v1 import HistoryEvent
from temporalio.api.workflow.v1 import PendingActivityInfo
from temporalio.api.workflowservice.v1 import GetWorkflowExecutionHistoryReverseRequest
from temporalio.client import (
    Client,
    WorkflowExecutionDescription,
    WorkflowExecutionStatus,
    WorkflowQueryFailedError,
)
from temporalio.service import RPCError

from reactive_temporal.contracts.retrying import LAST_FAILURE_CHARS, RetryingStep
from reactive_temporal.sanitize import one_line
from workflows.agent_run import AgentRunWorkflow

QUERY_PATIENCE_SECONDS = 10.0
"""How long a worker may take to answer a run's `progress` query. A run retrying a local
activity answers at its next workflow-task heartbeat: every 8 s (80% of the 10 s workflow
task timeout), so up to that long."""
HEARTBEATING_AFTER = timedelta(seconds=10)
"""A workflow task in flight this long is being heartbeated: a local activity runs long
(the workflow task timeout is 10 s)."""
HISTORY_PAGE = 200
HISTORY_PAGES = 5
"""How far back from the end `since` is looked for: a retrying activity was scheduled by one
of the run's last workflow tasks, a few events back."""


async def retrying_activity(
    client: Client, description: WorkflowExecutionDescription
) -> RetryingStep | None:
    """The run's regular activity with the most attempts, from its second attempt on."""
    pending = [p for p in description.raw_description.pending_activities if p.attempt > 1]
    if not pending:
        return None
    worst = max(pending, key=lambda p: p.attempt)
    scheduled = await _scheduled_event(client, description, worst.activity_id)
    return RetryingStep(
        step=worst.activity_type.name,
        summary=await _summary(client, scheduled) if scheduled else None,
        attempt=worst.attempt,
        since=scheduled.event_time.ToDatetime(tzinfo=UTC) if scheduled else None,
        last_failure=_last_failure(worst),
    )


async def retrying_step(
    client: Client,
    description: WorkflowExecutionDescription,
    *,
    patience: float = QUERY_PATIENCE_SECONDS,
) -> RetryingStep | None:
    """The step a running run is stuck retrying, or None.

    A regular activity's as the server sees it; else, when its workflow task is being
    heartbeated (a local activity running long), what its worker says. The worker is asked
    only then: a run without one would keep its caller waiting `patience` seconds for nothing.
    """
    if description.status != WorkflowExecutionStatus.RUNNING:
        return None
    found = await retrying_activity(client, description)
    if found is not None or not _heartbeating(description):
        return found
    handle = client.get_workflow_handle(description.id, run_id=description.run_id)
    try:
        progress = await handle.query(
            AgentRunWorkflow.progress, rpc_timeout=timedelta(seconds=patience)
        )
    except (RPCError, WorkflowQueryFailedError):
        return None  # no worker answered: nothing to add to the run's status
    return progress.retrying


def _heartbeating(description: WorkflowExecutionDescription) -> bool:
    raw = description.raw_description
    if not raw.HasField("pending_workflow_task"):
        return False
    task = raw.pending_workflow_task
    if task.state != PendingWorkflowTaskState.PENDING_WORKFLOW_TASK_STATE_STARTED:
        return False
    began = task.original_scheduled_time.ToDatetime(tzinfo=UTC)
    return datetime.now(UTC) - began > HEARTBEATING_AFTER


def _last_failure(pending: PendingActivityInfo) -> str | None:
    if not pending.HasField("last_failure"):
        return None
    failure = pending.last_failure
    text = failure.message or failure.application_failure_info.type
    return one_line(text, LAST_FAILURE_CHARS) if text else None


async def _scheduled_event(
    client: Client, description: WorkflowExecutionDescription, activity_id: str
) -> HistoryEvent | None:
    """The activity's `ActivityTaskScheduled` event, read from the end of the history."""
    token = b""
    for _ in range(HISTORY_PAGES):
        try:
            page = await client.workflow_service.get_workflow_execution_history_reverse(
                GetWorkflowExecutionHistoryReverseRequest(
                    namespace=client.namespace,
                    execution=WorkflowExecution(
                        workflow_id=description.id, run_id=description.run_id
                    ),
                    maximum_page_size=HISTORY_PAGE,
                    next_page_token=token,
                )
            )
        except RPCError:
            return None  # the attempt and failure still say what matters
        for event in page.history.events:
            if (
                event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
                and event.activity_task_scheduled_event_attributes.activity_id == activity_id
            ):
                return event
        token = page.next_page_token
        if not token:
            return None
    return None


async def _summary(client: Client, event: HistoryEvent) -> str | None:
    """The activity's summary (`llm · iteration 3 · …`), decoded with the client's converter.

    None when it has none or this client cannot read it (an encryption key).
    """
    if not event.user_metadata.HasField("summary"):
        return None
    try:
        values = await client.data_converter.decode([event.user_metadata.summary], [str])
    except Exception:
        return None
    return one_line(values[0], LAST_FAILURE_CHARS) if values and values[0] else None
