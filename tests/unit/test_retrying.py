"""How a step a run keeps retrying is remembered by its worker and shown to people: one line
for the failure, the attempt under way, a timeout that keeps the error before it, nothing old.
And its workflow task failing, and a step waiting for a worker: when it waits (ready long, not
started, out of its backoff), and how it reads."""

from __future__ import annotations

import uuid
from datetime import UTC, date, datetime, timedelta
from typing import cast

import pytest
from google.protobuf.timestamp_pb2 import Timestamp
from temporalio.api.common.v1 import ActivityType
from temporalio.api.enums.v1 import (
    EventType,
    PendingActivityState,
    PendingWorkflowTaskState,
    TaskQueueType,
    WorkflowTaskFailedCause,
)
from temporalio.api.failure.v1 import Failure, ServerFailureInfo
from temporalio.api.history.v1 import HistoryEvent
from temporalio.api.workflow.v1 import PendingActivityInfo, PendingWorkflowTaskInfo
from temporalio.api.workflowservice.v1 import DescribeWorkflowExecutionResponse

from reactive_temporal import local_retries
from reactive_temporal.api.failing_tasks import recorded_failure
from reactive_temporal.api.progress import unanswerable
from reactive_temporal.api.retrying_steps import SIZE_LIMIT_MESSAGE, last_failure_of
from reactive_temporal.api.stalls import Stall
from reactive_temporal.api.worker_waits import (
    POLL_SILENCE,
    ROOT_SETTLES,
    WAITING_AFTER,
    TaskQueuePollers,
    partition_name,
    waiting_step,
)
from reactive_temporal.cli.progress_lines import progress_line, retrying_line, waiting_line
from reactive_temporal.contracts.retrying import (
    LAST_FAILURE_CHARS,
    WORKFLOW_TASK,
    RetryingStep,
    WaitingForWorker,
)
from reactive_temporal.contracts.run import RunProgress
from reactive_temporal.sanitize import one_line

SINCE = datetime(2026, 3, 4, 12, 3, 4, tzinfo=UTC)


def test_a_failure_is_shown_on_one_line_cut_at_its_end():
    assert one_line("HTTP 503:\n  upstream\toverloaded\r\n", 100) == "HTTP 503: upstream overloaded"
    cut = one_line("x" * 500, LAST_FAILURE_CHARS)
    assert len(cut) == LAST_FAILURE_CHARS and cut.endswith("…")


def test_a_failure_the_server_cut_for_its_size_is_shown_by_the_words_it_kept_beneath():
    """A retried activity's last failure past 4 KiB is kept by the server as "Failure exceeds
    size limit." over the original's start (measured on the dev server): its words are what a
    stuck run's progress shows, not the server's."""
    cut = PendingActivityInfo(
        last_failure=Failure(
            message=SIZE_LIMIT_MESSAGE,
            server_failure_info=ServerFailureInfo(non_retryable=True),
            cause=Failure(message="HTTP 502: <html>" + "t" * 4_000),
        )
    )
    assert last_failure_of(cut) == one_line("HTTP 502: <html>" + "t" * 400, LAST_FAILURE_CHARS)
    whole = PendingActivityInfo(last_failure=Failure(message="HTTP 503"))
    assert last_failure_of(whole) == "HTTP 503"
    assert last_failure_of(PendingActivityInfo()) is None


def test_the_worker_remembers_a_local_step_until_it_lands():
    run = f"run-{uuid.uuid4()}"
    assert local_retries.retrying(run) is None
    local_retries.note_failure(
        run,
        "7",
        activity="record_messages",
        attempt=1,
        since=SINCE,
        error="OperationalError: connection refused\nretry",
    )
    assert local_retries.retrying(run) == RetryingStep(
        step="record_messages",
        attempt=2,  # the attempt under way, as the server counts a regular activity's
        since=SINCE,
        last_failure="OperationalError: connection refused retry",
        local=True,
    )
    local_retries.note_settled(run, "7")
    assert local_retries.retrying(run) is None


def test_a_timed_out_attempt_keeps_the_error_before_it():
    run = f"run-{uuid.uuid4()}"
    local_retries.note_failure(
        run,
        "3",
        activity="record_messages",
        attempt=1,
        since=SINCE,
        error="OperationalError: server closed the connection",
    )
    for attempt in (2, 3):
        local_retries.note_failure(
            run,
            "3",
            activity="record_messages",
            attempt=attempt,
            since=SINCE,
            error="timed out after 10 s",
            timed_out=True,
        )
    found = local_retries.retrying(run)
    assert found is not None and found.attempt == 4
    assert found.last_failure == (
        "timed out after 10 s (the last error before: OperationalError: server closed the "
        "connection)"
    )
    local_retries.note_settled(run, "3")


def test_a_failure_no_attempt_followed_is_forgotten(monkeypatch: pytest.MonkeyPatch):
    run = f"run-{uuid.uuid4()}"
    local_retries.note_failure(
        run, "1", activity="notify_agent", attempt=4, since=SINCE, error="boom"
    )
    monkeypatch.setattr(local_retries, "STALE_SECONDS", 0.0)
    assert local_retries.retrying(run) is None  # abandoned (the run left this worker)


def test_the_step_shown_is_the_one_failing_most():
    run = f"run-{uuid.uuid4()}"
    local_retries.note_failure(
        run, "1", activity="record_messages", attempt=1, since=SINCE, error="a"
    )
    local_retries.note_failure(
        run, "2", activity="record_run_events", attempt=5, since=SINCE, error="b"
    )
    found = local_retries.retrying(run)
    assert found is not None and found.step == "record_run_events"
    local_retries.note_settled(run, "2")
    found = local_retries.retrying(run)
    assert found is not None and found.step == "record_messages"


def test_the_line_names_step_attempt_since_and_failure():
    step = RetryingStep(
        step="llm_step",
        summary="llm · iteration 3 · 1.2k tokens so far",
        attempt=4,
        since=SINCE,
        last_failure="LLM endpoint answered HTTP 503",
    )
    local = SINCE.astimezone()
    assert retrying_line(step, today=local.date()) == (
        f"retrying llm_step (llm · iteration 3 · 1.2k tokens so far) attempt 4 since "
        f"{local:%H:%M:%S} — LLM endpoint answered HTTP 503"
    )
    assert f"since {local:%Y-%m-%d %H:%M:%S}" in retrying_line(step, today=date(2030, 1, 1))
    bare = RetryingStep(step="record_messages", attempt=2, local=True)
    assert retrying_line(bare) == "retrying record_messages attempt 2"


def test_the_progress_line_of_a_stuck_run_says_what_it_retries():
    progress = RunProgress(run_id="r", agent_id="a", max_iterations=10)
    assert "retrying" not in progress_line(progress)
    progress.retrying = RetryingStep(step="llm_step", attempt=3, last_failure="HTTP 503")
    assert progress_line(progress).endswith(" · retrying llm_step attempt 3 — HTTP 503")


def test_a_failing_workflow_task_reads_as_such():
    step = RetryingStep(
        step=WORKFLOW_TASK,
        attempt=7,
        since=SINCE,
        last_failure="nondeterminism: [TMPRL1100] Nondeterminism error: …",
        cause="non_deterministic_error",
    )
    local = SINCE.astimezone()
    assert retrying_line(step, today=local.date()) == (
        f"workflow task failing (attempt 7 since {local:%H:%M:%S}) — "
        "nondeterminism: [TMPRL1100] Nondeterminism error: …"
    )
    assert retrying_line(RetryingStep(step=WORKFLOW_TASK, attempt=2)) == (
        "workflow task failing (attempt 2)"
    )


def test_a_step_waiting_for_a_worker_says_how_long_none_polled():
    waiting = WaitingForWorker(
        task_queue="agents", step=WORKFLOW_TASK, since=SINCE, last_poll=SINCE
    )
    local = SINCE.astimezone()
    assert waiting_line(waiting, now=SINCE + timedelta(seconds=95), today=local.date()) == (
        f"waiting for a worker: no worker has polled task queue 'agents' for 95 s "
        f"(workflow task ready since {local:%H:%M:%S})"
    )
    later = waiting_line(waiting, now=SINCE + timedelta(minutes=4, seconds=10))
    assert "for 4 min " in later
    never = waiting.model_copy(update={"step": "llm_step", "last_poll": None})
    assert waiting_line(never, today=local.date()) == (
        f"waiting for a worker: no worker polls task queue 'agents' "
        f"(llm_step ready since {local:%H:%M:%S})"
    )
    progress = RunProgress(run_id="r", agent_id="a", max_iterations=10, waiting_for_worker=never)
    assert " · waiting for a worker: no worker polls task queue 'agents' (" in (
        progress_line(progress)
    )


NOW = datetime(2026, 3, 4, 12, 0, 0, tzinfo=UTC)


def described(*, task: PendingWorkflowTaskInfo | None = None, activities=()):
    raw = DescribeWorkflowExecutionResponse(pending_activities=list(activities))
    if task is not None:
        raw.pending_workflow_task.CopyFrom(task)
    return raw


def at(seconds_ago: float) -> Timestamp:
    stamp = Timestamp()
    stamp.FromDatetime(NOW - timedelta(seconds=seconds_ago))
    return stamp


def activity(
    state: PendingActivityState.ValueType, *, scheduled: float, next_attempt: float | None = None
):
    info = PendingActivityInfo(
        activity_type=ActivityType(name="llm_step"), state=state, scheduled_time=at(scheduled)
    )
    if next_attempt is not None:
        info.next_attempt_schedule_time.CopyFrom(at(next_attempt))
    return info


SCHEDULED_TASK = PendingWorkflowTaskState.PENDING_WORKFLOW_TASK_STATE_SCHEDULED
STARTED_TASK = PendingWorkflowTaskState.PENDING_WORKFLOW_TASK_STATE_STARTED
SCHEDULED = PendingActivityState.PENDING_ACTIVITY_STATE_SCHEDULED
STARTED = PendingActivityState.PENDING_ACTIVITY_STATE_STARTED


def test_a_step_waits_for_a_worker_once_ready_long_and_not_started():
    long = WAITING_AFTER.total_seconds() + 1
    short = WAITING_AFTER.total_seconds() - 1
    task = PendingWorkflowTaskInfo(state=SCHEDULED_TASK, scheduled_time=at(long))
    assert waiting_step(described(task=task), NOW) == (
        WORKFLOW_TASK,
        TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
        NOW - timedelta(seconds=long),
    )
    fresh = PendingWorkflowTaskInfo(state=SCHEDULED_TASK, scheduled_time=at(short))
    assert waiting_step(described(task=fresh), NOW) is None
    held = PendingWorkflowTaskInfo(state=STARTED_TASK, scheduled_time=at(600))
    assert waiting_step(described(task=held), NOW) is None  # a local activity runs long

    thinking = activity(STARTED, scheduled=600)  # a slow model
    assert waiting_step(described(activities=[thinking]), NOW) is None
    backing_off = activity(SCHEDULED, scheduled=600, next_attempt=-30)  # its retry in 30 s
    assert waiting_step(described(activities=[backing_off]), NOW) is None
    backed_off = activity(SCHEDULED, scheduled=600, next_attempt=long)
    assert waiting_step(described(activities=[backed_off]), NOW) == (
        "llm_step",
        TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY,
        NOW - timedelta(seconds=long),
    )
    both = described(task=task, activities=[activity(SCHEDULED, scheduled=long + 5)])
    longest = waiting_step(both, NOW)
    assert longest is not None and longest[0] == "llm_step"  # ready the longest


def test_a_task_queue_s_other_partitions_are_named_as_the_server_takes_them():
    """The server's names for partitions 1 and up (it refuses `/_sys/<queue>/0`: the root is
    the queue's own name), and a root poll trusted only while it cannot turn silent soon."""
    assert partition_name("agents", 1) == "/_sys/agents/1"
    with pytest.raises(ValueError, match=r"partition 0 of task queue 'agents'"):
        partition_name("agents", 0)
    assert timedelta(0) < ROOT_SETTLES < POLL_SILENCE - timedelta(seconds=55)


def test_a_recorded_workflow_task_failure_reads_cause_then_first_line():
    failed = HistoryEvent(event_type=EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED)
    attributes = failed.workflow_task_failed_event_attributes
    attributes.cause = WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_PAYLOADS_TOO_LARGE
    attributes.failure.message = "payload of 3 MB exceeds the limit\ndetails"
    assert recorded_failure(failed) == ("payloads_too_large", "payload of 3 MB exceeds the limit")
    attributes.cause = WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_UNSPECIFIED
    attributes.failure.message = ""
    attributes.failure.application_failure_info.type = "KeyError"
    assert recorded_failure(failed) == (None, "KeyError")
    timed_out = HistoryEvent(event_type=EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT)
    cause, text = recorded_failure(timed_out)
    assert cause == "timed_out" and "workflow task timeout" in text


async def test_a_workflow_task_that_timed_out_is_not_taken_for_one_that_fails():
    """A loaded worker too slow with an agent's first workflow task (it timed out, attempt 2)
    made a chat turn sent meanwhile refused as if the task kept failing ("nondeterminism
    after a deploy: roll back"): one that timed out is handed out again and answers."""
    pollers = cast(TaskQueuePollers, None)  # not asked: nothing waits for a worker
    slow = RetryingStep(step=WORKFLOW_TASK, attempt=2, cause="timed_out")
    assert await unanswerable("run-1", Stall(retrying=slow), "q", pollers) is None
    broken = RetryingStep(step=WORKFLOW_TASK, attempt=2, cause="non_deterministic_error")
    said = await unanswerable("run-1", Stall(retrying=broken), "q", pollers)
    assert said is not None and said.startswith("its workflow task keeps failing (attempt 2)")
