"""A run's start, counted by the LLM step that seeds its transcript (`activities.run_seed`).

The run's own code cannot count its start exactly: a first workflow task that failed or
timed out after counting (a crash, a slow worker, a bug) is tried again anew, not replayed,
and counted again (measured: 2 for one run; tests/workflow/test_metric_retries.py). The seed
is written once per run, idempotently, and the attempt that writes it counts the start:
exactly once, but for an attempt that dies between the write and the count (its process's
counts die with it). So a run counts as started when its first LLM step began, not when its
workflow did: a run refused before that step (tools the worker lacks, input over the limits)
or stopped before it (a cancel, its deadline) ends without having started. Runs that
continue as new seed nothing and count nothing again.

Recorded with `activity.metric_meter()`, on the same exporter as the workflows' counters.
"""

from __future__ import annotations

from temporalio import activity

from reactive_temporal.contracts import names
from reactive_temporal.telemetry.labels import agent_label


def count_run_started(agent_id: str) -> None:
    """The run of `agent_id` was seeded now."""
    activity.metric_meter().create_counter(
        names.RUNS_STARTED_METRIC, "Runs started (their first LLM step began), by agent"
    ).add(1, {"agent": agent_label(agent_id)})
