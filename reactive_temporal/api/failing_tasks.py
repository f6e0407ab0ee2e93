"""A run whose workflow task keeps failing, as `progress` and `runs` show it.

A worker whose code cannot replay the run (a deploy that changed a decision without a patch:
`workflows/bugs.py` holds such runs on purpose, rather than failing them), an exception the
SDK retries, a payload the worker cannot decode: Temporal tries the workflow task again
forever, and the run looks "running" while it does nothing. `describe()` counts the attempts
(`pending_workflow_task.attempt`); why they fail is in the history, where the server writes
only the first failure of a streak (`WORKFLOW_TASK_FAILED`, with its `cause` and message) and
none of the attempts after it until one completes.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from temporalio.api.enums.v1 import EventType, TimeoutType, WorkflowTaskFailedCause
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client, WorkflowExecutionDescription
from temporalio.service import RPCError

from reactive_temporal.api.history_tail import events_from_end
from reactive_temporal.contracts.retrying import LAST_FAILURE_CHARS, WORKFLOW_TASK, RetryingStep
from reactive_temporal.sanitize import one_line

CAUSE_PREFIX = "WORKFLOW_TASK_FAILED_CAUSE_"
TIMED_OUT_CAUSE = "timed_out"
"""A workflow task no worker finished in time: a busy worker's, or one that died with it."""
CAUSE_WORDS = {
    "non_deterministic_error": "nondeterminism",
    "workflow_worker_unhandled_failure": "unhandled failure",
    TIMED_OUT_CAUSE: "timed out",
}
"""How a cause reads on a status line; any other is its name in words."""
TIMED_OUT = "no worker finished it within the workflow task timeout (one crashed or hung)"


async def failing_workflow_task(
    client: Client, description: WorkflowExecutionDescription
) -> RetryingStep | None:
    """The run's workflow task, when it has failed and is tried again (attempt >= 2).

    With the cause and first line of its last recorded failure, and since when it has been
    failing. Only then is the history read, from its end: a run whose tasks complete costs
    nothing more than the `describe()` the caller made.
    """
    raw = description.raw_description
    if not raw.HasField("pending_workflow_task") or raw.pending_workflow_task.attempt < 2:
        return None
    attempt = raw.pending_workflow_task.attempt
    try:
        streak = await _failure_streak(client, description)
    except RPCError:
        return RetryingStep(step=WORKFLOW_TASK, attempt=attempt)  # the count still tells
    if streak is None:
        return None  # only moved off the sticky queue of a worker that went away
    cause, text = recorded_failure(streak.latest)
    return RetryingStep(
        step=WORKFLOW_TASK,
        attempt=attempt,
        since=streak.since,
        last_failure=one_line(f"{_words(cause)}: {text}" if cause else text, LAST_FAILURE_CHARS),
        cause=cause,
    )


@dataclass(frozen=True)
class _Streak:
    latest: HistoryEvent
    """The newest recorded failure since the last completed task (a timeout only if none)."""
    since: datetime | None
    """When the first task of the streak that failed was scheduled."""


async def _failure_streak(
    client: Client, description: WorkflowExecutionDescription
) -> _Streak | None:
    """The workflow tasks that failed or timed out since the last one that completed."""
    latest: HistoryEvent | None = None
    first_scheduled_id: int | None = None
    scheduled: dict[int, datetime] = {}
    async for event in events_from_end(client, description.id, description.run_id):
        kind = event.event_type
        if kind == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
            break
        if kind == EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED:
            scheduled[event.event_id] = event.event_time.ToDatetime(tzinfo=UTC)
        elif kind == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED:
            if latest is None or latest.event_type != kind:
                latest = event  # a failure says more than a timeout
            first_scheduled_id = event.workflow_task_failed_event_attributes.scheduled_event_id
        elif kind == EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT:
            attributes = event.workflow_task_timed_out_event_attributes
            if attributes.timeout_type == TimeoutType.TIMEOUT_TYPE_SCHEDULE_TO_START:
                continue  # the sticky queue of a worker that went away: nothing failed
            latest = latest or event
            first_scheduled_id = attributes.scheduled_event_id
    if latest is None:
        return None
    return _Streak(latest, scheduled.get(first_scheduled_id) if first_scheduled_id else None)


def recorded_failure(event: HistoryEvent) -> tuple[str | None, str]:
    """A WORKFLOW_TASK_FAILED (or TIMED_OUT) event's cause and the first line of its message.

    The cause as Temporal names it, lower case (`non_deterministic_error`, …; None when
    unspecified); the message after the failure's type when it has one (`RuntimeError: …`).
    """
    if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT:
        return TIMED_OUT_CAUSE, TIMED_OUT
    attributes = event.workflow_task_failed_event_attributes
    try:
        name = WorkflowTaskFailedCause.Name(attributes.cause)
    except ValueError:  # a cause newer than this client's API
        name = f"{CAUSE_PREFIX}{attributes.cause}"
    cause = name.removeprefix(CAUSE_PREFIX).lower()
    lines = attributes.failure.message.strip().splitlines()
    message = lines[0] if lines else ""
    kind = attributes.failure.application_failure_info.type
    if kind and not message.startswith(kind):
        message = f"{kind}: {message}" if message else kind
    return (None if cause == "unspecified" else cause), message or "(no message)"


def _words(cause: str) -> str:
    return CAUSE_WORDS.get(cause, cause.replace("_", " "))
