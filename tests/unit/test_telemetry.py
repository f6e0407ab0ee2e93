"""The metrics port: merged Prometheus text and a health endpoint that follows the worker."""

from __future__ import annotations

import socket
import threading
import time
import urllib.error
import urllib.request

import pytest

from reactive_temporal.telemetry import labels, metrics
from reactive_temporal.telemetry.endpoint import (
    MAX_CONNECTIONS,
    REQUEST_TIMEOUT_SECONDS,
    Health,
    MetricsEndpoint,
    metrics_runtime,
)
from reactive_temporal.telemetry.metrics import record_llm_call, record_tool_call
from reactive_temporal.telemetry.tracing import tracing_configured


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


@pytest.fixture
def endpoint():
    runtime, sdk_url = metrics_runtime()
    runtime.metric_meter.create_counter("sdk_side_probe_total").add(3, {"worker": "w1"})
    served = MetricsEndpoint(0, sdk_url, host="127.0.0.1").start()
    yield served
    served.stop()


def test_healthz_is_200_only_while_polling(endpoint):
    base = f"http://127.0.0.1:{endpoint.port}"
    assert get(f"{base}/healthz") == (503, "starting\n")
    endpoint.health = Health.POLLING
    assert get(f"{base}/healthz") == (200, "polling\n")
    endpoint.health = Health.DRAINING
    assert get(f"{base}/healthz") == (503, "draining\n")
    assert get(f"{base}/nothing")[0] == 404


def test_metrics_serves_the_sdk_runtime_and_the_agent_metrics(endpoint):
    record_llm_call(
        "unit-model", outcome="ok", seconds=1.5, input_tokens=100, output_tokens=20, cost_usd=0.25
    )
    record_tool_call("unit-tool", outcome="error")
    status, text = get(f"http://127.0.0.1:{endpoint.port}/metrics")
    assert status == 200
    assert 'sdk_side_probe_total{service_name="temporal-core-sdk",worker="w1"} 3' in text
    assert 'reactive_temporal_llm_tokens_total{kind="input",model="unit-model"} 100.0' in text
    assert 'reactive_temporal_llm_tokens_total{kind="output",model="unit-model"} 20.0' in text
    assert 'reactive_temporal_llm_cost_usd_total{model="unit-model"} 0.25' in text
    assert (
        'reactive_temporal_llm_request_seconds_count{model="unit-model",outcome="ok"} 1.0' in text
    )
    assert 'reactive_temporal_tool_calls_total{outcome="error",tool="unit-tool"} 1.0' in text


def test_a_taken_port_is_a_clear_error(endpoint):
    with pytest.raises(ValueError, match=f"cannot serve metrics on port {endpoint.port}"):
        MetricsEndpoint(endpoint.port, None, host="127.0.0.1")


@pytest.mark.parametrize(
    ("environ", "on"),
    [
        ({}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, True),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}, True),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": " "}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "true"}, False),
    ],
)
def test_tracing_is_on_when_an_otlp_endpoint_is_set(environ, on):
    assert tracing_configured(environ) is on


def test_the_image_healthcheck_follows_healthz(endpoint):
    from reactive_temporal.telemetry.healthcheck import check

    env = {"REACTIVE_TEMPORAL_METRICS_PORT": str(endpoint.port)}
    assert check(env) == "/healthz answered 503"
    endpoint.health = Health.POLLING
    assert check(env) is None
    endpoint.stop()
    assert "did not answer" in (check(env) or "")


def test_idle_connections_hold_neither_threads_nor_the_port_for_long(endpoint):
    """2,000 connections that never finish their request held a thread and a file each for
    good: the worker ran out of files. At most MAX_CONNECTIONS are served at once, each for
    at most REQUEST_TIMEOUT_SECONDS without its request."""
    before = threading.active_count()
    idle = [socket.create_connection(("127.0.0.1", endpoint.port)) for _ in range(100)]
    try:
        for connection in idle:
            connection.sendall(b"GET /healthz HTTP/1.1\r\n")  # and never the rest
        time.sleep(0.5)
        assert threading.active_count() - before <= MAX_CONNECTIONS
        time.sleep(REQUEST_TIMEOUT_SECONDS + 1)
        assert get(f"http://127.0.0.1:{endpoint.port}/healthz") == (503, "starting\n")
    finally:
        for connection in idle:
            connection.close()


def test_a_span_names_at_most_a_model_name_s_worth_of_what_the_endpoint_said():
    """The response's `model` is the endpoint's to say: 4 MB of it on every span, held in the
    export queue while the collector was down, grew the worker 230 MB in 40 calls."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from reactive_temporal.telemetry.tracing import MODEL_MAX_CHARS, LlmSpan

    exported = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exported))
    span = provider.get_tracer("test").start_span("chat m")
    LlmSpan(span).record_usage(input_tokens=1, output_tokens=1, response_model="m" * 4_000_000)
    span.end()
    [finished] = exported.get_finished_spans()
    assert finished.attributes is not None
    assert finished.attributes["gen_ai.response.model"] == "m" * MODEL_MAX_CHARS


def test_llm_series_name_at_most_max_labels_models(monkeypatch):
    """Whoever starts a run names its model: past MAX_LABELS names, the rest share one
    label, so a worker's scrape stops growing (each name made series for good)."""
    monkeypatch.setattr(labels.model_label, "seen", set())
    names = [f"made-up-model-{i}" for i in range(labels.MAX_LABELS + 50)]
    for name in names:
        record_llm_call(name, outcome="ok", seconds=0.1, input_tokens=3, output_tokens=1)
        metrics.record_unreported_usage(name, input_tokens=1, output_tokens=1, cost_usd=0.0)
    labelled = {
        sample.labels["model"]
        for family in metrics.REGISTRY.collect()
        for sample in family.samples
        if sample.labels.get("model", "").startswith("made-up-model-")
        or sample.labels.get("model") == labels.OTHER
    }
    assert labelled == {*names[: labels.MAX_LABELS], labels.OTHER}
    record_llm_call(names[0], outcome="ok", seconds=0.1)  # a name seen before keeps its own
    assert labels.model_label(names[0]) == names[0]


def sample_value(name: str, **wanted: str) -> float:
    """A sample of the agent's registry, 0.0 when absent."""
    return sum(
        sample.value
        for family in metrics.REGISTRY.collect()
        for sample in family.samples
        if sample.name == name and all(sample.labels.get(k) == v for k, v in wanted.items())
    )


def test_a_tool_s_duration_is_observed_by_tool_unless_it_was_cancelled():
    """Tools run up to their timeout (an agent's goes to 3,600 s): the SDK's run_tool latency
    has no tool label and stops at 60 s, so a slow tool hid among quick ones."""
    tool = "unit-duration-tool"
    record_tool_call(tool, outcome="ok", seconds=0.2)
    record_tool_call(tool, outcome="error", seconds=1500.0)
    record_tool_call(tool, outcome="cancelled", seconds=9.0)  # cut short: not its duration
    assert sample_value("reactive_temporal_tool_seconds_count", tool=tool) == 2
    assert sample_value("reactive_temporal_tool_seconds_sum", tool=tool) == pytest.approx(1500.2)
    assert sample_value("reactive_temporal_tool_seconds_bucket", tool=tool, le="0.25") == 1
    assert sample_value("reactive_temporal_tool_seconds_bucket", tool=tool, le="1800.0") == 2
    assert sample_value("reactive_temporal_tool_calls_total", tool=tool, outcome="cancelled") == 1


def test_observing_a_tool_call_times_it():
    from reactive_temporal.telemetry.observe import observe_tool_call

    with observe_tool_call("unit-observed-tool") as call:
        time.sleep(0.05)
        call.failed()
    assert sample_value("reactive_temporal_tool_seconds_count", tool="unit-observed-tool") == 1
    assert sample_value("reactive_temporal_tool_seconds_sum", tool="unit-observed-tool") >= 0.05
    assert (
        sample_value(
            "reactive_temporal_tool_calls_total", tool="unit-observed-tool", outcome="error"
        )
        == 1
    )


def test_tool_series_name_at_most_max_labels_tools(monkeypatch):
    """An MCP server may list hundreds of tools: past MAX_LABELS the rest share one label."""
    monkeypatch.setattr(labels.tool_label, "seen", set())
    tools = [f"mcp-tool-{i}" for i in range(labels.MAX_LABELS + 5)]
    for tool in tools:
        record_tool_call(tool, outcome="ok", seconds=0.01)
    labelled = {
        sample.labels["tool"]
        for family in metrics.REGISTRY.collect()
        for sample in family.samples
        if sample.name == "reactive_temporal_tool_seconds_count"
        and (sample.labels["tool"].startswith("mcp-tool-") or sample.labels["tool"] == labels.OTHER)
    }
    assert labelled == {*tools[: labels.MAX_LABELS], labels.OTHER}


def test_the_approval_decisions_counted_are_the_ones_named():
    from typing import get_args

    from reactive_temporal.contracts import names
    from workflows.run_metrics import Decision

    assert get_args(Decision) == names.APPROVAL_DECISIONS


def test_the_runs_waiting_for_approval_are_counted_on_the_worker_s_queue_only():
    from reactive_temporal.hosting.approval_watch import waiting_for_approval_query

    query = waiting_for_approval_query("billing-agents")
    assert "WaitingFor = 'approval'" in query
    assert "ExecutionStatus = 'Running'" in query
    assert "TaskQueue = 'billing-agents'" in query
    with pytest.raises(ValueError, match="quote"):
        waiting_for_approval_query("it's")
