"""A run's progress in one line, and what it is stuck on, for a person watching or on call.

`run` and `progress` print them; pure, so each wording is tested without a run.
"""

from __future__ import annotations

from datetime import UTC, date, datetime

from reactive_temporal.contracts.retrying import WORKFLOW_TASK, RetryingStep, WaitingForWorker
from reactive_temporal.contracts.run import RunProgress


def progress_line(p: RunProgress) -> str:
    """One line of live progress: the iteration in progress (never past the run's real
    count), the tool running, the tokens so far, the step it is stuck retrying, and the one
    that waits for a worker."""
    if p.status != "running":
        ended = f" · ended: {p.terminated_by}" if p.terminated_by else ""
        return f"{p.iteration}/{p.max_iterations} iterations{ended} · {p.tokens:,} tokens"
    tool = f" · tool {p.current_tool}" if p.current_tool else ""
    if p.pending_approvals:
        calls = ", ".join(f"{a.tool} (call {a.call_id})" for a in p.pending_approvals)
        tool = f" · waiting for approval: {calls} (starter.py approve {p.run_id})"
    stuck = "".join(f" · {line}" for line in stall_lines(p.retrying, p.waiting_for_worker))
    return f"iteration {p.current_iteration}/{p.max_iterations}{tool} · {p.tokens:,} tokens{stuck}"


def stall_lines(retrying: RetryingStep | None, waiting: WaitingForWorker | None) -> list[str]:
    """What a run is stuck on, a line each: the step it retries, the step no worker takes."""
    lines = [retrying_line(retrying)] if retrying is not None else []
    return lines + ([waiting_line(waiting)] if waiting is not None else [])


def retrying_line(r: RetryingStep, *, today: date | None = None) -> str:
    """The step a run is stuck on, for a person on call: `retrying llm_step (llm · iteration 1
    · …) attempt 3 since 12:03:04 — LLM endpoint answered HTTP 503: …` (local time; the
    date too when it is not today); its workflow task: `workflow task failing (attempt 7
    since 12:03:04) — nondeterminism: [TMPRL1100] …`."""
    since = f" since {_clock(r.since, today)}" if r.since is not None else ""
    failure = f" — {r.last_failure}" if r.last_failure else ""
    if r.step == WORKFLOW_TASK:
        return f"workflow task failing (attempt {r.attempt}{since}){failure}"
    what = f"{r.step} ({r.summary})" if r.summary else r.step
    return f"retrying {what} attempt {r.attempt}{since}{failure}"


def waiting_line(
    w: WaitingForWorker, *, now: datetime | None = None, today: date | None = None
) -> str:
    """The step no worker takes, for a person on call: `waiting for a worker: no worker has
    polled task queue 'agents' for 95 s (workflow task ready since 12:03:04)`."""
    what = "workflow task" if w.step == WORKFLOW_TASK else w.step
    ready = f"({what} ready since {_clock(w.since, today)})"
    if w.last_poll is None:
        return f"waiting for a worker: no worker polls task queue {w.task_queue!r} {ready}"
    silent = ((now or datetime.now(UTC)) - w.last_poll).total_seconds()
    return (
        f"waiting for a worker: no worker has polled task queue {w.task_queue!r} "
        f"for {_duration(silent)} {ready}"
    )


def _clock(moment: datetime, today: date | None) -> str:
    """Local time, with the date when it is not today."""
    local = moment.astimezone()
    shown = "%H:%M:%S" if local.date() == (today or date.today()) else "%Y-%m-%d %H:%M:%S"
    return local.strftime(shown)


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{max(seconds, 0):.0f} s"
    if seconds < 120 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.0f} h"
