"""Temporal Cloud billable actions, counted from workflow histories.

The rules of Temporal Cloud's "Actions" page (docs.temporal.io/cloud/actions), applied to
the events a history holds:

- WorkflowExecutionStarted by a client: 1. A child's start is counted at its parent; a start
  by signal-with-start is covered by that signal's 1 ("one total action").
- StartChildWorkflowExecutionInitiated: 2 ("Start Child Workflow", "Child Workflow Execution").
- WorkflowExecutionContinuedAsNew: 1 (the new run's start).
- ActivityTaskStarted: its `attempt` (every attempt is an activity "started or retried").
- MarkerRecorded (local activities, patches): 1 per workflow task that recorded any ("all
  RecordMarkers from each Workflow Task as one action").
- TimerStarted: 1.
- UpsertWorkflowSearchAttributes: 1, unless it only sets `TemporalChangeVersion` (exempt;
  the SDK upserts it for `workflow.patched`).
- WorkflowExecutionSignaled from a client or a signal-with-start: 1; a signal from another
  workflow is counted once, at its sender (SignalExternalWorkflowExecutionInitiated).
- WorkflowExecutionUpdateAccepted, WorkflowExecutionOptionsUpdated: 1.

Not in histories, so not counted here: queries (the benches send none), activity heartbeats
that reach the server (the benches read them from the dev server's metrics), rejected
updates. The dev server's own `action` metric (Prometheus, `--metrics-port`) follows the same
rules on the server side; `ServerMetrics` reads it as a cross-check.
"""

from __future__ import annotations

import re
import urllib.request
from collections import Counter
from collections.abc import Iterable
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHistory

E = EventType


def actions_of(events: Iterable[Any]) -> Counter[str]:
    """Billable actions by kind in these events (one workflow's history, or a slice of it)."""
    out: Counter[str] = Counter()
    marker_tasks: set[int] = set()
    events = list(events)
    for position, e in enumerate(events):
        t = e.event_type
        if t == E.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
            a = e.workflow_execution_started_event_attributes
            by_signal = (
                position + 1 < len(events)
                and events[position + 1].event_type == E.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED
            )
            if not a.HasField("parent_workflow_execution") and not a.continued_execution_run_id:
                if not by_signal:
                    out["workflow started"] += 1
        elif t == E.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED:
            out["child workflow started"] += 2
        elif t == E.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
            out["continue-as-new"] += 1
        elif t == E.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            out["activity attempts"] += max(1, e.activity_task_started_event_attributes.attempt)
        elif t == E.EVENT_TYPE_MARKER_RECORDED:
            marker_tasks.add(e.marker_recorded_event_attributes.workflow_task_completed_event_id)
        elif t == E.EVENT_TYPE_TIMER_STARTED:
            out["timers"] += 1
        elif t == E.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES:
            fields = e.upsert_workflow_search_attributes_event_attributes.search_attributes
            if set(fields.indexed_fields) - {"TemporalChangeVersion"}:
                out["search-attribute upserts"] += 1
        elif t == E.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
            if not e.workflow_execution_signaled_event_attributes.HasField(
                "external_workflow_execution"
            ):
                out["signals"] += 1
        elif t == E.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED:
            out["signals"] += 1
        elif t == E.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
            out["updates"] += 1
        elif t == E.EVENT_TYPE_WORKFLOW_EXECUTION_OPTIONS_UPDATED:
            out["options updated"] += 1
    if marker_tasks:
        out["local activities / markers"] += len(marker_tasks)
    return out


def history_actions(history: WorkflowHistory, after_event: int = 0) -> Counter[str]:
    """Actions in a history, counting only events after `after_event` (for a long-lived
    workflow, e.g. the agent entity, read before and after a batch)."""
    return actions_of(e for e in history.events if e.event_id > after_event)


def count_events(history: WorkflowHistory, after_event: int = 0) -> Counter[str]:
    """Events by type name (e.g. WORKFLOW_TASK_TIMED_OUT)."""
    return Counter(
        EventType.Name(e.event_type).removeprefix("EVENT_TYPE_")
        for e in history.events
        if e.event_id > after_event
    )


class ServerMetrics:
    """The dev server's Prometheus endpoint: its `action` counter and request counts."""

    def __init__(self, port: int) -> None:
        self.url = f"http://127.0.0.1:{port}/metrics"

    def read(self) -> Counter[str]:
        text = urllib.request.urlopen(self.url, timeout=10).read().decode()
        out: Counter[str] = Counter()
        for line in text.splitlines():
            if line.startswith("action{") and 'namespace="default"' in line:
                kind = re.search(r'action_type="([^"]+)"', line)
                if kind:
                    out[f"action:{kind[1]}"] += int(float(line.rsplit(" ", 1)[1]))
            elif line.startswith("service_requests{") and 'service_name="frontend"' in line:
                op = re.search(r'operation="([^"]+)"', line)
                if op and "Heartbeat" in op[1]:
                    out[f"requests:{op[1]}"] += int(float(line.rsplit(" ", 1)[1]))
        return out


def server_action_total(delta: Counter[str]) -> int:
    return sum(v for k, v in delta.items() if k.startswith("action:"))


def heartbeats(delta: Counter[str]) -> int:
    return sum(v for k, v in delta.items() if k.startswith("requests:"))
