"""What a worker's /metrics exports, as the tests can know it without running one: the series
and labels the alert rules and the Grafana dashboard may select.

- The agent's own metrics are read from `reactive_temporal/telemetry/metrics.py` itself (each
  collector's name, type and label names), so renaming one there changes this set.
- The run, debrief and approval counters the workflows record with `workflow.metric_meter()`
  carry the labels the workflows give them plus the ones the SDK adds to every workflow metric.
- The Postgres pool's series (`metrics.DB_POOL`, a collector read at each scrape) are read from
  what it describes.
- Temporal's SDK metrics (`temporal_*`) cannot be read from code: the ones the rules and the
  dashboard use are declared in `SDK`, and a real worker's scrape must agree with every
  entry it serves (tests/e2e/test_dashboard_series.py), so an SDK upgrade that renames a
  series or a label fails there.

Where the project or the SDK enumerates a label's values (`terminated_by`, `worker_type`), a
selection naming a value outside them is refused too; open labels (`tool`, `model`,
`failure_reason`) take any value.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import get_args

from prometheus_client.metrics import MetricWrapperBase

from activities.memory_redaction import WHERE
from reactive_temporal.contracts import names
from reactive_temporal.contracts.run import TerminatedBy
from reactive_temporal.secret_rules import KINDS
from reactive_temporal.telemetry import metrics
from reactive_temporal.telemetry.pool_metrics import PoolStats
from tests.support.alert_rules import TARGET_LABELS, Selection


@dataclass(frozen=True)
class Series:
    """One sample name a worker serves: its label names, and the values of those the project
    or the SDK enumerates."""

    labels: frozenset[str]
    values: Mapping[str, frozenset[str]] = field(default_factory=dict)


SDK_LABELS = frozenset({"namespace", "service_name", "task_queue"})
"""Labels the SDK puts on every worker metric."""
WORKFLOW_LABELS = SDK_LABELS | {"workflow_type"}
"""…and on every metric a workflow or its activities record."""
ACTIVITY_LABELS = WORKFLOW_LABELS | {"activity_type"}

WORKFLOW_TYPES = frozenset({names.AGENT_RUN_WORKFLOW, names.DEBRIEF_WORKFLOW, names.AGENT_WORKFLOW})
ACTIVITY_TYPES = frozenset(
    {
        names.PREPARE_RUN, names.LLM_STEP, names.RUN_TOOL, names.RECORD_MESSAGES,
        names.SYNTHESIZE_DEBRIEF, names.PERSIST_DEBRIEF, names.CHAT_DIRECT, names.LOAD_SESSION,
        names.SAVE_SESSION, names.READ_RUN_PROGRESS, names.READ_LIVE_RUNS, names.READ_LAST_RUN,
        names.NOTIFY_AGENT, names.RECORD_RUN_EVENTS,
    }
)  # fmt: skip
WORKFLOW_VALUES = {"workflow_type": WORKFLOW_TYPES}
ACTIVITY_VALUES = {**WORKFLOW_VALUES, "activity_type": ACTIVITY_TYPES}

AGENT_VALUES: dict[str, dict[str, frozenset[str]]] = {
    "reactive_temporal_llm_tokens": {"kind": frozenset({"input", "output"})},
    "reactive_temporal_llm_unreported_tokens": {"kind": frozenset({"input", "output"})},
    "reactive_temporal_llm_request_seconds": {
        "outcome": frozenset({"ok", "retryable_error", "error", "cancelled"})
    },
    "reactive_temporal_llm_adaptations": {"kind": frozenset(metrics.ADAPTATIONS)},
    "reactive_temporal_tool_calls": {"outcome": frozenset({"ok", "error", "cancelled"})},
    "reactive_temporal_secrets_redacted": {
        "where": frozenset(WHERE),
        "kind": frozenset(KINDS),
    },
}
"""Values of the agent metrics' enumerated labels (telemetry/observe.py and metrics.py say
which outcomes and kinds they record)."""

WORKFLOW_METER: dict[str, Series] = {
    names.RUNS_METRIC: Series(
        WORKFLOW_LABELS | {"agent", "terminated_by"},
        {"workflow_type": frozenset({names.AGENT_RUN_WORKFLOW}),
         "terminated_by": frozenset(get_args(TerminatedBy))},
    ),
    names.DEBRIEFS_METRIC: Series(
        WORKFLOW_LABELS | {"synthesized"},
        {"workflow_type": frozenset({names.AGENT_RUN_WORKFLOW, names.DEBRIEF_WORKFLOW}),
         "synthesized": frozenset({"true", "false"})},
    ),
    names.RUNS_STARTED_METRIC: Series(  # by the step that seeds the run (its activity meter)
        SDK_LABELS | {"activity_type", "agent"}, {"activity_type": frozenset({names.LLM_STEP})}
    ),
    names.APPROVALS_ASKED_METRIC: Series(
        WORKFLOW_LABELS | {"agent", "tool"},
        {"workflow_type": frozenset({names.AGENT_RUN_WORKFLOW})},
    ),
    names.APPROVALS_DECIDED_METRIC: Series(
        WORKFLOW_LABELS | {"agent", "tool", "decision"},
        {"workflow_type": frozenset({names.AGENT_RUN_WORKFLOW}),
         "decision": frozenset(names.APPROVAL_DECISIONS)},
    ),
}  # fmt: skip
"""The counters the workflows record (workflows/run_metrics.py), and the runs started, which
the LLM step that seeds a run records with the SDK's meter (activities/run_started.py)."""

SDK_COUNTERS: dict[str, Series] = {
    "temporal_worker_task_slots_available": Series(
        SDK_LABELS | {"worker_type"},
        {"worker_type": frozenset(
            {"WorkflowWorker", "ActivityWorker", "LocalActivityWorker", "NexusWorker"}
        )},
    ),
    "temporal_num_pollers": Series(
        SDK_LABELS | {"poller_type"},
        {"poller_type": frozenset(
            {"workflow_task", "sticky_workflow_task", "activity_task", "nexus_task"}
        )},
    ),
    "temporal_sticky_cache_size": Series(SDK_LABELS),
    "temporal_sticky_cache_hit": Series(WORKFLOW_LABELS, WORKFLOW_VALUES),
    "temporal_sticky_cache_total_forced_eviction": Series(SDK_LABELS),
    "temporal_workflow_completed": Series(WORKFLOW_LABELS, WORKFLOW_VALUES),
    "temporal_workflow_task_execution_failed": Series(
        WORKFLOW_LABELS | {"failure_reason"}, WORKFLOW_VALUES
    ),
    "temporal_activity_execution_failed": Series(
        ACTIVITY_LABELS | {"failure_reason"}, ACTIVITY_VALUES
    ),
    "temporal_long_request_failure": Series(SDK_LABELS | {"operation", "status_code"}),
}  # fmt: skip
SDK_COUNTERS["temporal_worker_task_slots_used"] = SDK_COUNTERS[
    "temporal_worker_task_slots_available"
]
SDK_HISTOGRAMS: dict[str, Series] = {
    "temporal_workflow_endtoend_latency": Series(WORKFLOW_LABELS, WORKFLOW_VALUES),
    "temporal_workflow_task_execution_latency": Series(WORKFLOW_LABELS, WORKFLOW_VALUES),
    "temporal_workflow_task_schedule_to_start_latency": Series(SDK_LABELS),
    "temporal_activity_schedule_to_start_latency": Series(SDK_LABELS),
    "temporal_activity_execution_latency": Series(ACTIVITY_LABELS, ACTIVITY_VALUES),
    "temporal_local_activity_execution_latency": Series(ACTIVITY_LABELS, ACTIVITY_VALUES),
}
"""The SDK's metrics the rules and the dashboard read (temporalio's Rust core; its counters
have no `_total`, its durations are milliseconds), with the labels a worker serves them with."""


def _histogram(name: str, series: Series) -> Iterator[tuple[str, Series]]:
    yield f"{name}_count", series
    yield f"{name}_sum", series
    yield f"{name}_bucket", Series(series.labels | {"le"}, series.values)


def _families(collector: object) -> Iterator[tuple[str, str, tuple[str, ...]]]:
    """(name, type, label names) of what a collector of metrics.py serves."""
    # prometheus_client keeps a collector's name, type and label names in these
    if isinstance(collector, MetricWrapperBase):
        name, kind = collector._name, collector._type  # type: ignore[attr-defined]
        yield str(name), str(kind), tuple(collector._labelnames)  # type: ignore[attr-defined]
    elif isinstance(collector, PoolStats):
        for family in collector.describe():
            yield family.name, str(family.type), tuple(family._labelnames)  # type: ignore[attr-defined]


def agent_series() -> dict[str, Series]:
    """The sample names of `reactive_temporal/telemetry/metrics.py`'s collectors."""
    found: dict[str, Series] = {}
    for collector in vars(metrics).values():
        for name, kind, labels in _families(collector):
            series = Series(frozenset(labels), AGENT_VALUES.get(name, {}))
            if kind == "counter":
                found[f"{name}_total"] = series
            elif kind == "histogram":
                found.update(_histogram(name, series))
            elif kind == "gauge":
                found[name] = series
            else:
                raise ValueError(f"{name}: a {kind} the tests do not know how it is served")
    return found


def sdk_series() -> dict[str, Series]:
    """The sample names of the SDK metrics in SDK_COUNTERS and SDK_HISTOGRAMS."""
    found = dict(SDK_COUNTERS)
    for name, series in SDK_HISTOGRAMS.items():
        found.update(_histogram(name, series))
    return found


def exported() -> dict[str, Series]:
    """Every sample name the tests know a worker serves, with its labels."""
    return {**agent_series(), **WORKFLOW_METER, **sdk_series()}


def unexported(selection: Selection, known: Mapping[str, Series]) -> list[str]:
    """What of `selection` is not in `known` (`exported()`), in words (empty when all is)."""
    series = known.get(selection.metric)
    if series is None:
        return [f"{selection.describe()} is not a series a worker exports"]
    problems = [
        f"{selection.describe()} has no label {label!r} (it has {sorted(series.labels)})"
        for label in sorted(selection.labels - TARGET_LABELS - series.labels)
    ]
    problems += [
        f"{selection.describe()}: {label}={value!r} is none of {sorted(series.values[label])}"
        for label, value in selection.values
        if label in series.values and value not in series.values[label]
    ]
    return problems


def disagreements(served: Mapping[str, Mapping[str, set[str]]]) -> list[str]:
    """Where a scrape (`alert_rules.served`) and `exported()` differ: a label served that is
    not declared or declared and not served, a value served outside an enumeration. Series
    the scrape lacks are not compared."""
    problems: list[str] = []
    for name, series in exported().items():
        if name not in served:
            continue
        labels = set(served[name])
        if labels != series.labels:
            problems.append(
                f"{name}: served with labels {sorted(labels)}, declared {sorted(series.labels)}"
            )
        for label, allowed in series.values.items():
            if extra := served[name].get(label, set()) - allowed:
                problems.append(f"{name}: {label} values {sorted(extra)} are not declared")
    return problems
