"""The runs counter's `agent` label is capped per worker process, as the model label is.

Real runs on a worker whose client's runtime serves Prometheus metrics: the counter the
workflow records (`workflow.metric_meter()`) is read from the scrape, as an operator's
Prometheus reads it."""

from __future__ import annotations

import socket
import urllib.request
import uuid

import pytest
from prometheus_client.parser import text_string_to_metric_families
from temporalio.client import Client
from temporalio.runtime import PrometheusConfig, Runtime, TelemetryConfig

from reactive_temporal.config import Settings
from reactive_temporal.contracts import names
from reactive_temporal.embedded.scripted_llm import Reply, ScriptedLLM
from reactive_temporal.telemetry import labels
from tests.workflow.conftest import running_worker


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def runs_by_agent(port: int) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    counts: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == names.RUNS_METRIC:
                agent = sample.labels["agent"]
                counts[agent] = counts.get(agent, 0.0) + sample.value
    return counts


async def test_runs_past_the_cap_of_agents_share_one_label(
    client: Client,
    temporal_address: str,
    settings: Settings,
    llm: ScriptedLLM,
    model_name: str,
    monkeypatch: pytest.MonkeyPatch,
):
    """Whoever starts a run names its agent (one per customer, say): each new name made series
    the worker's exporter kept for good. Past the cap (two here) agents share `(other)`."""
    monkeypatch.setattr(labels.agent_label, "cap", 2)
    llm.script(model_name, [Reply("FINAL ANSWER: done.")], repeat_last=True)
    port = free_port()
    runtime = Runtime(
        telemetry=TelemetryConfig(metrics=PrometheusConfig(bind_address=f"127.0.0.1:{port}"))
    )
    metered = await Client.connect(
        temporal_address, data_converter=client.data_converter, runtime=runtime
    )
    agents = [f"tenant-{uuid.uuid4().hex[:6]}-{i}" for i in range(4)]
    async with running_worker(metered, settings) as harness:
        for agent in agents:
            result = await harness.run(model_name, "Anything.", agent_id=agent, memory=False)
            assert result.success
    counts = runs_by_agent(port)
    assert counts == {agents[0]: 1.0, agents[1]: 1.0, labels.OTHER: 2.0}
