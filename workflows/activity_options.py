"""How long each kind of activity may take and how Temporal retries it: one named option set
per kind, so every activity call in every workflow says which kind it is.

    await workflow.execute_activity(names.RUN_TOOL, arg, **tool_options(agent, 60), summary=…)

- STORE: a Postgres read or write that must land (the transcript, the debrief, a session
  saved); retried until it does, so an outage delays a run and never loses it. Local
  activities take it too. Only data Postgres will never take (a value out of range, a
  violated constraint) fails it at once, as a `StoreDataError` (activities/pg_refusals.py;
  what the workflows then do: workflows/store_refusals.py); a missing table or column (a
  migration not run yet) is retried like an outage.
- SESSION_LOAD: a Postgres read a person waits on (opening a saved session): a few tries,
  then the update fails and says why.
- AGENT_SIGNAL: telling the agent entity about a run (signal-with-start from an activity);
  retried until it lands, so chat never misses a run (data Postgres refuses for good fails
  it at once, as STORE).
- RUN_QUERY: a chat turn's reads of its agent's runs (going, last): RUN_QUERY_ATTEMPTS tries.
- `llm_options(timeout, attempts)`: one LLM call. The activity counts LLM failures against
  `attempts` itself and fails for good on the last one; Temporal's own cap is looser by
  INFRASTRUCTURE_RETRIES, so failures that are not the LLM's (a worker lost mid-call, a
  Postgres outage while recording the reply) do not use up the LLM's attempts.
- `tool_options(agent, tool_timeout)`: one tool call, living at least as long as the
  tool's own timeout and the agent's, plus room to record the result through a short
  Postgres outage.

Workflows replay these options without comparing them, so changing a value here changes only
new attempts, never a recorded decision.
"""

from __future__ import annotations

from datetime import timedelta
from typing import NotRequired, TypedDict

from temporalio.common import RetryPolicy

from reactive_temporal.contracts.run import AgentConfig

INFRASTRUCTURE_RETRIES = 20
"""Attempts an LLM call may spend on failures that are not the LLM's (about ten minutes of
outage at the backoff below) on top of the agent's `llm_max_attempts`."""

RATE_LIMITED_RETRIES = 30
"""Attempts an LLM call may spend waiting out rate limits (activities/llm_errors.py: ten
minutes from its first attempt, each wait at least the last doubled, up to 30 s and a random
half again: about 20 attempts) on top of the others."""

HEARTBEAT = timedelta(seconds=30)
"""Long activities (LLM calls, tools) heartbeat; a worker that dies is noticed this fast.

Not shorter: an attempt whose heartbeats stop is timed out and tried again while its model
call or tool may still be running (a second billed call, a side effect twice), and a
saturated worker's event loop delays its beats. At 1,000 runs on 2 cores 10 s was not
enough (468 duplicate model calls, bench/README.md); the beats come every 10 s, so 20 s of
lag fit. Changes no command: runs scheduled with 10 s replay as they were."""

TOOL_TIMEOUT_MARGIN = timedelta(seconds=30)
"""The tool activity outlives the tool's own timeout by this much, so a slow tool is reported
by the activity (as an observation) rather than by Temporal (as a failed attempt), and a
result is still recorded through a short Postgres outage when the tool took all its time."""
MIN_LLM_TIMEOUT_SECONDS = 1.0
"""An LLM call's timeout is at least this, whatever the agent says (its contract allows any
positive figure, as runs in flight carry it)."""

RUN_QUERY_ATTEMPTS = 5
"""Tries of a chat turn's read of its agent's runs before the turn fails. It was 2: two
workers lost in a row, each attempt timed out after its 15 s, failed the turn (the chaos soak
killed one worker 16 s after another); now four lost in a row, about 90 s, before it says
so, and Postgres or Temporal staying away that long fails it in that time."""

TOOL_ATTEMPTS = 3
"""A tool activity fails only when its result cannot be recorded; it is retried a few times,
and a retry returns a result an earlier attempt recorded rather than running the tool again
(activities/step_records.py)."""


class LocalActivityOptions(TypedDict):
    """What both local and regular activities accept."""

    start_to_close_timeout: timedelta
    retry_policy: RetryPolicy


class ActivityOptions(LocalActivityOptions):
    """Regular activities may also heartbeat."""

    heartbeat_timeout: NotRequired[timedelta]


STORE = LocalActivityOptions(
    start_to_close_timeout=timedelta(seconds=10),
    retry_policy=RetryPolicy(
        initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=10)
    ),
)

SESSION_LOAD = LocalActivityOptions(
    start_to_close_timeout=timedelta(seconds=30),
    retry_policy=RetryPolicy(initial_interval=timedelta(seconds=1), maximum_attempts=5),
)

AGENT_SIGNAL = LocalActivityOptions(
    start_to_close_timeout=timedelta(seconds=15),
    retry_policy=RetryPolicy(
        initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=10)
    ),
)

RUN_QUERY = LocalActivityOptions(
    start_to_close_timeout=timedelta(seconds=15),
    retry_policy=RetryPolicy(
        initial_interval=timedelta(seconds=1),
        maximum_interval=timedelta(seconds=5),
        maximum_attempts=RUN_QUERY_ATTEMPTS,
    ),
)
"""A chat turn's reads of its agent's runs (Temporal's queries, Postgres): safe to repeat."""


def llm_retry_policy(llm_max_attempts: int) -> RetryPolicy:
    """Temporal's cap on an LLM activity: the agent's LLM attempts plus room for
    infrastructure failures and rate limits (the activity stops retrying LLM failures
    itself)."""
    return RetryPolicy(
        initial_interval=timedelta(seconds=1),
        maximum_interval=timedelta(seconds=30),
        maximum_attempts=llm_max_attempts + INFRASTRUCTURE_RETRIES + RATE_LIMITED_RETRIES,
    )


def llm_options(timeout_seconds: float, llm_max_attempts: int) -> ActivityOptions:
    """One LLM call (run step, direct chat, debrief synthesis); pass the same
    `llm_max_attempts` to the activity, which counts LLM failures against it."""
    return ActivityOptions(
        # a configured timeout under a microsecond was no timeout at all to the SDK, which
        # raised in workflow code: the run's task failed for good before its first call
        start_to_close_timeout=timedelta(seconds=max(timeout_seconds, MIN_LLM_TIMEOUT_SECONDS)),
        heartbeat_timeout=HEARTBEAT,
        retry_policy=llm_retry_policy(llm_max_attempts),
    )


def tool_options(agent: AgentConfig, tool_timeout_seconds: float | None = None) -> ActivityOptions:
    """One tool call: the activity lives as long as the longer of the agent's tool timeout and
    the tool's own (`@tool(timeout_seconds=…)`, enforced inside the activity), plus a margin."""
    seconds = max(agent.tool_timeout_seconds, tool_timeout_seconds or 0.0)
    return ActivityOptions(
        start_to_close_timeout=timedelta(seconds=seconds) + TOOL_TIMEOUT_MARGIN,
        heartbeat_timeout=HEARTBEAT,
        retry_policy=RetryPolicy(maximum_attempts=TOOL_ATTEMPTS),
    )
