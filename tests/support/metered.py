"""A worker whose client's runtime serves Prometheus metrics, and its scrape read as an
operator's Prometheus reads it (tests/workflow/test_run_metrics.py, test_metric_retries.py)."""

from __future__ import annotations

import socket
import urllib.request
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

from prometheus_client.parser import text_string_to_metric_families
from temporalio.client import Client
from temporalio.client import Interceptor as ClientInterceptor
from temporalio.runtime import PrometheusConfig, Runtime, TelemetryConfig

from reactive_temporal.config import Settings
from tests.workflow.conftest import Harness, running_worker


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def samples(text: str, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    """`name`'s samples in a Prometheus scrape: their labels (without the SDK's) → value."""
    sdk = {"namespace", "service_name", "task_queue", "workflow_type", "activity_type"}
    found: dict[tuple[tuple[str, str], ...], float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name:
                key = tuple(sorted((k, v) for k, v in sample.labels.items() if k not in sdk))
                found[key] = found.get(key, 0.0) + sample.value
    return found


class Metered:
    """A worker whose client's runtime serves Prometheus metrics on `port`."""

    def __init__(self, harness: Harness, port: int) -> None:
        self.harness, self.port = harness, port

    def scrape(self, name: str) -> dict[tuple[tuple[str, str], ...], float]:
        url = f"http://127.0.0.1:{self.port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as response:
            return samples(response.read().decode(), name)


@asynccontextmanager
async def metered_worker(
    client: Client,
    temporal_address: str,
    settings: Settings,
    interceptors: Sequence[ClientInterceptor] = (),
) -> AsyncIterator[Metered]:
    """A worker (replaying every task: `running_worker`) on a runtime of its own serving
    /metrics; `interceptors` reach its workflows as a client's do."""
    port = free_port()
    runtime = Runtime(
        telemetry=TelemetryConfig(metrics=PrometheusConfig(bind_address=f"127.0.0.1:{port}"))
    )
    connected = await Client.connect(
        temporal_address,
        data_converter=client.data_converter,
        runtime=runtime,
        interceptors=interceptors,
    )
    async with running_worker(connected, settings) as harness:
        yield Metered(harness, port)
