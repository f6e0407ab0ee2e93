"""The local activities this worker process keeps retrying, per workflow run.

A local activity (the run's Postgres writes: `record_messages`, `record_run_events`,
`notify_agent`) is retried inside the worker, between workflow-task heartbeats: Temporal's
server never sees its attempts, so `describe()` lists it nowhere (its `pending_activities`
are regular activities only) and the run looks "running" while its transcript write fails
every ten seconds. The worker that runs it is the only one that knows.

So the worker's activity interceptor (`reactive_temporal.hosting.retry_watch`) notes each
failed attempt here, and forgets the activity once an attempt lands or it fails for good;
the run's `progress` query reads it (`retrying`). A query is answered by the worker that
holds the run in its cache, the one running its local activities; one answered after the
run moved to another worker finds nothing here, and says nothing rather than something old.

Process state, read by a query handler: queries are not recorded and change nothing, so
what they read may differ between workers without breaking a replay.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from datetime import datetime

from reactive_temporal.contracts.retrying import LAST_FAILURE_CHARS, RetryingStep
from reactive_temporal.sanitize import one_line

STALE_SECONDS = 120.0
"""A failure not followed by another attempt's for this long is forgotten: the activity was
abandoned (the run evicted from this worker, the worker's slot lost). The run's retrying
local activities fail at least every 30 s (a 15 s timeout, 10 s backoff at most)."""
MAX_RUNS = 10_000
"""Runs remembered at once; past it the oldest failure is forgotten first."""


@dataclass(frozen=True)
class _Failure:
    activity: str
    attempt: int
    """The attempt that failed."""
    since: datetime
    message: str
    noted_at: float
    """`time.monotonic()` when it failed."""
    cause: str | None = None
    """The last error an attempt raised, kept through the attempts that timed out since: a
    Postgres write waiting for a connection is timed out (10 s) before the pool says why."""


_lock = threading.Lock()  # activities run on the worker's loop, queries in its workflow threads
_failing: dict[str, dict[str, _Failure]] = {}
"""Workflow run id -> activity id -> its last failed attempt."""


def note_failure(
    run_id: str,
    activity_id: str,
    *,
    activity: str,
    attempt: int,
    since: datetime,
    error: str,
    timed_out: bool = False,
) -> None:
    """Attempt `attempt` of the run's local activity failed (raised `error`, or `timed_out`
    with `error` saying after how long); it will be tried again."""
    with _lock:
        activities = _failing.setdefault(run_id, {})
        before = activities.get(activity_id)
        cause = (before.cause if before else None) if timed_out else error
        message = f"{error} (the last error before: {cause})" if timed_out and cause else error
        activities[activity_id] = _Failure(
            activity,
            attempt,
            since,
            one_line(message, LAST_FAILURE_CHARS),
            time.monotonic(),
            cause,
        )
        if len(_failing) > MAX_RUNS:
            oldest = min(_failing, key=lambda r: max(f.noted_at for f in _failing[r].values()))
            del _failing[oldest]


def note_settled(run_id: str, activity_id: str) -> None:
    """The activity landed, or will not be tried again."""
    with _lock:
        activities = _failing.get(run_id)
        if activities is not None:
            activities.pop(activity_id, None)
            if not activities:
                del _failing[run_id]


def retrying(run_id: str) -> RetryingStep | None:
    """The run's local activity that failed most often and is tried again, if any."""
    now = time.monotonic()
    with _lock:
        fresh = [f for f in _failing.get(run_id, {}).values() if now - f.noted_at < STALE_SECONDS]
    if not fresh:
        return None
    worst = max(fresh, key=lambda f: (f.attempt, -f.since.timestamp()))
    return RetryingStep(
        step=worst.activity,
        attempt=worst.attempt + 1,
        since=worst.since,
        last_failure=worst.message,
        local=True,
    )
