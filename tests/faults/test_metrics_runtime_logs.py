"""A worker exporting metrics (`--metrics-port`) logs its core's warnings through Python's
logging, where the worker's filters are (one retry warning a minute, one clear line for a
refusal: hosting/core_log_quiet.py, hosting/refusal_logs.py), not raw to stdout.

Its runtime is its own (telemetry.endpoint.metrics_runtime), not the CLI's default one; here a
worker connected with it loses its server behind a gate, and the core's retry warning must
arrive on the `temporalio.core` logger. Before the fix it went to stdout in colour (11 lines
in 15 s) and never reached the logger.
"""

from __future__ import annotations

import logging
import uuid

import pytest
from temporalio import workflow
from temporalio.client import Client
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from reactive_temporal.telemetry.core_logs import CORE_LOGGER
from reactive_temporal.telemetry.endpoint import metrics_runtime
from tests.conftest import wait_for
from tests.support.tcp_gate import TcpGate

pytestmark = pytest.mark.faults


@workflow.defn(name="test-metrics-runtime-idle")
class Idle:
    @workflow.run
    async def run(self) -> None:
        return None


class Caught(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


async def test_a_metrics_workers_core_warnings_reach_the_python_logger(temporal_address: str):
    gate = await TcpGate(int(temporal_address.rsplit(":", 1)[1])).start()
    caught = Caught()
    core = logging.getLogger(CORE_LOGGER)
    core.addHandler(caught)
    try:
        runtime, _ = metrics_runtime()
        client = await Client.connect(gate.address, runtime=runtime)
        worker = Worker(
            client,
            task_queue=f"metrics-logs-{uuid.uuid4().hex[:8]}",
            workflows=[Idle],
            workflow_runner=UnsandboxedWorkflowRunner(),
        )
        async with worker:
            await wait_for(lambda: worker.is_running, seconds=60)
            gate.shut()  # the server goes away: the core retries its polls, and warns
            await wait_for(
                lambda: any("poll_workflow_task_queue retried" in line for line in caught.lines),
                seconds=60,
            )
            gate.reopen()  # let the worker stop cleanly
    finally:
        core.removeHandler(caught)
        await gate.stop()
