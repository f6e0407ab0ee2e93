"""A step a run keeps trying: what operators see when a run stalls on a failing step.

A run whose LLM endpoint answers 503, whose Postgres is unreachable or refuses writes, or
whose tool result cannot be recorded does not fail: Temporal tries the step again (the LLM
step up to its attempts plus INFRASTRUCTURE_RETRIES, Postgres writes until they land). Until
one lands the run only looks "running"; `RetryingStep` says on what it is stuck, from its
second attempt on (`progress`, `runs`, `RunProgress.retrying`, `RunSummary.retrying`).
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel

LAST_FAILURE_CHARS = 300
"""A step's last failure is shown as one line of at most this many characters."""


class RetryingStep(BaseModel):
    """A step of a run that failed at least once and is being tried again."""

    step: str
    """The activity: `llm_step`, `run_tool`, `record_messages`, `notify_agent`, …"""
    summary: str | None = None
    """What the step does, as the Web UI shows it (`llm · iteration 3 · …`,
    `tool calculator(…)`), when known."""
    attempt: int
    """The attempt under way or next: 2 after one failure. For the LLM step a run waits out
    through a Postgres outage (each time its attempts ran out), the time it is taken next."""
    since: datetime | None = None
    """When the step's first attempt was scheduled: how long the run has been stuck on it."""
    last_failure: str | None = None
    """The last failed attempt's error, on one line, clipped to LAST_FAILURE_CHARS."""
    local: bool = False
    """A local activity (a Postgres write of the run's own): Temporal's Web UI shows those only
    once they land, and the worker that runs them is the only one that knows their attempts."""
