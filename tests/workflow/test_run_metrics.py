"""The series an on-call engineer watches runs and approvals with, on a real dev server and
Postgres, read from a worker's Prometheus scrape as an operator's Prometheus reads them.

- Runs ended and approvals asked and decided are counted by the workflows with the SDK's
  metric meter, runs started by the step that seeds them: the worker here replays every
  workflow task from history (`max_cached_workflows=0`, as a worker that restarted or lost
  its cache does; every `progress` query replays too), its model's first answer is a 503
  (the step retried), and a run continues as new after each iteration: each run and each
  approval is still counted once.
- The runs waiting for approval are counted in Temporal's visibility
  (hosting/approval_watch.py), which holds whichever worker parked them.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from temporalio.client import Client
from temporalio.common import SearchAttributePair, TypedSearchAttributes

from reactive_temporal import search_attributes as sa
from reactive_temporal.config import Settings
from reactive_temporal.contracts import names
from reactive_temporal.contracts.run import AgentConfig, AgentRunInput, RunProgress
from reactive_temporal.embedded.scripted_llm import HttpError, Reply, ScriptedLLM, call
from reactive_temporal.hosting.approval_watch import ApprovalWatch
from reactive_temporal.telemetry import metrics
from tests.conftest import wait_for
from tests.support.metered import Metered, metered_worker
from tests.workflow.conftest import Harness
from workflows.agent_run import AgentRunWorkflow

pytestmark = pytest.mark.workflow


@pytest.fixture
async def metered(
    client: Client, temporal_address: str, settings: Settings
) -> AsyncIterator[Metered]:
    async with metered_worker(client, temporal_address, settings) as metered:
        yield metered


async def parked(harness: Harness, run_id: str, calls: int = 1) -> RunProgress:
    """Once the run waits for approval of `calls` calls (each poll is a query: a replay)."""
    handle = harness.client.get_workflow_handle(run_id)
    found: list[RunProgress] = []

    async def waiting() -> bool:
        progress: RunProgress = await handle.query(AgentRunWorkflow.progress)
        found[:] = [progress]
        return len(progress.pending_approvals) == calls

    await wait_for(waiting, seconds=60)
    return found[0]


def agent_id(kind: str) -> str:
    return f"{kind}-{uuid.uuid4().hex[:8]}"


async def test_a_run_is_counted_started_once_however_often_it_is_replayed_or_continued(
    metered: Metered, llm: ScriptedLLM, model_name: str
):
    llm.script(
        model_name,
        [
            HttpError(503, "overloaded", headers={"retry-after-ms": "10"}),  # the step retried
            *(Reply(None, [call("calculator", expression=f"{i} * 2")]) for i in range(3)),
            Reply("FINAL ANSWER: done"),
        ],
    )
    harness = metered.harness
    name = agent_id("started")
    config = AgentConfig(agent_id=name, model=model_name, max_iterations=10, memory=False)
    handle = await harness.client.start_workflow(
        AgentRunWorkflow.run,
        AgentRunInput(task="Double 0 to 2", agent=config, continue_as_new_every=1),
        id=names.run_workflow_id(name, uuid.uuid4()),
        task_queue=harness.task_queue,
        search_attributes=TypedSearchAttributes([SearchAttributePair(sa.AGENT_NAME, name)]),
    )
    result = await harness.agent(model_name, agent_id=name).result(handle)
    assert result.success
    assert handle.first_execution_run_id is not None
    assert (await handle.describe()).run_id != handle.first_execution_run_id  # continued

    started = metered.scrape(names.RUNS_STARTED_METRIC)
    assert started[(("agent", name),)] == 1
    assert metered.scrape(names.RUNS_METRIC)[(("agent", name), ("terminated_by", "final_answer"))]
    assert sum(v for k, v in metered.scrape(names.RUNS_METRIC).items() if ("agent", name) in k) == 1


async def test_approvals_are_counted_asked_and_decided_once_each(
    metered: Metered, llm: ScriptedLLM, model_name: str
):
    """Approved, denied, denied by the approval timeout, and abandoned when the run is
    cancelled while it waits: each counted once, with its run's start."""
    harness = metered.harness
    decided = llm.script(
        f"{model_name}-decided",
        [
            Reply("One.", [call("calculator", expression="1+1")]),
            Reply("Two.", [call("calculator", expression="2+2")]),
            Reply("FINAL ANSWER: done"),
        ],
    )
    waits, waits_again = (
        llm.script(
            f"{model_name}-{kind}",
            [Reply("One.", [call("calculator", expression="3+3")]), Reply("FINAL ANSWER: done")],
        )
        for kind in ("times-out", "cancelled")
    )
    decider, timer, canceller = agent_id("decides"), agent_id("times-out"), agent_id("cancels")
    approving = harness.agent(decided, agent_id=decider, approve_tools=["calculator"])
    run = await approving.start("Add.")
    await parked(harness, run.id)
    await approving.approve(run.id, by="alice")
    await parked(harness, run.id)
    await approving.deny(run.id, by="bob", reason="enough adding")
    assert (await approving.result(run)).success

    timing_out = harness.agent(
        waits, agent_id=timer, approve_tools=["calculator"], approval_timeout_seconds=1
    )
    assert (await timing_out.run("Add.")).success

    cancelled = harness.agent(waits_again, agent_id=canceller, approve_tools=["calculator"])
    waiting = await cancelled.start("Add.")
    await parked(harness, waiting.id)
    assert (await cancelled.cancel(waiting.id)).terminated_by == "cancelled"

    tool = ("tool", "calculator")
    asked = metered.scrape(names.APPROVALS_ASKED_METRIC)
    assert asked[(("agent", decider), tool)] == 2
    assert asked[(("agent", timer), tool)] == 1
    assert asked[(("agent", canceller), tool)] == 1
    ended = {
        key: value
        for key, value in metered.scrape(names.APPROVALS_DECIDED_METRIC).items()
        if dict(key)["agent"] in (decider, timer, canceller)
    }
    assert ended == {
        (("agent", decider), ("decision", "approved"), tool): 1,
        (("agent", decider), ("decision", "denied"), tool): 1,
        (("agent", timer), ("decision", "timed_out"), tool): 1,
        (("agent", canceller), ("decision", "abandoned"), tool): 1,
    }
    started = metered.scrape(names.RUNS_STARTED_METRIC)
    assert [started[(("agent", a),)] for a in (decider, timer, canceller)] == [1, 1, 1]


def waiting_served(task_queue: str) -> float | None:
    for family in text_string_to_metric_families(generate_latest(metrics.REGISTRY).decode()):
        for sample in family.samples:
            if sample.name == "reactive_temporal_runs_waiting_for_approval":
                if sample.labels["task_queue"] == task_queue:
                    return sample.value
    return None


async def test_the_runs_waiting_for_approval_are_counted_in_visibility(
    harness: Harness, llm: ScriptedLLM, model_name: str
):
    llm.script(
        model_name,
        [Reply("One.", [call("calculator", expression="1+1")]), Reply("FINAL ANSWER: 2")],
    )
    watch = ApprovalWatch(harness.task_queue, every=0.2)
    assert await watch.count(harness.client) == 0
    assert waiting_served(harness.task_queue) == 0
    agent = harness.agent(model_name, agent_id=agent_id("waits"), approve_tools=["calculator"])
    run = await agent.start("Add.")
    counting = asyncio.create_task(watch.run(lambda: harness.client))
    try:
        await parked(harness, run.id)
        await wait_for(lambda: waiting_served(harness.task_queue) == 1, seconds=30)

        # visibility refusing the count: the last one is served, not a made-up 0
        query, watch.query = watch.query, "NoSuchAttribute = 'x'"
        assert await watch.count(harness.client) is None
        assert waiting_served(harness.task_queue) == 1
        watch.query = query

        await agent.approve(run.id, by="alice")
        assert (await agent.result(run)).success
        await wait_for(lambda: waiting_served(harness.task_queue) == 0, seconds=30)
    finally:
        counting.cancel()
