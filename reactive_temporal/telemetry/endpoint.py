"""The metrics port: `/metrics` for Prometheus and `/healthz` for orchestrators.

`/metrics` serves the SDK runtime's Prometheus text (Temporal's worker metrics, and the run and
debrief counters the workflows record) followed by this process's agent metrics. The SDK's
exporter listens on a loopback port of its own; this server is the one address to scrape.

`/healthz` answers 200 once the worker polls and 503 while it starts or drains, so a load
balancer or Kubernetes stops counting on a worker the moment SIGTERM arrives.
"""

from __future__ import annotations

import enum
import threading
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from temporalio.runtime import PrometheusConfig, Runtime, TelemetryConfig

from reactive_temporal.telemetry.core_logs import core_logging
from reactive_temporal.telemetry.metrics import REGISTRY


class Health(enum.Enum):
    STARTING = "starting"
    POLLING = "polling"
    DRAINING = "draining"
    SERVING = "serving"
    """A process with no worker (the Python API's: `api.process_metrics`): up while it serves."""


def free_loopback_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


SDK_BUCKET_OVERRIDES: dict[str, list[float]] = {
    # the SDK's buckets end at 60 s (60,000 ms): the dashboard's duration of all tools (the
    # `run_tool` activity's) read a p95 of 20 minutes as 60 s. The SDK's own bounds are
    # kept (a query naming one still finds it) and go on to 3,600 s, the longest timeout an
    # agent may give a tool or its model (AgentConfig's tool_ and llm_timeout_seconds).
    "activity_execution_latency": [
        50, 100, 500, 1_000, 5_000, 10_000, 60_000, 120_000, 300_000, 600_000, 1_800_000,
        3_600_000,
    ],
}  # fmt: skip
"""Bucket bounds (ms, as the SDK reports durations) of SDK histograms the worker changes."""


def metrics_runtime() -> tuple[Runtime, str]:
    """An SDK runtime exporting Prometheus metrics on a loopback port; and that port's URL.

    Every client a worker uses must be connected with this runtime (metrics are per runtime).
    Its core logs through Python's logging, as the default runtime's does (telemetry.core_logs).
    """
    address = f"127.0.0.1:{free_loopback_port()}"
    runtime = Runtime(
        telemetry=TelemetryConfig(
            logging=core_logging(),
            metrics=PrometheusConfig(
                bind_address=address, histogram_bucket_overrides=SDK_BUCKET_OVERRIDES
            ),
        )
    )
    return runtime, f"http://{address}/metrics"


MAX_CONNECTIONS = 32
"""Requests served at once; more are closed unanswered (a scraper and a probe need two)."""
REQUEST_TIMEOUT_SECONDS = 5.0
"""A connection that has not sent its request by then is closed."""


class _BoundedServer(ThreadingHTTPServer):
    """A thread per request, at most MAX_CONNECTIONS of them: 2,000 idle connections held a
    thread and a file each for good, and the worker ran out of files (its model calls failed,
    `/healthz` stopped answering)."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler]) -> None:
        super().__init__(address, handler)
        self.slots = threading.BoundedSemaphore(MAX_CONNECTIONS)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self.slots.acquire(blocking=False):
            self.shutdown_request(request)
            return
        super().process_request(request, client_address)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.slots.release()

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that went away: nothing for the worker's log


class MetricsEndpoint:
    """`/metrics` and `/healthz` on `port` (all interfaces), in a thread of its own."""

    def __init__(self, port: int, sdk_metrics_url: str | None, host: str = "0.0.0.0") -> None:
        self.health = Health.STARTING
        self.sdk_metrics_url = sdk_metrics_url
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            timeout = REQUEST_TIMEOUT_SECONDS

            def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
                path = self.path.split("?", 1)[0]
                if path == "/metrics":
                    self._reply(200, endpoint.scrape(), CONTENT_TYPE_LATEST)
                elif path == "/healthz":
                    state = endpoint.health
                    code = 200 if state in (Health.POLLING, Health.SERVING) else 503
                    self._reply(code, f"{state.value}\n".encode(), "text/plain; charset=utf-8")
                else:
                    self._reply(404, b"not found: try /metrics or /healthz\n", "text/plain")

            def _reply(self, code: int, body: bytes, content_type: str) -> None:
                self.send_response(code)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        try:
            self._server = _BoundedServer((host, port), Handler)
        except OSError as err:
            raise ValueError(f"cannot serve metrics on port {port}: {err.strerror}") from err
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def scrape(self) -> bytes:
        sdk = b""
        if self.sdk_metrics_url:
            try:
                with urllib.request.urlopen(self.sdk_metrics_url, timeout=5) as response:
                    sdk = response.read()
            except OSError:
                sdk = b"# the SDK's metrics exporter did not answer\n"
        if sdk and not sdk.endswith(b"\n"):
            sdk += b"\n"
        return sdk + generate_latest(REGISTRY)

    def start(self) -> MetricsEndpoint:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
