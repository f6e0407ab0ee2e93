"""A second chat turn in a session whose tool-path turn's run waits for approval is told so at
once, naming the run, not left waiting on the session for as long as a person takes (a day by
default); on a real dev server."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from reactive_temporal.api.entity_handle import AgentEntity
from reactive_temporal.api.entity_leaving import runs_waiting_for_approval
from reactive_temporal.api.session_waits import SessionWaitsOnApproval
from reactive_temporal.api.sessions import Session
from reactive_temporal.contracts.entity import ChatRequest
from reactive_temporal.contracts.run import AgentConfig
from reactive_temporal.embedded.scripted_llm import ScriptedLLM
from tests.conftest import wait_for
from tests.support.approval_turns import calculator_then_answer
from tests.workflow.conftest import Harness

pytestmark = pytest.mark.workflow

TURN_SECONDS = 60
"""A hang guard: the second turn is told at once, not after a person decides."""


async def test_a_turn_behind_its_session_s_parked_tool_turn_is_told_which_run_it_waits_for(
    harness: Harness, llm: ScriptedLLM
):
    model = llm.script(f"waits-{uuid.uuid4().hex[:6]}", calculator_then_answer)
    agent_id = f"waits-{uuid.uuid4().hex[:8]}"
    config = AgentConfig(agent_id=agent_id, model=model, memory=False, approve_tools=["calculator"])
    entity = AgentEntity(harness.client, harness.task_queue, config, send_config=False)
    tool_turn = asyncio.create_task(
        entity.chat(ChatRequest(message="calculate 6*7", use_tools=True))
    )
    waiting: list[str] = []

    async def parked() -> bool:
        waiting[:] = await runs_waiting_for_approval(harness.client, entity.workflow_id)
        return bool(waiting)

    await wait_for(parked, TURN_SECONDS)
    [run_id] = waiting

    with pytest.raises(SessionWaitsOnApproval) as told:
        await asyncio.wait_for(
            entity.chat(ChatRequest(message="and the weather?", use_tools=False)), TURN_SECONDS
        )
    said = str(told.value)
    assert told.value.run_id == run_id
    assert f"is answering a tool-path turn whose run {run_id} waits for a person's approval" in (
        said
    )
    assert f"`python starter.py approve {run_id}` or `deny` decides them" in said

    # a turn in another session is not held by it, and is answered
    other = await asyncio.wait_for(
        Session(entity, "other").chat("hello", use_tools=False), TURN_SECONDS
    )
    assert other.message == "ok"

    # the told turn stayed taken: answered once the run's call is decided
    await harness.agent(model, agent_id=agent_id).approve(run_id, by="alice")
    assert (await asyncio.wait_for(tool_turn, TURN_SECONDS)).message == "42"

    async def answered() -> bool:
        history = await entity.history(ChatRequest(message="x").session_id)
        return [m.content for m in history.messages][-2:] == ["and the weather?", "ok"]

    await wait_for(answered, TURN_SECONDS)
