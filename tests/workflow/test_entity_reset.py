"""An agent whose chat workflow is stuck says so, and `reset_entity` (`starter.py agent reset`)
frees it, with what it knew; on a real dev server.

This release's entities keep what they are sent whole (`entity-inputs-bounded` is asked from
the next one), so a signal sent by hand (`temporal workflow signal --input …`) can still
break one: a configuration of 2 MB, then a chat turn whose activity input is past Temporal's
2 MiB, fails the entity's workflow task on every try. Chat said so in the words it uses for a
run (roll the deploy back, `starter.py replay`), said a turn it had sent "may still be
answered", and had no way out: terminating the entity by hand lost the configuration its
builder had set. Now chat names the agent, its workflow, what fails and the reset; the reset
ends the stuck run and starts a fresh one with the agent's own configuration, its sessions
read back from Postgres where they are kept.
"""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import uuid
from collections.abc import Awaitable
from typing import Any, TypeVar

import pytest
from temporalio.api.common.v1 import Payload
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowExecutionStatus
from temporalio.common import RawValue

from reactive_temporal.api import entity_reset
from reactive_temporal.api.entity_handle import AgentEntity
from reactive_temporal.api.entity_reset import reset_entity
from reactive_temporal.api.entity_wedge import EntityWedged
from reactive_temporal.api.sessions import Session
from reactive_temporal.contracts import names
from reactive_temporal.contracts.entity import AgentState, AgentWorkflowInput, ChatRequest
from reactive_temporal.contracts.run import AgentConfig
from reactive_temporal.embedded.scripted_llm import Reply, ScriptedLLM
from tests.workflow.conftest import Harness

pytestmark = pytest.mark.workflow

TURN_SECONDS = 60
"""A hang guard: a chat turn to a stuck agent must be refused, not waited on for good."""
T = TypeVar("T")
HEAVY_TOOLS = ["\x01" * 1_000] * 330
"""2 MB as JSON, under the 2 MiB a signal may carry: a chat turn's activity input holding
them and a message of 120 KB is past it."""
HEAVY_MESSAGE = "\x01" * 20_000


async def turn(chat: Awaitable[T]) -> T:
    return await asyncio.wait_for(chat, TURN_SECONDS)


def raw(value: object) -> RawValue:
    """`value` as `temporal workflow signal --input` sends it: JSON, checked by nothing."""
    return RawValue(Payload(metadata={"encoding": b"json/plain"}, data=json.dumps(value).encode()))


def pirate_or_plain(request: dict[str, Any]) -> Reply:
    """Says whether the agent's persona reached the model."""
    system = str(request["messages"][0]["content"])
    return Reply("arr" if "You are a pirate." in system else "plain")


def as_the_cli(harness: Harness, agent_id: str, model: str) -> AgentEntity:
    """The agent as `starter.py chat` reaches it: with the agent's own configuration."""
    config = AgentConfig(agent_id=agent_id, model=model, memory=False)
    return AgentEntity(harness.client, harness.task_queue, config, send_config=False)


async def ended_reason(harness: Harness, workflow_id: str, run_id: str) -> str:
    handle = harness.client.get_workflow_handle(workflow_id, run_id=run_id)
    assert (await handle.describe()).status == WorkflowExecutionStatus.TERMINATED
    async for event in handle.fetch_history_events():
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED:
            return event.workflow_execution_terminated_event_attributes.reason
    raise AssertionError("no termination in the history")


async def test_a_stuck_agent_says_so_and_a_reset_frees_it_with_its_configuration(
    harness: Harness, llm: ScriptedLLM, caplog: pytest.LogCaptureFixture
):
    model = llm.script(f"persona-{uuid.uuid4().hex[:6]}", pirate_or_plain)
    agent_id = f"stuck-{uuid.uuid4().hex[:8]}"
    cli = as_the_cli(harness, agent_id, model)
    assert (await turn(Session(cli, "s1").chat("hello"))).message == "plain"  # its defaults
    built = harness.agent(model, agent_id=agent_id, memory=False, system_prompt="You are a pirate.")
    await built.entity.configure()  # as `build()` tells it, to the entity the CLI started
    assert (await turn(cli.chat(ChatRequest(message="who?", use_tools=False)))).message == "arr"

    entity = cli.handle()
    poison = {"agent_id": agent_id, "model": model, "tools": HEAVY_TOOLS}
    await entity.signal(names.CONFIGURE_SIGNAL, raw(poison))
    caplog.set_level(logging.ERROR, logger="asyncio")
    with pytest.raises(EntityWedged) as sent:
        await turn(cli.chat(ChatRequest(message=HEAVY_MESSAGE, use_tools=False)))
    said = str(sent.value)
    del sent  # its traceback holds the turn's frames, and the start's error with them
    gc.collect()  # the update-with-start given up on left its start's error unread: logged
    assert "never retrieved" not in caplog.text
    assert said.startswith(
        f"agent {agent_id}'s chat workflow (agent-{agent_id}) is stuck: its workflow task keeps "
        "failing (attempt "
    )
    assert "payloads too large" in said
    assert f"`python starter.py agent reset {agent_id}` ends it" in said
    assert said.endswith(
        "The request was sent and is dropped when the agent is reset: send it again then"
    )

    for asked in (  # every request after it is refused before it is sent
        Session(cli, "s1").chat("still there?"),
        built.chat("and you?"),
        cli.last_debrief(),
    ):
        with pytest.raises(EntityWedged, match=r"\. The request was not sent$"):
            await turn(asked)

    done = await reset_entity(harness.client, harness.task_queue, cli.config)
    assert (done.stuck, done.failure and done.failure.cause) == (True, "payloads_too_large")
    assert done.new_run_id is not None and done.new_run_id != done.ended_run_id
    assert len(done.kept) == 1 and done.kept[0].startswith("the configuration its builder sent")
    assert "tools lists 330 names; the limit is 256" in done.left[0]
    reason = await ended_reason(harness, cli.workflow_id, done.ended_run_id)
    assert reason.startswith("agent reset: its workflow task kept failing (attempt ")

    # the CLI's chat has the builder's persona, not its own defaults; the session goes on
    assert (await turn(cli.chat(ChatRequest(message="hi", use_tools=False)))).message == "arr"
    session = Session(cli, "s1")
    assert (await turn(session.chat("and now?"))).message == "arr"
    assert [m.content for m in await session.history()] == ["hello", "plain", "and now?", "arr"]


async def test_a_healthy_agent_is_reset_only_by_force_and_its_sessions_stay_whole(
    harness: Harness, llm: ScriptedLLM
):
    """Its sessions' sizes say where each next turn is written in Postgres: a fresh entity
    given those its run began with (before the turns since) wrote the next turn over one."""
    model = llm.script(f"count-{uuid.uuid4().hex[:6]}", [Reply("ok")], repeat_last=True)
    agent_id = f"healthy-{uuid.uuid4().hex[:8]}"
    cli = as_the_cli(harness, agent_id, model)
    await harness.client.start_workflow(
        names.AGENT_WORKFLOW,
        AgentWorkflowInput(state=AgentState(agent=cli.config), continue_as_new_after_events=80),
        id=cli.workflow_id,
        task_queue=harness.task_queue,
    )
    first_run = (await cli.handle().describe()).run_id
    asked = []
    for n in range(30):  # until it continues as new
        asked.append(f"question {n}")
        await turn(Session(cli, "s1").chat(asked[-1]))
        if (await cli.handle().describe()).run_id != first_run:
            break
    else:
        raise AssertionError("the entity did not continue as new")
    moved_to = (await cli.handle().describe()).run_id
    asked.append("a turn its run's start state does not count")
    await turn(Session(cli, "s1").chat(asked[-1]))
    assert (await cli.handle().describe()).run_id == moved_to  # taken by the run reset

    with pytest.raises(ValueError, match=r"is not stuck: .* --force resets it anyway"):
        await reset_entity(harness.client, harness.task_queue, cli.config)
    done = await reset_entity(harness.client, harness.task_queue, cli.config, force=True)
    assert (done.stuck, done.failure) == (False, None)
    assert "the open sessions' windows (each is read back from Postgres)" in done.left
    reason = await ended_reason(harness, cli.workflow_id, done.ended_run_id)
    assert reason == "agent reset: reset by force"

    session = Session(cli, "s1")
    assert (await turn(session.chat("after the reset"))).message == "ok"
    history = [m.content for m in await session.history()]
    assert history == [text for q in [*asked, "after the reset"] for text in (q, "ok")]


async def test_an_agent_carrying_what_broke_it_starts_afresh_with_the_configuration_given(
    harness: Harness, llm: ScriptedLLM
):
    """It continued as new with it: every run of it is stuck, and no point of its history
    is good to go back to. The Python API's reset gives the agent's own settings instead."""
    model = llm.script(f"given-{uuid.uuid4().hex[:6]}", pirate_or_plain)
    agent_id = f"carried-{uuid.uuid4().hex[:8]}"
    heavy = AgentConfig(agent_id=agent_id, model=model, memory=False, tools=HEAVY_TOOLS)
    await harness.client.start_workflow(
        names.AGENT_WORKFLOW,
        AgentWorkflowInput(state=AgentState(agent=heavy)),
        id=names.agent_workflow_id(agent_id),
        task_queue=harness.task_queue,
    )
    cli = as_the_cli(harness, agent_id, model)
    with pytest.raises(EntityWedged):
        await turn(cli.chat(ChatRequest(message=HEAVY_MESSAGE, use_tools=False)))

    agent = harness.agent(model, agent_id=agent_id, memory=False, system_prompt="You are a pirate.")
    done = await agent.reset_entity()
    assert done.stuck and done.kept == ["the configuration given"]
    assert done.left[0].startswith("its configuration, for the one given: tools lists 330 names")
    assert (await turn(cli.chat(ChatRequest(message="hi", use_tools=False)))).message == "arr"
    with pytest.raises(ValueError, match=r"is not stuck"):
        await agent.reset_entity()


async def test_a_chat_starting_the_entity_during_a_reset_gets_the_agent_s_configuration(
    harness: Harness, llm: ScriptedLLM, monkeypatch: pytest.MonkeyPatch
):
    """Users told "send it again once it is reset" send it at once: a chat's update-with-start
    can start the fresh entity first, with the CLI's defaults, and the reset's own start is
    refused. The builder's configuration was then lost until its next `build()` (the reset said
    'a chat started a fresh entity first, with its settings'); now the reset sends it there.
    The window is forced: the chat is sent between the reset's terminate and its start."""
    model = llm.script(f"race-{uuid.uuid4().hex[:6]}", pirate_or_plain)
    agent_id = f"race-{uuid.uuid4().hex[:8]}"
    cli = as_the_cli(harness, agent_id, model)
    built = harness.agent(model, agent_id=agent_id, memory=False, system_prompt="You are a pirate.")
    await built.entity.configure()
    assert (await turn(cli.chat(ChatRequest(message="who?", use_tools=False)))).message == "arr"

    terminate = entity_reset._terminate
    raced: list[str] = []

    async def terminate_then_chat(*args: Any) -> None:
        await terminate(*args)
        raced.append((await turn(cli.chat(ChatRequest(message="first!", use_tools=False)))).message)

    monkeypatch.setattr(entity_reset, "_terminate", terminate_then_chat)
    done = await reset_entity(harness.client, harness.task_queue, cli.config, force=True)
    assert raced == ["plain"]  # the chat's entity began with the CLI's defaults
    assert done.new_run_id is None
    assert done.kept == [
        "its configuration, sent to the fresh entity a chat started first (from its next turn)"
    ]
    assert (await turn(cli.chat(ChatRequest(message="and now?", use_tools=False)))).message == "arr"
