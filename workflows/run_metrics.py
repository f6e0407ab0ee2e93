"""What a run counts for operators: its start, and its tool calls parked for approval and how
each wait ended.

Counted with `workflow.metric_meter()`, which records nothing while a workflow replays: a run
replayed by every worker that takes it up (after a restart, an eviction, a query) counts once.
A metric is no command, so counting changes nothing a run decides (no patch, and histories
recorded before replay the same). What the meter cannot tell from a first execution is a
workflow task tried again after it failed or timed out: its code runs anew, not replayed, and
counts again (measured: a first task that failed after counting the start, then succeeded,
counted 2), as the runs-ended counter does for its last task. Labels are capped per worker process
(`reactive_temporal.telemetry.labels`): agent ids and tool names are whoever's names.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from reactive_temporal.contracts import names
    from reactive_temporal.telemetry.labels import agent_label, tool_label


def count_run_started(agent_id: str) -> None:
    """The run started (called in its first workflow task, not when it continues as new)."""
    workflow.metric_meter().create_counter(names.RUNS_STARTED_METRIC, "Runs started, by agent").add(
        1, {"agent": agent_label(agent_id)}
    )


def count_approvals_asked(agent_id: str, tools: Iterable[str]) -> None:
    """One tool call parked for approval per name in `tools`."""
    counter = workflow.metric_meter().create_counter(
        names.APPROVALS_ASKED_METRIC, "Tool calls parked for a person's approval"
    )
    agent = agent_label(agent_id)
    for tool in tools:
        counter.add(1, {"agent": agent, "tool": tool_label(tool)})


Decision = Literal["approved", "denied", "timed_out", "abandoned"]
"""`names.APPROVAL_DECISIONS`."""


def count_approvals_decided(agent_id: str, tools: Iterable[str], decision: Decision) -> None:
    """One parked call's wait ended with `decision` per name in `tools`."""
    counter = workflow.metric_meter().create_counter(
        names.APPROVALS_DECIDED_METRIC, "Tool calls parked for approval whose wait ended"
    )
    agent = agent_label(agent_id)
    for tool in tools:
        counter.add(1, {"agent": agent, "tool": tool_label(tool), "decision": decision})
