"""What a worker process shows operators, set up once per process (`worker`, `dev`).

- With a metrics port (`--metrics-port` or REACTIVE_TEMPORAL_METRICS_PORT): an SDK runtime that
  exports Temporal's worker metrics, and the port's `/metrics` and `/healthz` (telemetry.endpoint).
  The runtime must be the one every client of the worker connects with.
- With OTEL_EXPORTER_OTLP_ENDPOINT (or ..._TRACES_ENDPOINT): tracing (telemetry.tracing), whose
  plugins go on the worker's client.

The worker lifecycle tells it when the worker polls (healthy) and when it drains (not), and
closes it last, after the worker stopped, so the final spans are flushed.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from typing import Any

from temporalio.runtime import Runtime as TemporalRuntime
from temporalio.worker import Worker

from reactive_temporal.config import Settings
from reactive_temporal.telemetry.endpoint import Health, MetricsEndpoint, metrics_runtime
from reactive_temporal.telemetry.tracing import Tracing, setup_tracing


@dataclass
class Observability:
    runtime: TemporalRuntime | None = None
    """The SDK runtime to connect clients with (None: the SDK's default, no metrics)."""
    endpoint: MetricsEndpoint | None = None
    tracing: Tracing = field(default_factory=Tracing)

    @property
    def plugins(self) -> list[Any]:
        return list(self.tracing.plugins)

    @classmethod
    def start(cls, settings: Settings) -> Observability:
        """Metrics when a port is configured, tracing when an OTLP endpoint is; ValueError
        names a port that is taken or a missing `otel` extra."""
        observability = cls(tracing=setup_tracing())
        if settings.metrics_port is not None:
            runtime, sdk_metrics = metrics_runtime()
            observability.runtime = runtime
            observability.endpoint = MetricsEndpoint(settings.metrics_port, sdk_metrics).start()
        return observability

    async def watch(self, worker: Worker, polling: asyncio.Task[None]) -> None:
        """Healthy once the worker polls (it validated its namespace and started pollers)."""
        # The SDK offers no event for "polling now": look every 20 ms.
        while not worker.is_running and not polling.done():  # noqa: ASYNC110
            await asyncio.sleep(0.02)
        if worker.is_running and self.endpoint is not None:
            self.endpoint.health = Health.POLLING

    def draining(self) -> None:
        if self.endpoint is not None:
            self.endpoint.health = Health.DRAINING

    def close(self) -> None:
        self.tracing.shutdown()
        if self.endpoint is not None:
            with contextlib.suppress(Exception):
                self.endpoint.stop()
            self.endpoint = None
