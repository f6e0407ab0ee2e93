"""Chat that knows its agent, and sessions that are saved as they happen and stay bounded."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path

import pytest
from temporalio.client import Client, WorkflowExecutionStatus

from reactive_temporal.contracts import names
from reactive_temporal.contracts.entity import AgentState, AgentWorkflowInput, SessionRef
from reactive_temporal.contracts.run import AgentConfig, RunProgress
from reactive_temporal.embedded.dev_server import temporal_binary
from reactive_temporal.embedded.scripted_llm import Reply, ScriptedLLM, call
from tests.conftest import wait_for
from tests.processes import clean_env, starter_async
from tests.workflow.conftest import Harness
from workflows.agent_entity import AgentWorkflow

pytestmark = pytest.mark.workflow

PERSONA = "You are Captain Calc, a pirate who answers every question in rhyme."


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


async def starter(harness: Harness, temporal_address: str, tmp_path: Path, *args: str):
    """`starter.py` as a fresh process (the worker lives in this one: do not block the loop)."""
    env = clean_env(
        TEMPORAL_ADDRESS=temporal_address,
        TEMPORAL_TASK_QUEUE=harness.task_queue,
        REACTIVE_TEMPORAL_DATA_DIR=str(tmp_path),
    )  # no AGENT_MODEL: the CLI's own default would be gpt-4o-mini
    result = await starter_async(*args, env=env, cwd=tmp_path, seconds=120)
    return result.code, result.stdout, result.stderr


async def test_cli_chat_from_a_fresh_process_uses_the_agents_persona_and_model(
    harness: Harness, llm: ScriptedLLM, model_name: str, temporal_address: str, tmp_path: Path
) -> None:
    agent_id = unique("captain")
    llm.script(
        model_name,
        [Reply("FINAL ANSWER: Two plus two is four, me hearty."), Reply("Arr, I added it, me!")],
    )
    await harness.run(model_name, "What is 2+2?", agent_id=agent_id, system_prompt=PERSONA)

    code, stdout, stderr = await starter(
        harness, temporal_address, tmp_path, "chat", "What did you do?", "--agent", agent_id,
        "--json",
    )  # fmt: skip
    assert code == 0, stderr
    assert json.loads(stdout)["message"] == "Arr, I added it, me!"
    run_step, chat = llm.requests[model_name]  # the chat went to the run's model
    assert chat["messages"][0]["content"].startswith(PERSONA)
    assert chat["messages"][-1]["content"].endswith("\n\nWhat did you do?")  # after the notes


async def test_the_builder_sets_the_agents_configuration_for_chat_anywhere(
    harness: Harness, llm: ScriptedLLM, model_name: str, temporal_address: str, tmp_path: Path
) -> None:
    agent_id = unique("built")
    llm.script(model_name, [Reply("Ahoy.")])
    config = AgentConfig(agent_id=agent_id, model=model_name, system_prompt=PERSONA)
    await harness.agent(model_name, agent_id=agent_id, system_prompt=PERSONA).entity.configure()
    code, stdout, stderr = await starter(
        harness, temporal_address, tmp_path, "chat", "hello", "--agent", agent_id, "--json"
    )
    assert code == 0, stderr
    assert llm.requests[model_name][0]["messages"][0]["content"].startswith(PERSONA)
    state = await harness.client.get_workflow_handle_for(
        AgentWorkflow.run, names.agent_workflow_id(agent_id)
    ).describe()
    assert state.status == WorkflowExecutionStatus.RUNNING and config.model == model_name


async def test_every_turn_is_saved_as_it_happens_and_an_ended_session_reads_back(
    harness: Harness, llm: ScriptedLLM, model_name: str
) -> None:
    llm.script(model_name, [Reply("first"), Reply("second")])
    agent = harness.agent(model_name, agent_id=unique("saver"))
    session = agent.session(unique("s"))
    await session.chat("one")
    async with harness.store.pool.connection() as conn:  # saved without ending the session
        cur = await conn.execute(
            "SELECT position, role, content FROM chat_messages WHERE agent_id = %s"
            " AND session_id = %s ORDER BY position",
            (agent.name, session.id),
        )
        assert await cur.fetchall() == [(0, "user", "one"), (1, "assistant", "first")]
    await session.chat("two")
    ended = await session.end()
    assert [m.content for m in ended] == ["one", "first", "two", "second"]
    again = agent.session(session.id)  # any process: the history comes from Postgres
    assert [m.content for m in await again.history()] == ["one", "first", "two", "second"]
    assert await agent.session(unique("never")).end() == []  # ending an unused session succeeds


async def test_idle_sessions_close_saved_and_resume(
    harness: Harness, llm: ScriptedLLM, model_name: str
) -> None:
    agent_id = unique("idle")
    llm.script(model_name, [Reply("a"), Reply("b")])
    config = AgentConfig(agent_id=agent_id, model=model_name)
    handle = await harness.client.start_workflow(
        AgentWorkflow.run,
        AgentWorkflowInput(state=AgentState(agent=config), session_idle_seconds=2),
        id=names.agent_workflow_id(agent_id),
        task_queue=harness.task_queue,
    )
    agent = harness.agent(model_name, agent_id=agent_id)
    session = agent.session(unique("s"))
    await session.chat("hello")

    async def closed() -> bool:
        held = await handle.query(AgentWorkflow.history, SessionRef(session_id=session.id))
        return held.total_messages is None and not held.messages

    await wait_for(closed, seconds=60)
    assert [m.content for m in await session.history()] == ["hello", "a"]  # from Postgres
    await session.chat("again")  # resumed where it stopped
    assert [m.content for m in await session.history()] == ["hello", "a", "again", "b"]


async def test_two_hundred_max_length_turns_keep_the_entity_small(
    client: Client, cached_harness: Harness, llm: ScriptedLLM, model_name: str
) -> None:
    """Slow on purpose (200 chat turns): the agent entity's continue-as-new input stays under
    512 KB however much is said, and the whole session stays readable. On a worker with a
    cache: with none, every turn replayed the entity's history of up to 400 events of
    20,000-character messages (~120 s in all)."""
    harness = cached_harness
    agent_id = unique("chatty")
    turns = 200
    reply = "r" * 20_000
    llm.script(model_name, [Reply(reply)], repeat_last=True)
    config = AgentConfig(agent_id=agent_id, model=model_name)
    workflow_id = names.agent_workflow_id(agent_id)
    await client.start_workflow(
        AgentWorkflow.run,
        AgentWorkflowInput(state=AgentState(agent=config), continue_as_new_after_events=400),
        id=workflow_id,
        task_queue=harness.task_queue,
    )
    agent = harness.agent(model_name, agent_id=agent_id)
    session = agent.session(unique("s"))
    for i in range(turns):
        message = f"{i:04d}" + "m" * (20_000 - 4)  # the longest message chat accepts
        await session.chat(message, use_tools=False)

    sizes = []
    async for execution in client.list_workflows(f'WorkflowId = "{workflow_id}"'):
        history = await client.get_workflow_handle(
            workflow_id, run_id=execution.run_id
        ).fetch_history()
        started = history.events[0].workflow_execution_started_event_attributes
        sizes.append(sum(len(p.data) for p in started.input.payloads))
    print(f"continue-as-new inputs of {len(sizes)} runs: {sizes} bytes")
    assert len(sizes) >= 3  # it continued as new, more than once
    assert max(sizes) < 512 * 1024, sizes
    description = await client.get_workflow_handle(workflow_id).describe()
    assert description.status == WorkflowExecutionStatus.RUNNING

    whole = await session.history()
    assert len(whole) == 2 * turns
    assert [m.content[:4] for m in whole[::2]] == [f"{i:04d}" for i in range(turns)]
    assert all(m.content == reply for m in whole[1::2])


async def test_mid_run_chat_after_a_terminate_says_the_run_is_not_running(
    harness: Harness, llm: ScriptedLLM, model_name: str, temporal_address: str
) -> None:
    agent_id = unique("stopped")
    run_model = llm.script(
        f"{model_name}-run",
        [Reply(None, [call("calculator", expression="1+1")]), Reply("FINAL ANSWER: 2", delay=60)],
    )
    llm.script(model_name, lambda request: Reply("ok"))
    handle = await harness.start(run_model, "1+1 slowly", agent_id=agent_id)

    async def at_iteration_2() -> bool:
        return (await handle.query("progress", result_type=RunProgress)).iteration == 1

    await wait_for(at_iteration_2, seconds=60)
    agent = harness.agent(model_name, agent_id=agent_id)
    await agent.chat("How is it going?")
    live = llm.requests[model_name][-1]["messages"][1]["content"]
    assert f"Run {handle.id} is at iteration 2" in live

    proc = await asyncio.create_subprocess_exec(
        temporal_binary(), "workflow", "terminate", "--address", temporal_address,
        "--workflow-id", handle.id, "--reason", "test",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    _, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    assert (await handle.describe()).status == WorkflowExecutionStatus.TERMINATED

    await agent.chat("And now?")
    messages = llm.requests[model_name][-1]["messages"]
    said = "\n".join(m["content"] for m in messages)
    assert handle.id not in said and "in progress" not in said  # not reported as running
