"""The metrics port: merged Prometheus text and a health endpoint that follows the worker."""

from __future__ import annotations

import urllib.error
import urllib.request

import pytest

from reactive_temporal.telemetry.endpoint import Health, MetricsEndpoint, metrics_runtime
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
