"""Postgres down at the worst moment: a tool's work is not done twice, and the outage is an
outage (waited out), not the tool's failure."""

from __future__ import annotations

import asyncio
import threading
import uuid
from typing import Any

import psycopg
import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from reactive_temporal.api.agents import Agent
from reactive_temporal.config import Settings
from reactive_temporal.contracts.run import AgentConfig
from reactive_temporal.embedded.scripted_llm import Reply, ScriptedLLM, call
from reactive_temporal.hosting.runtime import Runtime
from reactive_temporal.tools import current_tool_call, tool
from tests.adversarial.conftest import assert_no_failed_tasks
from tests.conftest import wait_for
from tests.faults.conftest import stop_postgres
from tests.workflow.conftest import running_worker
from workflows import activity_options, run_limits

pytestmark = pytest.mark.faults


async def test_a_tool_runs_once_when_postgres_stops_right_after_it_returns(
    client: Client, settings: Settings, llm: ScriptedLLM, own_postgres: Any
):
    shipped: list[str] = []
    lock = threading.Lock()

    @tool
    def ship_order(order_id: str) -> str:
        """Ship an order (a side effect that must not happen twice)."""
        with lock:
            shipped.append(current_tool_call().idempotency_key)
        stop_postgres(own_postgres)  # the result now has nowhere to go
        return f"shipped {order_id}"

    model = llm.script(
        f"ship-{uuid.uuid4().hex[:6]}",
        [Reply(None, [call("ship_order", order_id="A-1")]), Reply("FINAL ANSWER: shipped A-1")],
    )
    database_url = str(own_postgres.get_uri())
    async with running_worker(
        client, settings, database_url=database_url, extra_tools=[ship_order]
    ) as running:
        agent = Agent(
            AgentConfig(agent_id="ship-once", model=model, memory=False, tools=["ship_order"]),
            Runtime(client, running.task_queue, offline_model=False),
        )
        run = asyncio.ensure_future(agent.run("Ship order A-1"))
        await wait_for(lambda: len(shipped) == 1, seconds=60)
        await asyncio.sleep(4)  # the tool returned into an outage: longer than any backoff
        await asyncio.to_thread(own_postgres.ensure_postgres_running)
        result = await asyncio.wait_for(run, timeout=120)

    assert result.success and result.output == "shipped A-1"
    answer_request = llm.requests[model][1]["messages"]
    assert answer_request[-1] == {
        "role": "tool",
        "content": "shipped A-1",
        "tool_call_id": answer_request[-2]["tool_calls"][0]["id"],
    }
    with psycopg.connect(database_url) as conn:
        rows = conn.execute(
            "SELECT seq, content, step_result->>'success' FROM run_messages"
            " WHERE run_id = %s AND name = 'ship_order'",
            (result.run_id,),
        ).fetchall()
    assert [(content, ok) for _, content, ok in rows] == [("shipped A-1", "true")]
    assert shipped == [f"{result.run_id}:{rows[0][0]}"]  # once, with the call's idempotency key


async def test_an_llm_step_that_gives_up_on_postgres_is_waited_out_not_an_llm_error(
    client: Client,
    settings: Settings,
    llm: ScriptedLLM,
    own_postgres: Any,
    monkeypatch: pytest.MonkeyPatch,
):
    """Postgres stops while the model answers, so the step cannot record the reply and fails
    for good with StoreUnavailable (its retries made few here: no infrastructure retries, a
    20 s step). The run does not end as `llm_error`: it waits (a timer) and takes the step
    again once Postgres is back, and completes."""
    monkeypatch.setattr(activity_options, "INFRASTRUCTURE_RETRIES", 0)
    monkeypatch.setattr(activity_options, "RATE_LIMITED_RETRIES", 0)
    monkeypatch.setattr(run_limits, "STORE_OUTAGE_WAIT_SECONDS", 3.0)
    model = llm.script(
        f"outage-{uuid.uuid4().hex[:6]}",
        [Reply("FINAL ANSWER: waited out", delay=2)],
        repeat_last=True,
    )
    database_url = str(own_postgres.get_uri())
    async with running_worker(client, settings, database_url=database_url) as running:
        agent = Agent(
            AgentConfig(agent_id="outage-waits", model=model, memory=False, llm_max_attempts=1,
                        llm_timeout_seconds=20),
            Runtime(client, running.task_queue, offline_model=False),
        )  # fmt: skip
        handle = await agent.start("Answer through an outage")
        await wait_for(lambda: len(llm.requests.get(model, [])) == 1, seconds=60)
        stop_postgres(own_postgres)  # while the model answers: the reply has nowhere to go

        async def waiting_for_postgres() -> bool:
            return any([
                e.event_type == EventType.EVENT_TYPE_TIMER_STARTED
                async for e in client.get_workflow_handle(handle.id).fetch_history_events()
            ])  # fmt: skip

        await wait_for(waiting_for_postgres, seconds=90)
        waiting = (await agent.progress(handle.id)).retrying  # what `progress` tells on call
        assert waiting is not None and waiting.step == "llm_step"
        assert "Postgres unavailable" in (waiting.last_failure or "")
        await asyncio.to_thread(own_postgres.ensure_postgres_running)
        result = await asyncio.wait_for(agent.result(handle), timeout=120)

    assert result.success and result.terminated_by == "final_answer"
    assert result.output == "waited out" and result.error is None
    failures = [
        e.activity_task_failed_event_attributes.failure
        async for e in client.get_workflow_handle(handle.id).fetch_history_events()
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED
    ]
    assert [f.application_failure_info.type for f in failures] == ["StoreUnavailable"]
    assert "Postgres unavailable while recording the model's reply" in failures[0].message
    assert len(llm.requests[model]) == 2  # the lost reply, and the step taken again
    await assert_no_failed_tasks(client, handle.id)
