"""A fresh worker on a fresh task queue for each workflow test."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import pytest
from temporalio.client import Client, WorkflowHandle

from activities.run_stops import RUN_STOPS
from activities.store import Store
from reactive_temporal.api.agents import Agent
from reactive_temporal.api.run_results import RunResult
from reactive_temporal.config import Settings
from reactive_temporal.contracts.run import AgentConfig
from reactive_temporal.hosting.runtime import Runtime
from reactive_temporal.hosting.worker_factory import AgentWorker
from reactive_temporal.hosting.worker_lifecycle import start_worker_host
from tests.support.plans import Sent, record_statements

pytestmark = pytest.mark.workflow


@dataclass
class Harness:
    client: Client
    task_queue: str
    store: Store
    worker: AgentWorker
    database_url: str | None = None

    def agent(self, model: str, **config: object) -> Agent:
        agent_config = AgentConfig.model_validate(
            {"agent_id": config.pop("agent_id", "test-agent"), "model": model, **config}
        )
        runtime = Runtime(
            self.client, self.task_queue, offline_model=False, database_url=self.database_url
        )
        return Agent(agent_config, runtime)

    async def run(self, model: str, task: str, **config: object) -> RunResult:
        return await self.agent(model, **config).run(task)

    async def start(self, model: str, task: str, **config: object) -> WorkflowHandle:
        return await self.agent(model, **config).start(task)


@asynccontextmanager
async def running_worker(
    client: Client,
    settings: Settings,
    *,
    database_url: str | None = None,
    task_queue: str | None = None,
    **options: Any,
) -> AsyncIterator[Harness]:
    """A worker in this process on a fresh task queue (or `task_queue`, to take over an
    earlier worker's runs), for as long as the block runs.

    By default every workflow task replays its history (`max_cached_workflows=0`), so a
    nondeterministic change shows up in any test.
    """
    options.setdefault("max_cached_workflows", 0)
    task_queue = task_queue or f"test-{uuid.uuid4().hex[:10]}"
    host = await start_worker_host(
        client,
        settings,
        database_url=database_url or settings.database_url or "",
        task_queue=task_queue,
        **options,
    )
    try:
        yield Harness(
            client,
            task_queue,
            host.agent_worker.store,
            host.agent_worker,
            database_url=database_url or settings.database_url,
        )
    finally:
        await host.stop()


@pytest.fixture
async def harness(client: Client, settings: Settings) -> AsyncIterator[Harness]:
    async with running_worker(client, settings) as running:
        yield running


@pytest.fixture
async def cached_harness(client: Client, settings: Settings) -> AsyncIterator[Harness]:
    """A worker with a workflow cache, as in production, for tests the default's replay of
    every task makes slow for nothing they test: long histories (replayed whole at every
    task), and runs started at once when their first task runs a local activity (each run's
    first task evicts the others' while it is in flight, and those tasks time out after 10 s:
    runs started before the first-step-seeds patch, whose `prepare_run` was one)."""
    async with running_worker(client, settings, max_cached_workflows=100) as running:
        yield running


@pytest.fixture
def statements_sent(monkeypatch: pytest.MonkeyPatch) -> Iterator[Sent]:
    """Every statement product code sends while the test runs, with its parameters (the plan
    tests read them: tests/support/plans.py)."""
    yield record_statements(monkeypatch)
    monkeypatch.undo()


@pytest.fixture
def calls_stopped(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Per Temporal run id, how many of its calls in flight this process's board stopped
    (`activities.run_stops.RUN_STOPS`), where a run's wrap-up stops them as the run ends.

    A call that learned of its run's end otherwise (at its next heartbeat, or by ending) was
    gone from the board by then and is not counted: tests tell "stopped with the run" from
    "stopped at its heartbeat" by this, not by a time a loaded machine can stretch.
    """
    counted: dict[str, int] = {}
    stop = RUN_STOPS.stop

    def counting(run_key: str) -> int:
        stopped = stop(run_key)
        counted[run_key] = counted.get(run_key, 0) + stopped
        return stopped

    monkeypatch.setattr(RUN_STOPS, "stop", counting)
    return counted
