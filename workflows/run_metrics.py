"""What the workflows count for operators: a run's end (and a debrief kept), its tool calls
parked for approval and how each wait ended, a debrief persisted.

Counted with `workflow.metric_meter()`, which records nothing while a workflow replays: a run
replayed by every worker that takes it up (after a restart, an eviction, a query) counts once.
A metric is no command, so counting changes nothing a run decides (no patch, and histories
recorded before replay the same). What the meter cannot tell from a first execution is a
workflow task tried again after it failed or timed out after counting: its code runs anew,
not replayed (measured: a run's last task that failed once after counting its end counted
it 2). So each count is keyed (the workflow execution's run id and what it counts) and added
only the first time this worker process meets the key (`reactive_temporal.telemetry.
counted_once`): exact while the try again lands on the same worker, at most once per worker
otherwise. A run's start is counted where it is exact, by the LLM step that seeds the run
(activities/run_started.py). Labels are capped per worker process
(`reactive_temporal.telemetry.labels`): agent ids and tool names are whoever's names.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from reactive_temporal.contracts import names
    from reactive_temporal.telemetry.counted_once import COUNTED
    from reactive_temporal.telemetry.labels import agent_label, tool_label


def first_count(*key: str) -> bool:
    """Whether this execution counts `key` now: not while it replays (the meter would not
    record it), and not again in a workflow task tried again on this worker."""
    if workflow.unsafe.is_replaying():
        return False
    return COUNTED.first(workflow.info().run_id, *key)


def count_run_ended(agent_id: str, terminated_by: str, *, debrief_kept: bool) -> None:
    """The run ended with `terminated_by` (and kept its deterministic debrief itself)."""
    if not first_count(names.RUNS_METRIC):
        return
    meter = workflow.metric_meter()
    meter.create_counter(names.RUNS_METRIC, "Runs finished, by agent and how they ended").add(
        1, {"agent": agent_label(agent_id), "terminated_by": terminated_by}
    )
    if debrief_kept:
        meter.create_counter(names.DEBRIEFS_METRIC, "Debriefs persisted").add(
            1, {"synthesized": "false"}
        )


def count_debrief_persisted(synthesized: bool) -> None:
    """A DebriefWorkflow persisted its run's debrief."""
    if first_count(names.DEBRIEFS_METRIC):
        workflow.metric_meter().create_counter(
            names.DEBRIEFS_METRIC, "Debriefs persisted, synthesized by the LLM or not"
        ).add(1, {"synthesized": "true" if synthesized else "false"})


def count_approvals_asked(agent_id: str, turn: int, calls: Iterable[tuple[str, str]]) -> None:
    """One tool call parked for approval per (call id, tool name) in `calls`, in the run's
    `turn` (a call id is unique within a turn; a model may use it again in the next)."""
    counter = workflow.metric_meter().create_counter(
        names.APPROVALS_ASKED_METRIC, "Tool calls parked for a person's approval"
    )
    agent = agent_label(agent_id)
    for call_id, tool in calls:
        if first_count(names.APPROVALS_ASKED_METRIC, str(turn), call_id):
            counter.add(1, {"agent": agent, "tool": tool_label(tool)})


Decision = Literal["approved", "denied", "timed_out", "abandoned"]
"""`names.APPROVAL_DECISIONS`."""


def count_approvals_decided(
    agent_id: str, turn: int, calls: Iterable[tuple[str, str]], decision: Decision
) -> None:
    """One parked call's wait ended with `decision` per (call id, tool name) in `calls`, in
    the run's `turn`."""
    counter = workflow.metric_meter().create_counter(
        names.APPROVALS_DECIDED_METRIC, "Tool calls parked for approval whose wait ended"
    )
    agent = agent_label(agent_id)
    for call_id, tool in calls:
        if first_count(names.APPROVALS_DECIDED_METRIC, str(turn), call_id):
            counter.add(1, {"agent": agent, "tool": tool_label(tool), "decision": decision})
