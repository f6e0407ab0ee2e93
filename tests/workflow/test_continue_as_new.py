"""A long run continues as new: the same workflow id, one transcript, its counters, one debrief.

Forced with a low threshold in the run's input, and on Temporal's own suggestion (a dev server
whose history limits are set very low), so a run of thousands of iterations never meets
Temporal's history walls.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import psycopg
import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.common import SearchAttributePair, TypedSearchAttributes

from reactive_temporal import search_attributes as sa
from reactive_temporal.api.agents import Agent
from reactive_temporal.api.run_results import RunResult
from reactive_temporal.config import Settings
from reactive_temporal.contracts import names
from reactive_temporal.contracts.run import AgentConfig, AgentRunInput
from reactive_temporal.embedded.dev_server import DevServer
from reactive_temporal.embedded.scripted_llm import Reply, ScriptedLLM, call
from reactive_temporal.hosting.runtime import Runtime
from tests.workflow.conftest import running_worker
from workflows.agent_run import AgentRunWorkflow

CALCULATIONS = 9


async def segments(client: Client, workflow_id: str, first_run: str) -> list[list[str]]:
    """Each Temporal run of the workflow, in order, as the names of its failed workflow
    tasks (which must be none); follows continued-as-new links from the first run."""
    found: list[list[str]] = []
    run_id: str | None = first_run
    while run_id:
        failures: list[str] = []
        next_run = None
        async for event in client.get_workflow_handle(
            workflow_id, run_id=run_id
        ).fetch_history_events():
            if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED:
                failures.append(event.workflow_task_failed_event_attributes.failure.message)
            if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
                next_run = (
                    event.workflow_execution_continued_as_new_event_attributes.new_execution_run_id
                )
        found.append(failures)
        run_id = next_run
    return found


async def long_run(
    client: Client, task_queue: str, llm: ScriptedLLM, *, every: int | None
) -> tuple[RunResult, list[list[str]]]:
    model = llm.script(
        f"can-{uuid.uuid4().hex[:8]}",
        [Reply(None, [call("calculator", expression=f"{i} * 2")]) for i in range(CALCULATIONS)]
        + [Reply("FINAL ANSWER: " + "explained at length, " * 10)],
    )
    name = f"can-{uuid.uuid4().hex[:8]}"
    agent = Agent(
        AgentConfig(agent_id=name, model=model, max_iterations=50),
        Runtime(client, task_queue, offline_model=False),
    )
    handle = await client.start_workflow(
        AgentRunWorkflow.run,
        AgentRunInput(
            task="Double 0 to 8, one by one", agent=agent.config, continue_as_new_every=every
        ),
        id=names.run_workflow_id(name, uuid.uuid4()),
        task_queue=task_queue,
        search_attributes=TypedSearchAttributes([SearchAttributePair(sa.AGENT_NAME, name)]),
    )
    result = await agent.result(handle)
    await result.debrief_rich()
    assert handle.first_execution_run_id is not None
    return result, await segments(client, handle.id, handle.first_execution_run_id)


async def assert_one_run_kept(result: RunResult, runs: list[list[str]], database_url: str) -> None:
    assert result.success and result.terminated_by == "final_answer"
    assert result.metadata.iterations == CALCULATIONS + 1  # counted across every Temporal run
    assert result.tools_used == ["calculator"]
    assert all(failures == [] for failures in runs)
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        cur = await conn.execute(
            "SELECT seq, role, content FROM run_messages WHERE run_id = %s ORDER BY seq",
            (result.run_id,),
        )
        transcript = await cur.fetchall()
        cur = await conn.execute(
            "SELECT count(*), max(iterations) FROM agent_debriefs WHERE run_id = %s",
            (result.run_id,),
        )
        debriefs = await cur.fetchone()
    # one transcript: system, task, then each turn's reply and its observation, no gaps
    assert [seq for seq, _, _ in transcript] == list(range(len(transcript)))
    roles = [role for _, role, _ in transcript]
    assert roles == ["system", "user"] + ["assistant", "tool"] * CALCULATIONS + ["assistant"]
    assert [c for _, r, c in transcript if r == "tool"] == [str(i * 2) for i in range(CALCULATIONS)]
    assert debriefs == (1, CALCULATIONS + 1)  # one debrief, for the whole run
    assert result.debrief is not None
    [calculator] = result.debrief.tools_used
    assert (calculator.name, calculator.calls) == ("calculator", CALCULATIONS)


async def test_a_run_forced_to_continue_as_new_completes_as_one_run(
    client: Client, settings: Settings, llm: ScriptedLLM, database_url: str
):
    async with running_worker(client, settings) as h:
        result, runs = await long_run(client, h.task_queue, llm, every=2)
    assert len(runs) == 5  # 10 iterations, a new Temporal run every 2
    await assert_one_run_kept(result, runs, database_url)


@pytest.fixture
async def strict_server(tmp_path: Path) -> AsyncIterator[Client]:
    """A dev server that suggests continue-as-new after 60 history events."""
    server = DevServer(
        db_file=None,
        log_file=tmp_path / "temporal.log",
        extra_args=["--dynamic-config-value", "limit.historyCount.suggestContinueAsNew=60"],
    )
    client = await server.start()
    yield client
    await server.stop()


async def test_a_run_continues_as_new_when_temporal_suggests_it(
    strict_server: Client, settings: Settings, llm: ScriptedLLM, database_url: str
):
    async with running_worker(strict_server, settings) as h:
        result, runs = await long_run(strict_server, h.task_queue, llm, every=None)
    assert len(runs) >= 2
    await assert_one_run_kept(result, runs, database_url)
