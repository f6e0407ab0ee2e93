"""A step a run keeps trying: what operators see when a run stalls on a failing step.

A run whose LLM endpoint answers 503, whose Postgres is unreachable or refuses writes, or
whose tool result cannot be recorded does not fail: Temporal tries the step again (the LLM
step up to its attempts plus INFRASTRUCTURE_RETRIES, Postgres writes until they land). Until
one lands the run only looks "running"; `RetryingStep` says on what it is stuck, from its
second attempt on (`progress`, `runs`, `RunProgress.retrying`, `RunSummary.retrying`).

The run's workflow task can be the step too (`workflow_task`): a worker whose code cannot
replay the run (a deploy that changed a decision without a patch), an exception the SDK
retries, a payload the worker cannot decode. Temporal tries it again forever, and the run
cannot even answer its `progress` query.

And a run can stall with nothing failing: no worker polls its task queue (all down, or
started on another queue). `WaitingForWorker` says so (`RunProgress.waiting_for_worker`,
`RunSummary.waiting_for_worker`).
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel

LAST_FAILURE_CHARS = 300
"""A step's last failure is shown as one line of at most this many characters."""


class RetryingStep(BaseModel):
    """A step of a run that failed at least once and is being tried again."""

    step: str
    """The activity: `llm_step`, `run_tool`, `record_messages`, `notify_agent`, …; or
    `workflow_task` when the run's workflow task keeps failing."""
    summary: str | None = None
    """What the step does, as the Web UI shows it (`llm · iteration 3 · …`,
    `tool calculator(…)`), when known."""
    attempt: int
    """The attempt under way or next: 2 after one failure. For the LLM step a run waits out
    through a Postgres outage (each time its attempts ran out), the time it is taken next."""
    since: datetime | None = None
    """When the step's first attempt was scheduled: how long the run has been stuck on it.
    For the workflow task, the first of its attempts that failed in a row."""
    last_failure: str | None = None
    """The last failed attempt's error, on one line, clipped to LAST_FAILURE_CHARS. For the
    workflow task, its cause in words and its message's first line (`nondeterminism:
    [TMPRL1100] …`), from the last failure the server recorded: it records the first of a
    streak, not the attempts after it."""
    local: bool = False
    """A local activity (a Postgres write of the run's own): Temporal's Web UI shows those only
    once they land, and the worker that runs them is the only one that knows their attempts."""
    cause: str | None = None
    """Why the workflow task failed, as Temporal names it (`non_deterministic_error`,
    `workflow_worker_unhandled_failure`, …; `timed_out` when no worker finished it in time);
    None for activities."""


WORKFLOW_TASK = "workflow_task"
"""`RetryingStep.step` (and `WaitingForWorker.step`) for the run's workflow task."""


class WaitingForWorker(BaseModel):
    """A run's next step waits for a worker that no longer comes.

    Said only when the step (the workflow task, or an activity out of its retry backoff) has
    been ready and not started for a while AND no worker has polled the run's task queue for
    such steps for longer than a worker's poll lasts: a run whose model is merely slow has its
    step started, and a busy worker polls again as each slot frees.
    """

    task_queue: str
    """The run's task queue, that no worker polls."""
    step: str
    """What waits: `workflow_task`, or the activity (`llm_step`, `run_tool`, …)."""
    since: datetime
    """When the step became ready to start."""
    last_poll: datetime | None = None
    """The last time a worker polled the task queue for such steps; None when the server
    remembers none (it forgets pollers after 5 minutes)."""
