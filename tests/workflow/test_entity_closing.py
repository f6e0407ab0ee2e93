"""A chat turn whose agent entity ends under it (a reset, a terminate by hand) is sent once more
or refused in words naming the agent, never a raw RPC error; on a real dev server.

The window is forced, not waited for: a hook on the client's start ends the entity the moment
it is started (the fallback of a cluster without update-with-start sends the update after
it), and a model that holds its answer until the test has terminated the entity catches the
turn mid-answer.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Awaitable, Iterator
from typing import Any, TypeVar

import pytest
from temporalio.client import Client

from reactive_temporal.api import entity_handle
from reactive_temporal.api.chat_refusals import ChatUnavailable
from reactive_temporal.api.entity_closing import EntityEnded
from reactive_temporal.api.entity_handle import AgentEntity
from reactive_temporal.api.entity_reset import reset_entity
from reactive_temporal.api.sessions import Session
from reactive_temporal.contracts.entity import ChatRequest
from reactive_temporal.contracts.run import AgentConfig
from reactive_temporal.embedded.scripted_llm import Reply, ScriptedLLM
from tests.workflow.conftest import Harness

pytestmark = pytest.mark.workflow

T = TypeVar("T")
TURN_SECONDS = 60
"""A hang guard, never a measure of speed."""


async def turn(chat: Awaitable[T]) -> T:
    return await asyncio.wait_for(chat, TURN_SECONDS)


def as_the_cli(harness: Harness, agent_id: str, model: str) -> AgentEntity:
    config = AgentConfig(agent_id=agent_id, model=model, memory=False)
    return AgentEntity(harness.client, harness.task_queue, config, send_config=False)


@pytest.fixture
def without_update_with_start(harness: Harness) -> Iterator[Client]:
    """The harness's client, sending as to a cluster that refuses update-with-start."""
    entity_handle.WITHOUT_UPDATE_WITH_START.add(harness.client)
    yield harness.client
    entity_handle.WITHOUT_UPDATE_WITH_START.discard(harness.client)


def end_each_start(client: Client, monkeypatch: pytest.MonkeyPatch, times: int) -> list[str]:
    """The client's first `times` starts end the run they started at once; the ended run ids."""
    ended: list[str] = []
    start = client.start_workflow

    async def start_then_end(*args: Any, **kwargs: Any) -> Any:
        handle = await start(*args, **kwargs)
        if len(ended) < times:
            await handle.terminate(reason="test: ended between the start and the update")
            ended.append(handle.first_execution_run_id or "")
        return handle

    monkeypatch.setattr(client, "start_workflow", start_then_end)
    return ended


async def test_an_entity_ended_between_the_start_and_the_update_takes_the_turn_in_its_next_run(
    harness: Harness,
    llm: ScriptedLLM,
    without_update_with_start: Client,
    monkeypatch: pytest.MonkeyPatch,
):
    """The update reached a closed run (NOT_FOUND): nothing was taken, so it is sent once more,
    under its one id, and answered once. It raised the SDK's RPCError, 'workflow execution
    already completed'."""
    model = llm.script(f"once-{uuid.uuid4().hex[:6]}", [Reply("ok")], repeat_last=True)
    cli = as_the_cli(harness, f"ended-{uuid.uuid4().hex[:8]}", model)
    ended = end_each_start(without_update_with_start, monkeypatch, times=1)

    session = Session(cli, "s1")
    assert (await turn(session.chat("hello"))).message == "ok"
    assert len(ended) == 1
    assert (await cli.handle().describe()).run_id != ended[0]
    assert len(llm.requests[model]) == 1
    assert [m.content for m in await session.history()] == ["hello", "ok"]


async def test_an_entity_ended_at_every_start_refuses_the_turn_naming_the_agent(
    harness: Harness,
    llm: ScriptedLLM,
    without_update_with_start: Client,
    monkeypatch: pytest.MonkeyPatch,
):
    model = llm.script(f"never-{uuid.uuid4().hex[:6]}", [Reply("ok")], repeat_last=True)
    agent_id = f"ended-{uuid.uuid4().hex[:8]}"
    cli = as_the_cli(harness, agent_id, model)
    end_each_start(without_update_with_start, monkeypatch, times=2)

    with pytest.raises(EntityEnded) as refused:
        await turn(cli.chat(ChatRequest(message="hello", use_tools=False)))
    assert isinstance(refused.value, ChatUnavailable) and not refused.value.taken
    said = str(refused.value)
    assert said.startswith(
        f"agent {agent_id}'s chat workflow (agent-{agent_id}) ended as the request reached it, "
        "and again when it was sent to the next run"
    )
    assert said.endswith("The request was not taken: send it again once nothing ends it")
    assert llm.requests[model] == []


async def test_a_turn_whose_entity_is_reset_mid_answer_says_it_may_have_been_answered(
    harness: Harness, llm: ScriptedLLM
):
    """The run took the turn and ended before answering (`agent reset --force` as it ran): it
    raised a ChatError in the server's words ('Workflow Update failed because the Workflow
    completed before the Update completed'), which the CLI took for a wrong request (exit 2).
    Not sent again: the model was asked, and the next run does not remember the reply."""
    asked = threading.Event()
    release = threading.Event()

    def held(request: dict[str, Any]) -> Reply:
        asked.set()
        release.wait(TURN_SECONDS)
        return Reply("late")

    model = llm.script(f"held-{uuid.uuid4().hex[:6]}", held)
    agent_id = f"mid-{uuid.uuid4().hex[:8]}"
    cli = as_the_cli(harness, agent_id, model)
    chat = asyncio.create_task(Session(cli, "s1").chat("hello"))
    try:
        assert await asyncio.to_thread(asked.wait, TURN_SECONDS)
        await cli.handle().terminate(reason="test: reset while a turn runs")
    finally:
        release.set()
    with pytest.raises(EntityEnded) as refused:
        await turn(chat)
    assert refused.value.taken
    said = str(refused.value)
    assert said.startswith(
        f"agent {agent_id}'s chat workflow (agent-{agent_id}) ended while it was answering the "
        "request (`agent reset`, or a terminate by hand"
    )
    assert (
        "It was taken and may or may not have been answered and saved: `python starter.py "
        f"session history s1 --agent {agent_id}` shows it if it was. Send it again if it was not"
    ) in said
    assert len(llm.requests[model]) == 1  # not sent again


async def test_a_reset_says_which_turns_it_ends_mid_answer(harness: Harness, llm: ScriptedLLM):
    """`agent reset --force` of an agent answering a turn: the turn's sender is told (above),
    and so is whoever resets it. The reset said nothing of it."""
    asked = threading.Event()
    release = threading.Event()

    def held(request: dict[str, Any]) -> Reply:
        asked.set()
        release.wait(TURN_SECONDS)
        return Reply("late")

    model = llm.script(f"held-{uuid.uuid4().hex[:6]}", held)
    cli = as_the_cli(harness, f"mid-{uuid.uuid4().hex[:8]}", model)
    chat = asyncio.create_task(Session(cli, "s1").chat("hello"))
    try:
        assert await asyncio.to_thread(asked.wait, TURN_SECONDS)
        done = await reset_entity(harness.client, harness.task_queue, cli.config, force=True)
    finally:
        release.set()
    with pytest.raises(EntityEnded):
        await turn(chat)
    assert done.new_run_id is not None
    assert (
        "the chat turns it was answering (1): each sender is told it may or may not have been "
        "answered (its session's history shows it if it was)"
    ) in done.left
