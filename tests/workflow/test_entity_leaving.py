"""An agent entity due to continue as new while a tool-path chat turn's run waits for approval
refuses requests in words that say so, not by sending them again for a day; on a real dev
server.

Once due, the entity takes no new request until its handlers finish, and the tool-path turn's
handler waits on its child run, parked on a tool call until someone decides it. Every request
to the agent, in any session, was sent again and again with one log line.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest

from reactive_temporal.api.entity_handle import AgentEntity
from reactive_temporal.api.entity_leaving import EntityWaitsOnApproval, runs_waiting_for_approval
from reactive_temporal.api.sessions import Session
from reactive_temporal.contracts import names
from reactive_temporal.contracts.entity import AgentState, AgentWorkflowInput, ChatRequest
from reactive_temporal.contracts.run import AgentConfig
from reactive_temporal.embedded.scripted_llm import ScriptedLLM
from tests.conftest import wait_for
from tests.support.approval_turns import calculator_then_answer
from tests.workflow.conftest import Harness

pytestmark = pytest.mark.workflow

TURN_SECONDS = 60
"""A hang guard: a refused request is refused, not sent again for as long as a person waits."""
TURNS_MAX = 40
"""More turns than the entity takes before it is due to continue as new (40 events)."""


async def test_a_request_to_an_agent_moving_on_behind_an_approval_is_refused_naming_it(
    harness: Harness, llm: ScriptedLLM
):
    model = llm.script(f"leaving-{uuid.uuid4().hex[:6]}", calculator_then_answer)
    agent_id = f"leaving-{uuid.uuid4().hex[:8]}"
    config = AgentConfig(agent_id=agent_id, model=model, memory=False, approve_tools=["calculator"])
    cli = AgentEntity(harness.client, harness.task_queue, config, send_config=False)
    await harness.client.start_workflow(
        names.AGENT_WORKFLOW,
        AgentWorkflowInput(state=AgentState(agent=config), continue_as_new_after_events=40),
        id=cli.workflow_id,
        task_queue=harness.task_queue,
    )
    tool_turn = asyncio.create_task(cli.chat(ChatRequest(message="calculate 6*7", use_tools=True)))
    waiting: list[str] = []

    async def parked() -> bool:
        waiting[:] = await runs_waiting_for_approval(harness.client, cli.workflow_id)
        return bool(waiting)

    await wait_for(parked, TURN_SECONDS)
    [run_id] = waiting

    session = Session(cli, "s2")
    for n in range(TURNS_MAX):
        try:
            await asyncio.wait_for(session.chat(f"question {n}", use_tools=False), TURN_SECONDS)
        except EntityWaitsOnApproval as err:
            said = str(err)
            break
    else:
        raise AssertionError("the entity never became due to continue as new")
    assert said.startswith(
        f"agent {agent_id}'s chat workflow (agent-{agent_id}) is moving to its next run and "
        "takes no request until the chat turns it is answering finish, and a tool-path turn's "
        f"run waits for a person's approval: {run_id}. `python starter.py approvals --agent "
        f"{agent_id}` lists its calls; `python starter.py approve {run_id}` or `deny` decides"
    )
    assert said.endswith("The request was not taken: send it again once they are decided")

    await harness.agent(model, agent_id=agent_id).approve(run_id, by="alice")
    assert (await asyncio.wait_for(tool_turn, TURN_SECONDS)).message == "42"
    reply = await asyncio.wait_for(session.chat("and now?", use_tools=False), TURN_SECONDS)
    assert reply.message == "ok"
