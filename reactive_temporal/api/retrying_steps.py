"""The step a running run is stuck retrying, as `progress` and `runs` show it.

Two places know, and each sees what the other cannot:

- Temporal's server, for regular activities (the LLM step, tool calls): `describe()` lists
  them in `pending_activities` with their attempt and last failure, whether or not a worker
  is up. Their first attempt's time and summary are in the history (`ActivityTaskScheduled`).
- The run's worker, for local activities (the run's Postgres writes) and for its waits for
  Postgres: the `progress` query's `retrying` (`reactive_temporal.local_retries`). The server
  shows only a workflow task that stays in flight, heartbeating, while one is retried.

The run's workflow task failing is `reactive_temporal.api.failing_tasks`'s, and
`reactive_temporal.api.stalls` puts them together, with the step waiting for a worker.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from temporalio.api.enums.v1 import EventType, PendingWorkflowTaskState
from temporalio.api.history.v1 import HistoryEvent
from temporalio.api.workflow.v1 import PendingActivityInfo
from temporalio.client import Client, WorkflowExecutionDescription
from temporalio.service import RPCError

from reactive_temporal.api.history_tail import events_from_end
from reactive_temporal.contracts.retrying import LAST_FAILURE_CHARS, RetryingStep
from reactive_temporal.sanitize import one_line

QUERY_PATIENCE_SECONDS = 10.0
"""How long a worker may take to answer a run's `progress` query. A run retrying a local
activity answers at its next workflow-task heartbeat: every 8 s (80% of the 10 s workflow
task timeout), so up to that long."""
HEARTBEATING_AFTER = timedelta(seconds=10)
"""A workflow task in flight this long is being heartbeated: a local activity runs long
(the workflow task timeout is 10 s)."""


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
        last_failure=last_failure_of(worst),
    )


def heartbeating(description: WorkflowExecutionDescription) -> bool:
    """The run's workflow task is in flight past HEARTBEATING_AFTER, at its first attempt.

    Its worker heartbeats it so while a local activity runs long.
    """
    raw = description.raw_description
    if not raw.HasField("pending_workflow_task"):
        return False
    task = raw.pending_workflow_task
    if task.state != PendingWorkflowTaskState.PENDING_WORKFLOW_TASK_STATE_STARTED:
        return False
    if task.attempt > 1:
        return False  # failing, not heartbeated (`api.failing_tasks`)
    began = task.original_scheduled_time.ToDatetime(tzinfo=UTC)
    return datetime.now(UTC) - began > HEARTBEATING_AFTER


SIZE_LIMIT_MESSAGE = "Failure exceeds size limit."
"""What Temporal's server keeps of a failure past its limit, a `ServerError` over the
original's start: for a retried activity's last failure, past 4 KiB
(`limit.mutableStateActivityFailureSize.error`; a failure within the project's failure
budget can be more)."""


def last_failure_of(pending: PendingActivityInfo) -> str | None:
    """The activity's last failure, on one line.

    Under the server's SIZE_LIMIT_MESSAGE, the words of the original it keeps beneath.
    """
    if not pending.HasField("last_failure"):
        return None
    failure = pending.last_failure
    if (
        failure.HasField("server_failure_info")
        and failure.message == SIZE_LIMIT_MESSAGE
        and failure.HasField("cause")
    ):
        failure = failure.cause
    text = failure.message or failure.application_failure_info.type
    return one_line(text, LAST_FAILURE_CHARS) if text else None


async def _scheduled_event(
    client: Client, description: WorkflowExecutionDescription, activity_id: str
) -> HistoryEvent | None:
    """The activity's `ActivityTaskScheduled` event, read from the end of the history."""
    try:
        async for event in events_from_end(client, description.id, description.run_id):
            if (
                event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
                and event.activity_task_scheduled_event_attributes.activity_id == activity_id
            ):
                return event
    except RPCError:
        pass  # the attempt and failure still say what matters
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
