"""The agent's Prometheus metrics, recorded once per real event.

LLM and tool metrics are recorded inside the activity, at the moment the call to the model or
the tool really happens: a workflow replay never runs an activity again, and a step that
returns a recorded reply instead of calling again records nothing. Runs, debriefs and
approvals are counted by the workflows with `workflow.metric_meter()` (skipped during replay)
under the names below, and reach `/metrics` through the SDK runtime's Prometheus exporter.
The Postgres pool's series are read from psycopg_pool at each scrape (`pool_metrics`); the
runs waiting for approval are counted by the worker in Temporal's visibility
(hosting/approval_watch.py).
"""

from __future__ import annotations

from collections.abc import Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from reactive_temporal.contracts.names import (
    APPROVALS_ASKED_METRIC,
    APPROVALS_DECIDED_METRIC,
    DEBRIEFS_METRIC,
    RUNS_METRIC,
    RUNS_STARTED_METRIC,
)
from reactive_temporal.telemetry.labels import model_label, tool_label
from reactive_temporal.telemetry.pool_metrics import PoolStats

RUNS_TOTAL = RUNS_METRIC
"""Workflow-side counter {agent, terminated_by}: one per finished run (agents past
`labels.MAX_LABELS` as `labels.OTHER`)."""
DEBRIEFS_TOTAL = DEBRIEFS_METRIC
"""Workflow-side counter {synthesized}: one per debrief persisted."""
RUNS_STARTED_TOTAL = RUNS_STARTED_METRIC
"""Workflow-side counter {agent}: one per run started (not again when it continues as new)."""
APPROVALS_ASKED_TOTAL = APPROVALS_ASKED_METRIC
"""Workflow-side counter {agent, tool}: one per tool call parked for approval."""
APPROVALS_DECIDED_TOTAL = APPROVALS_DECIDED_METRIC
"""Workflow-side counter {agent, tool, decision}: one per parked call's wait ended
(`names.APPROVAL_DECISIONS`)."""

REGISTRY = CollectorRegistry(auto_describe=True)
"""This process's agent metrics (each worker process has its own, like the SDK's)."""

LLM_TOKENS = Counter(
    "reactive_temporal_llm_tokens",
    "Tokens used by LLM calls, as reported by the endpoint.",
    ["model", "kind"],
    registry=REGISTRY,
)
LLM_COST = Counter(
    "reactive_temporal_llm_cost_usd",
    "Estimated cost of LLM calls in US dollars (AGENT_MODEL_PRICES or the built-in table).",
    ["model"],
    registry=REGISTRY,
)
LLM_UNREPORTED_TOKENS = Counter(
    "reactive_temporal_llm_unreported_tokens",
    "Tokens estimated for LLM requests that ended without the endpoint reporting usage "
    "(stopped with their run, timed out, or cut off mid-reply): the provider may bill them.",
    ["model", "kind"],
    registry=REGISTRY,
)
LLM_UNREPORTED_COST = Counter(
    "reactive_temporal_llm_unreported_cost_usd",
    "Estimated cost in US dollars of the tokens in reactive_temporal_llm_unreported_tokens.",
    ["model"],
    registry=REGISTRY,
)
LLM_REQUEST_SECONDS = Histogram(
    "reactive_temporal_llm_request_seconds",
    "Duration of LLM requests, by outcome (ok, retryable_error, error, cancelled).",
    ["model", "outcome"],
    # a step may wait for its model as long as the agent's llm_timeout_seconds (up to 3,600 s:
    # a reasoning model's long answer takes minutes); past the last bucket a quantile reads
    # as that bucket's bound, so buckets that stopped at 300 s drew a 20-minute p95 as 300
    buckets=(0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40, 60, 120, 300, 600, 1200, 1800, 3600),
    registry=REGISTRY,
)
LLM_ADAPTATIONS = Counter(
    "reactive_temporal_llm_adaptations",
    "What the worker did about a model endpoint's quirks, by kind: parameter_left_out, "
    "shape_learned, thinks_learned (each once per model and worker), calls_in_text, "
    "harmony_in_text, unread_text_calls, tool_name_unwrapped, prompt_count_low, "
    "refused_calls_read (each reply): a steady rate names an endpoint to configure.",
    ["model", "kind"],
    registry=REGISTRY,
)
ADAPTATIONS = (
    "parameter_left_out",
    "shape_learned",
    "thinks_learned",
    "calls_in_text",
    "harmony_in_text",
    "unread_text_calls",
    "tool_name_unwrapped",
    "prompt_count_low",
    "refused_calls_read",
)
TEMPORAL_CERT_EXPIRY = Gauge(
    "reactive_temporal_temporal_client_cert_expiry_timestamp_seconds",
    "When the client certificate this process connects to Temporal with expires (Unix "
    "time): alert well before it, as on any certificate (hosting/cert_expiry.py).",
    registry=REGISTRY,
)
TOOL_CALLS = Counter(
    "reactive_temporal_tool_calls",
    "Tool calls executed, by outcome (ok, error, cancelled).",
    ["tool", "outcome"],
    registry=REGISTRY,
)
TOOL_SECONDS = Histogram(
    "reactive_temporal_tool_seconds",
    "Duration of tool executions that ended (ok or error; not those cancelled), by tool.",
    ["tool"],
    # a tool may run as long as its agent's tool timeout (up to 3,600 s) or its own
    buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600),
    registry=REGISTRY,
)
RUNS_WAITING_FOR_APPROVAL = Gauge(
    "reactive_temporal_runs_waiting_for_approval",
    "Runs on this worker's task queue parked on tool calls waiting for a person, as Temporal's "
    "visibility counts them (WaitingFor = 'approval'; every worker of the queue serves the "
    "same count: take the max, not the sum).",
    ["task_queue"],
    registry=REGISTRY,
)
DB_POOL = PoolStats()
"""The worker's Postgres pool(s), `reactive_temporal_db_pool_*{pool}` (`pool_metrics`)."""
REGISTRY.register(DB_POOL)
SECRETS_REDACTED = Counter(
    "reactive_temporal_secrets_redacted",
    "Credentials replaced by a marker where text enters or leaves the agents' memory "
    "(reactive_temporal/secrets_scan.py), by where (synthesis, debrief, last_run, lessons, "
    "earlier_debrief, live_runs, chat) and kind: a key a tool read reached a debrief or lesson.",
    ["where", "kind"],
    registry=REGISTRY,
)


def record_llm_call(
    model: str,
    *,
    outcome: str,
    seconds: float,
    input_tokens: int = 0,
    output_tokens: int = 0,
    cost_usd: float = 0.0,
) -> None:
    """One request to the model that really went out (not a recorded reply)."""
    model = model_label(model)
    LLM_REQUEST_SECONDS.labels(model=model, outcome=outcome).observe(max(seconds, 0.0))
    if input_tokens > 0:
        LLM_TOKENS.labels(model=model, kind="input").inc(input_tokens)
    if output_tokens > 0:
        LLM_TOKENS.labels(model=model, kind="output").inc(output_tokens)
    if cost_usd > 0:
        LLM_COST.labels(model=model).inc(cost_usd)


def record_unreported_usage(
    model: str, *, input_tokens: int, output_tokens: int, cost_usd: float
) -> None:
    """Estimated usage of one request that went out and ended without its usage."""
    model = model_label(model)
    LLM_UNREPORTED_TOKENS.labels(model=model, kind="input").inc(max(input_tokens, 0))
    LLM_UNREPORTED_TOKENS.labels(model=model, kind="output").inc(max(output_tokens, 0))
    LLM_UNREPORTED_COST.labels(model=model).inc(max(cost_usd, 0.0))


def record_adaptation(model: str, kind: str) -> None:
    """The worker adapted to what `model`'s endpoint does (`ADAPTATIONS`)."""
    LLM_ADAPTATIONS.labels(model=model_label(model), kind=kind).inc()


def record_tool_call(tool: str, *, outcome: str, seconds: float | None = None) -> None:
    """One execution of a tool: ok, error (an error observation counts), or cancelled (its
    run stopped, or the worker); and how long one that ended ran."""
    tool = tool_label(tool)
    TOOL_CALLS.labels(tool=tool, outcome=outcome).inc()
    if seconds is not None and outcome != "cancelled":
        TOOL_SECONDS.labels(tool=tool).observe(max(seconds, 0.0))


def record_redactions(where: str, kinds: Mapping[str, int]) -> None:
    """Credentials of these kinds (`secrets_scan.KINDS`, a bounded set) replaced in `where`."""
    for kind, count in kinds.items():
        SECRETS_REDACTED.labels(where=where, kind=kind).inc(count)
