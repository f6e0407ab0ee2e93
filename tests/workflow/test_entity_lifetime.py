"""When the agent entity continues as new (`workflows/entity_lifetime.py`): its replay holds
when a rejected update shares a workflow task with an activity's result, in the task where it
becomes time; and a busy agent does continue, its turns never all paused.

A worker for the project's workflows and one for its activities, started and stopped apart,
set that task up: a chat turn's activity completes while no workflow worker polls, then a
turn on a session never opened (its validator refuses it) joins the waiting task. The
workflow worker keeps no cache, so every later task replays what this one recorded.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any

import pytest
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.enums.v1 import EventType, UpdateWorkflowExecutionLifecycleStage
from temporalio.api.history.v1 import HistoryEvent
from temporalio.api.update.v1 import UpdateRef, WaitPolicy
from temporalio.api.workflowservice.v1 import PollWorkflowExecutionUpdateRequest
from temporalio.client import Client, WorkflowHandle, WorkflowHistory, WorkflowUpdateFailedError
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from reactive_temporal.api.agents import Agent
from reactive_temporal.api.chat_refusals import update_failure_message
from reactive_temporal.api.replay import replay
from reactive_temporal.api.replay_batch import quiet_replayer
from reactive_temporal.config import Settings
from reactive_temporal.contracts import names
from reactive_temporal.contracts.entity import (
    AgentState,
    AgentWorkflowInput,
    ChatReply,
    ChatRequest,
)
from reactive_temporal.contracts.run import AgentConfig
from reactive_temporal.embedded.scripted_llm import Reply, ScriptedLLM
from reactive_temporal.hosting.runtime import Runtime
from reactive_temporal.hosting.worker_factory import WORKFLOWS, AgentWorker, create_worker
from tests.conftest import wait_for
from tests.workflow.conftest import Harness

pytestmark = pytest.mark.workflow

SESSIONS = 5
TURNS = 10
"""Sessions that talk at once, each this many turns: their turns overlap all along."""


@asynccontextmanager
async def parts(
    client: Client, settings: Settings, database_url: str
) -> AsyncIterator[tuple[str, Callable[[], Worker], Callable[[], Worker]]]:
    """A task queue, and how to make a worker of the project's workflows (no cache) or of
    its activities on it."""
    task_queue = f"lifetime-{uuid.uuid4().hex[:8]}"
    agent_worker: AgentWorker = await create_worker(  # for its activities: never run
        client, settings, database_url=database_url, task_queue=f"unused-{task_queue}"
    )
    try:
        yield (
            task_queue,
            lambda: Worker(
                client,
                task_queue=task_queue,
                workflows=WORKFLOWS,
                workflow_runner=UnsandboxedWorkflowRunner(),
                max_cached_workflows=0,
            ),
            lambda: Worker(client, task_queue=task_queue, activities=agent_worker.activities),
        )
    finally:
        await agent_worker.close()


def kinds(events: Sequence[HistoryEvent]) -> list[str]:
    return [EventType.Name(e.event_type).removeprefix("EVENT_TYPE_") for e in events]


async def history_of(client: Client, workflow_id: str, run_id: str) -> WorkflowHistory:
    return await client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()


async def runs_of(client: Client, workflow_id: str, first_run_id: str) -> list[WorkflowHistory]:
    """A workflow's runs' histories, first to last, each run's naming the next it continued
    as (read from the runs themselves: a listing of visibility can lag behind them)."""
    histories = [await history_of(client, workflow_id, first_run_id)]
    while (last := histories[-1].events[-1]).HasField(
        "workflow_execution_continued_as_new_event_attributes"
    ):
        next_run = last.workflow_execution_continued_as_new_event_attributes.new_execution_run_id
        histories.append(await history_of(client, workflow_id, next_run))
    return histories


async def until(check: Callable[[], Awaitable[bool]]) -> None:
    await wait_for(check, seconds=60)  # a hang guard: a loaded machine is slow, not stuck


ADMITTED = UpdateWorkflowExecutionLifecycleStage.UPDATE_WORKFLOW_EXECUTION_LIFECYCLE_STAGE_ADMITTED


async def admitted(client: Client, workflow_id: str, update_id: str) -> bool:
    """Whether the server holds update `update_id` for the workflow (it waits there for the
    workflow's next task), asked without waiting for more."""
    try:
        await client.workflow_service.poll_workflow_execution_update(
            PollWorkflowExecutionUpdateRequest(
                namespace=client.namespace,
                update_ref=UpdateRef(
                    workflow_execution=WorkflowExecution(workflow_id=workflow_id),
                    update_id=update_id,
                ),
                identity=client.identity,
                wait_policy=WaitPolicy(lifecycle_stage=ADMITTED),
            )
        )
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return False
        raise
    return True


async def set_up_the_task(
    client: Client,
    task_queue: str,
    workflows: Callable[[], Worker],
    activities: Callable[[], Worker],
    agent: Agent,
    continue_after: int | None,
) -> tuple[WorkflowHandle[Any, Any], asyncio.Task[ChatReply], asyncio.Task[Any], int]:
    """The entity, left with a task waiting that holds a chat turn's activity result and a
    refused turn; its turn in flight, the refused one, and the task's history length.

    Every step waits for the one before to be in the entity's history, so each set-up makes
    the same history: the first turn is sent once the entity's first task is done (sent
    sooner, it joined that task or not as the worker was quick to poll, 47 events or 50), and
    the workflow worker starts again only once the server holds the refused turn.
    """
    entity = await client.start_workflow(
        names.AGENT_WORKFLOW,
        AgentWorkflowInput(
            state=AgentState(agent=agent.config), continue_as_new_after_events=continue_after
        ),
        id=names.agent_workflow_id(agent.config.agent_id),
        task_queue=task_queue,
    )
    session = agent.session(f"kept-{uuid.uuid4().hex[:6]}")
    async with workflows():

        async def first_task_done() -> bool:
            return "WORKFLOW_TASK_COMPLETED" in kinds((await entity.fetch_history()).events)

        await until(first_task_done)
        async with activities():
            assert (await session.chat("one")).message == "first"
        turn = asyncio.create_task(session.chat("two"))

        async def waits_for_its_activity() -> bool:
            return bool((await entity.describe()).raw_description.pending_activities)

        await until(waits_for_its_activity)
    async with activities():

        async def result_waits() -> bool:
            events = (await entity.fetch_history()).events
            return kinds(events)[-2:] == ["ACTIVITY_TASK_COMPLETED", "WORKFLOW_TASK_SCHEDULED"]

        await until(result_waits)
    refusal = f"refused-{uuid.uuid4().hex[:8]}"
    refused = asyncio.create_task(
        client.get_workflow_handle(entity.id).execute_update(
            names.CHAT_UPDATE,
            ChatRequest(message="hello?", session_id="never-opened"),
            id=refusal,
        )
    )
    await until(lambda: admitted(client, entity.id, refusal))  # it waits with the task
    return entity, turn, refused, len((await entity.fetch_history()).events) + 1


async def stop(
    client: Client,
    entity: WorkflowHandle[Any, Any],
    *turns: asyncio.Task[Any],
) -> None:
    """End a set-up's entity (whichever run it is at) and the turns it left waiting."""
    await client.get_workflow_handle(entity.id).terminate()
    for turn in turns:
        turn.cancel()


async def test_a_refused_turn_beside_a_result_as_it_becomes_time_to_continue(
    client: Client, settings: Settings, database_url: str, llm: ScriptedLLM, model_name: str
):
    async with parts(client, settings, database_url) as (task_queue, workflows, activities):

        def agent() -> Agent:
            config = AgentConfig(agent_id=f"lifetime-{uuid.uuid4().hex[:6]}", model=model_name)
            return Agent(config, Runtime(client, task_queue, offline_model=False))

        # once to learn how long the entity's history is at the task, then with that as its
        # limit: the task is the first past it (the condition turns true there)
        llm.script(model_name, [Reply("first"), Reply("second"), Reply("third")])
        learn = agent()
        entity, turn, refused, length = await set_up_the_task(
            client, task_queue, workflows, activities, learn, None
        )
        learned = kinds((await entity.fetch_history()).events)
        await stop(client, entity, turn, refused)

        llm.script(model_name, [Reply("first"), Reply("second"), Reply("third")])
        talked = agent()
        entity, turn, refused, at = await set_up_the_task(
            client, task_queue, workflows, activities, talked, length - 1
        )
        made = kinds((await entity.fetch_history()).events)
        assert at == length, f"the set-up made another history: {learned} then {made}"
        async with workflows(), activities():
            with pytest.raises(WorkflowUpdateFailedError) as refusal:
                await asyncio.wait_for(refused, timeout=60)
            assert "never-opened" in update_failure_message(refusal.value)
            assert (await asyncio.wait_for(turn, timeout=60)).message == "second"
            assert (await talked.session().chat("three")).message == "third"
        runs = await runs_of(client, entity.id, entity.result_run_id or "")
        assert len(runs) >= 2  # it continued as new
        replayer = quiet_replayer(WORKFLOWS, client.data_converter)
        for history in runs:
            assert "WORKFLOW_TASK_FAILED" not in kinds(history.events)
            report = await replay(history, replayer)
            assert report.ok, report.error


async def test_a_busy_agent_continues_as_new_while_turns_keep_coming(
    harness: Harness, llm: ScriptedLLM, model_name: str
):
    """Five sessions talk without pause, so the entity never has no turn in flight: once it
    is time to continue as new it takes no new turn (they wait, and go to its next run),
    finishes those it took, and goes on; before, its history grew on for as long as the talk
    did (towards Temporal's limits: 2,000 updates, 50 MB)."""
    llm.script(model_name, [Reply("noted", delay=0.3)], repeat_last=True)
    agent_id = f"busy-{uuid.uuid4().hex[:6]}"
    config = AgentConfig(agent_id=agent_id, model=model_name, memory=False)
    entity = await harness.client.start_workflow(
        names.AGENT_WORKFLOW,
        AgentWorkflowInput(state=AgentState(agent=config), continue_as_new_after_events=60),
        id=names.agent_workflow_id(agent_id),
        task_queue=harness.task_queue,
    )
    agent = harness.agent(model_name, agent_id=agent_id, memory=False)
    sessions = [agent.session() for _ in range(SESSIONS)]

    async def talk(number: int) -> None:
        for turn in range(TURNS):
            await sessions[number].chat(f"{number}.{turn}")

    await asyncio.wait_for(asyncio.gather(*(talk(n) for n in range(SESSIONS))), timeout=240)
    runs = await runs_of(harness.client, entity.id, entity.result_run_id or "")
    lengths = [len(history.events) for history in runs]
    # past its limit each run finished at most the turns in flight (about 20 events each)
    assert max(lengths) < 60 + SESSIONS * 30, lengths
    assert len(llm.requests[model_name]) == SESSIONS * TURNS  # each turn answered once
    for number, session in enumerate(sessions):
        said = [m.content for m in await session.history() if m.role == "user"]
        assert said == [f"{number}.{turn}" for turn in range(TURNS)]
