"""Steps do their work at most once: a retried step returns what an earlier attempt recorded;
a tool's activity lives as long as the tool's own timeout. Real Postgres, real dev server."""

from __future__ import annotations

import dataclasses
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.testing import ActivityEnvironment

from activities.store import Store
from activities.tool_calls import ToolActivities
from reactive_temporal.contracts import names
from reactive_temporal.contracts.run import Message, RunToolInput, ToolCall, ToolResult
from reactive_temporal.embedded.scripted_llm import Reply, ScriptedLLM, call
from reactive_temporal.tools import ToolRegistry, current_tool_call, tool
from tests.workflow.conftest import Harness, running_worker

pytestmark = pytest.mark.workflow


def attempt(number: int) -> ActivityEnvironment:
    env = ActivityEnvironment()
    env.info = dataclasses.replace(
        env.info,
        attempt=number,
        started_time=datetime.now(UTC),
        start_to_close_timeout=timedelta(seconds=30),
    )
    return env


async def test_a_retried_tool_step_returns_the_recorded_result_without_running_the_tool(
    harness: Harness,
):
    ran: list[str] = []

    @tool
    async def charge_card(amount: int) -> str:
        """Charge the card (a side effect)."""
        ran.append(current_tool_call().idempotency_key)
        return f"charged {amount}"

    activities = ToolActivities(harness.store, ToolRegistry([charge_card]))
    run_id = f"run-records-{uuid.uuid4().hex[:8]}"
    step = RunToolInput(
        run_id=run_id, seq=5, call=ToolCall(id="c1", name="charge_card", arguments='{"amount": 7}')
    )

    first = await attempt(1).run(activities.run_tool, step)
    assert first.success and first.content == "charged 7" and ran == [f"{run_id}:5"]

    # the attempt's completion was lost (worker died, timeout): Temporal runs it again
    again = await attempt(2).run(activities.run_tool, step)
    assert again == first and ran == [f"{run_id}:5"]  # recorded, returned, not run again
    transcript = await harness.store.load_messages(run_id)
    assert [m.content for m in transcript] == ["charged 7"]


async def test_a_first_attempt_does_its_work_even_over_a_record(harness: Harness):
    """A reset run starts its steps again at attempt 1: they must do their work again."""
    ran: list[int] = []

    @tool
    async def count(n: int) -> str:
        """Count."""
        ran.append(n)
        return f"counted {n}"

    store: Store = harness.store
    run_id = f"run-reset-{uuid.uuid4().hex[:8]}"
    old = ToolResult(call_id="c1", name="count", success=True, content="counted 1")
    await store.record_step(run_id, 4, Message(role="tool", content="counted 1"), old)
    activities = ToolActivities(store, ToolRegistry([count]))
    step = RunToolInput(
        run_id=run_id, seq=4, call=ToolCall(id="c2", name="count", arguments='{"n": 2}')
    )
    result = await attempt(1).run(activities.run_tool, step)
    assert result.content == "counted 2" and ran == [2]
    assert await store.recorded_step(run_id, 4) == result.model_dump(mode="json")


async def test_a_tool_activity_lives_as_long_as_the_tools_own_timeout(
    client: Client, settings, llm: ScriptedLLM, model_name: str
):
    @tool(timeout_seconds=600)
    async def slow_report(topic: str) -> str:
        """A report that may take up to ten minutes."""
        return f"report on {topic}"

    llm.script(
        model_name,
        [Reply(None, [call("slow_report", topic="sales")]), Reply("FINAL ANSWER: done")],
    )
    async with running_worker(client, settings, extra_tools=[slow_report]) as running:
        result = await running.run(
            model_name, "Report on sales", memory=False, tool_timeout_seconds=120
        )
    history = await client.get_workflow_handle(result.run_id).fetch_history()
    timeouts = [
        e.activity_task_scheduled_event_attributes.start_to_close_timeout.ToTimedelta()
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        and e.activity_task_scheduled_event_attributes.activity_type.name == names.RUN_TOOL
    ]
    assert len(timeouts) == 1 and timeouts[0] >= timedelta(seconds=600)
