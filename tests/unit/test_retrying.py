"""How a step a run keeps retrying is remembered by its worker and shown to people: one line
for the failure, the attempt under way, a timeout that keeps the error before it, nothing old."""

from __future__ import annotations

import uuid
from datetime import UTC, date, datetime

import pytest

from reactive_temporal import local_retries
from reactive_temporal.cli.run_commands import progress_line, retrying_line
from reactive_temporal.contracts.retrying import LAST_FAILURE_CHARS, RetryingStep
from reactive_temporal.contracts.run import RunProgress
from reactive_temporal.sanitize import one_line

SINCE = datetime(2026, 3, 4, 12, 3, 4, tzinfo=UTC)


def test_a_failure_is_shown_on_one_line_cut_at_its_end():
    assert one_line("HTTP 503:\n  upstream\toverloaded\r\n", 100) == "HTTP 503: upstream overloaded"
    cut = one_line("x" * 500, LAST_FAILURE_CHARS)
    assert len(cut) == LAST_FAILURE_CHARS and cut.endswith("…")


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
