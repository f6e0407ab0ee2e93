"""Retry policies shared by the workflows."""

from __future__ import annotations

from datetime import timedelta

from temporalio.common import RetryPolicy

INFRASTRUCTURE_RETRIES = 20

HEARTBEAT = timedelta(seconds=10)
"""Long activities (LLM calls, tools) heartbeat; a worker that dies is noticed this fast."""

STORE_TIMEOUT = timedelta(seconds=10)
"""A Postgres write that takes longer is retried (e.g. its worker died)."""

STORE_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=10)
)
"""Postgres writes: retried until they land (an outage delays a run, never loses it)."""


def llm_retry_policy(llm_max_attempts: int) -> RetryPolicy:
    """The activity counts LLM failures itself (`max_attempts` in its input); this looser
    cap only stops a step whose infrastructure keeps failing (about ten minutes of outage)."""
    return RetryPolicy(
        initial_interval=timedelta(seconds=1),
        maximum_interval=timedelta(seconds=30),
        maximum_attempts=llm_max_attempts + INFRASTRUCTURE_RETRIES,
    )
