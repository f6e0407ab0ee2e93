"""Stopping a run from outside or at a limit: cancel (ours and Temporal's own), a terminated
run, token and cost budgets, the deadline. Real dev server and Postgres, scripted models
over HTTP."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowExecutionStatus

from activities.debrief_store import DebriefStore
from reactive_temporal.api.runs import list_runs, runs_query
from reactive_temporal.contracts.run import RunProgress
from reactive_temporal.embedded.scripted_llm import Reply, ScriptedLLM, Step, call
from reactive_temporal.pricing import register_price
from reactive_temporal.prompts import SYNTHESIS_SYSTEM_PROMPT
from reactive_temporal.telemetry.metrics import REGISTRY
from tests.conftest import wait_for
from tests.workflow.conftest import Harness
from workflows.agent_run import AgentRunWorkflow

pytestmark = pytest.mark.workflow

SLOW = 90.0
"""Seconds the scripted model takes on a slow step: far longer than any test waits."""
HANG_GUARD = 60.0
"""Seconds a test waits for what it expects before it says it never happened."""


def unique_agent() -> str:
    return f"ctl-{uuid.uuid4().hex[:8]}"


def is_chat(request: dict[str, Any]) -> bool:
    system = next(
        (m.get("content") or "" for m in request["messages"] if m["role"] == "system"), ""
    )
    return "Answer conversationally" in system and not request.get("tools")


def run_then_chat(run_steps: list[Step]) -> Any:
    """A responder: the run's steps in order, a fixed reply to every chat turn, and an
    instant one to whatever comes after the steps (the debrief's synthesis: were it given the
    last, slow step again, `debrief_rich()` would wait out its delay)."""
    steps = iter(run_steps)

    def respond(request: dict[str, Any]) -> Step:
        if is_chat(request):
            return Reply("(chat reply)")
        return next(steps, Reply("(after the run's steps)"))

    return respond


def chat_prompts(llm: ScriptedLLM, model: str) -> list[str]:
    """What each chat turn's request told the model (system prompt and quoted notes)."""
    return [
        "\n".join(
            line.removeprefix("> ")
            for m in r["messages"]
            for line in (m.get("content") or "").splitlines()
        )
        for r in llm.requests[model]
        if is_chat(r)
    ]


async def in_llm_call(handle, iteration: int, llm: ScriptedLLM, model: str) -> None:
    """Wait until the run is in the LLM call of `iteration` (0-based) and that call's request
    has reached the model. The workflow reports the iteration as soon as it schedules the
    activity; a cancel before a worker picks the activity up cancels it unstarted, and the
    model never sees a call to hang up (seen in CI on a loaded machine)."""

    async def there() -> bool:
        progress: RunProgress = await handle.query(AgentRunWorkflow.progress)
        asked = [r for r in llm.requests[model] if not is_chat(r)]
        return (
            progress.iteration == iteration
            and progress.status == "running"
            and len(asked) > iteration
        )

    await wait_for(there, seconds=HANG_GUARD)


async def run_key(handle) -> str:
    return (await handle.describe()).run_id


async def llm_call_abandoned(
    llm: ScriptedLLM, model: str, handle, calls_stopped: dict[str, int]
) -> None:
    """The stopped run's LLM call was stopped by the run's wrap-up while still in flight
    (`activities.run_stops`; call this when the run's result is in), and hung up on the
    model. Without the wrap-up's stop it learned of the cancel only from a heartbeat's reply,
    the first 10 s into the call, then one per 24 s: it was not on the board to be stopped."""
    assert calls_stopped.get(await run_key(handle)) == 1

    async def hung_up() -> bool:
        return llm.abandoned[model] == 1

    await wait_for(hung_up, seconds=HANG_GUARD)


async def history_events(handle) -> list[int]:
    return [e.event_type for e in (await handle.fetch_history()).events]


async def test_cancel_during_a_slow_llm_call_ends_the_run_gracefully(
    harness: Harness, llm: ScriptedLLM, model_name, database_url, calls_stopped
):
    agent_id = unique_agent()
    llm.script(
        model_name,
        run_then_chat(
            [
                Reply("Checking the stock first.", [call("calculator", expression="6*7")]),
                Reply("FINAL ANSWER: too late", delay=SLOW),
            ]
        ),
    )
    agent = harness.agent(model_name, agent_id=agent_id)
    handle = await agent.start("Count the widgets")
    await in_llm_call(handle, 1, llm, model_name)
    reply = await agent.chat("How is it going?", use_tools=False)
    assert reply.message == "(chat reply)"
    assert f"Run {handle.id} is at iteration 2" in chat_prompts(llm, model_name)[-1]

    # returns with the run, not after the slow reply (SLOW, ~85 s from here)
    result = await asyncio.wait_for(agent.cancel(handle.id, reason="wrong warehouse"), HANG_GUARD)

    assert result.terminated_by == "cancelled"
    assert result.success is False
    assert result.output == "Checking the stock first."  # the last text it wrote
    assert result.error == "cancelled: wrong warehouse"
    assert result.metadata.duration_ms < SLOW * 1000  # it did not wait for the slow reply
    assert result.debrief is not None
    assert result.debrief.errors_encountered[0] == "Stopped: cancelled: wrong warehouse"
    assert "stopped" in result.debrief.summary
    description = await handle.describe()
    assert description.status == WorkflowExecutionStatus.COMPLETED  # returned, not cancelled
    events = await history_events(handle)
    assert EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CANCEL_REQUESTED in events
    assert EventType.EVENT_TYPE_ACTIVITY_TASK_CANCEL_REQUESTED in events  # the LLM call
    await llm_call_abandoned(llm, model_name, handle, calls_stopped)

    # the rich debrief is written and its row stored, once
    rich = await result.debrief_rich()
    assert rich is not None
    stored = await DebriefStore(harness.store).get(handle.id)
    assert stored is not None and stored.debrief.errors_encountered[0].startswith("Stopped:")
    async with harness.store.pool.connection() as conn:
        cur = await conn.execute(
            "SELECT count(*) FROM agent_debriefs WHERE run_id = %s", (handle.id,)
        )
        assert (await cur.fetchone()) == (1,)

    # the agent was told: its last debrief is this run's, and chat no longer sees it running
    last = await agent.get_last_debrief()
    assert last is not None and last.errors_encountered[0] == "Stopped: cancelled: wrong warehouse"
    await agent.chat("And now?", use_tools=False)
    assert f"Run {handle.id} is at iteration" not in chat_prompts(llm, model_name)[-1]

    # `runs` shows it over, ended by the cancel
    async def listed() -> bool:
        found = await list_runs(harness.client, runs_query(agent_id, None, "cancelled"))
        return [(r.run_id, r.status, r.terminated_by) for r in found] == [
            (handle.id, "completed", "cancelled")
        ]

    await wait_for(listed, seconds=HANG_GUARD)


async def test_temporal_cancel_ends_the_run_the_same_way(
    harness: Harness, llm: ScriptedLLM, model_name, calls_stopped
):
    agent_id = unique_agent()
    llm.script(model_name, run_then_chat([Reply("Thinking hard.", delay=SLOW)]))
    agent = harness.agent(model_name, agent_id=agent_id)
    handle = await agent.start("Think about it")
    await in_llm_call(handle, 0, llm, model_name)

    await harness.client.get_workflow_handle(handle.id).cancel()  # what the Web UI does

    result = await asyncio.wait_for(agent.result(handle), HANG_GUARD)  # not after the reply
    assert (result.terminated_by, result.success, result.error) == ("cancelled", False, "cancelled")
    assert result.metadata.duration_ms < SLOW * 1000  # it did not wait for the slow reply
    await llm_call_abandoned(llm, model_name, handle, calls_stopped)
    # the stopped call failed after its run had closed: not into the run's history, where it
    # would have made Temporal ask the run for one more workflow task
    events = await history_events(handle)
    assert EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED not in events
    assert events[-1] == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED
    assert result.output == ""  # nothing written yet
    assert result.debrief is not None and result.debrief.outcome == "partial"
    assert (await handle.describe()).status == WorkflowExecutionStatus.COMPLETED
    assert (await result.debrief_rich()) is not None
    async with harness.store.pool.connection() as conn:
        cur = await conn.execute(
            "SELECT count(*) FROM agent_debriefs WHERE run_id = %s", (handle.id,)
        )
        assert (await cur.fetchone()) == (1,)
    last = await agent.get_last_debrief()
    assert last is not None and last.errors_encountered[0] == "Stopped: cancelled"
    await agent.chat("Still thinking?", use_tools=False)
    assert f"Run {handle.id} is at iteration" not in chat_prompts(llm, model_name)[-1]

    async def listed() -> bool:
        found = await list_runs(harness.client, runs_query(agent_id, "completed", "cancelled"))
        return [r.run_id for r in found] == [handle.id]

    await wait_for(listed, seconds=HANG_GUARD)


async def test_cancel_while_tools_run_cancels_them(
    harness: Harness, llm: ScriptedLLM, model_name, calls_stopped
):
    """The cancel reaches parallel tool activities, which are not reported as failed tools."""
    from reactive_temporal.tools import tool

    started: list[str] = []
    learned: list[str] = []

    @tool
    async def slow_lookup(sku: str) -> str:
        """Look up a SKU, slowly."""
        started.append(sku)
        try:
            await asyncio.sleep(SLOW)
        except asyncio.CancelledError:
            learned.append(sku)  # the run's wrap-up stops its tools in flight
            raise
        return "found"

    harness.worker.registry.add(slow_lookup)
    llm.script(
        model_name,
        [Reply("Looking both up.", [call("slow_lookup", sku="A"), call("slow_lookup", sku="B")])],
    )
    agent = harness.agent(model_name, agent_id=unique_agent())
    handle = await agent.start("Find A and B")

    async def running_tool() -> bool:  # both started: a cancel before that skips them unrun
        progress: RunProgress = await handle.query(AgentRunWorkflow.progress)
        return progress.current_tool == "slow_lookup" and sorted(started) == ["A", "B"]

    await wait_for(running_tool, seconds=HANG_GUARD)
    result = await agent.cancel(handle.id)
    assert result.terminated_by == "cancelled"
    assert result.output == "Looking both up."
    assert result.debrief is not None
    assert not any("slow_lookup failed" in e for e in result.debrief.errors_encountered)
    events = await history_events(handle)
    assert events.count(EventType.EVENT_TYPE_ACTIVITY_TASK_CANCEL_REQUESTED) == 2

    async def both_learned() -> bool:
        return sorted(learned) == ["A", "B"]

    assert calls_stopped.get(await run_key(handle)) == 2  # by the wrap-up, not a heartbeat
    await wait_for(both_learned, seconds=HANG_GUARD)
    cancelled = {"tool": "slow_lookup", "outcome": "cancelled"}
    assert REGISTRY.get_sample_value("reactive_temporal_tool_calls_total", cancelled) == 2


async def test_a_terminated_run_is_over_for_chat_and_runs(
    harness: Harness, llm: ScriptedLLM, model_name
):
    agent_id = unique_agent()
    llm.script(model_name, run_then_chat([Reply("Working on it.", delay=SLOW)]))
    agent = harness.agent(model_name, agent_id=agent_id)
    handle = await agent.start("A long job")
    await in_llm_call(handle, 0, llm, model_name)
    await agent.chat("Status?", use_tools=False)
    assert f"Run {handle.id} is at iteration 1" in chat_prompts(llm, model_name)[-1]

    await harness.client.get_workflow_handle(handle.id).terminate(reason="operator")

    await agent.chat("Status now?", use_tools=False)  # no code of the run ran to say so
    assert f"Run {handle.id} is at iteration" not in chat_prompts(llm, model_name)[-1]

    async def listed() -> bool:
        found = await list_runs(harness.client, runs_query(agent_id, "terminated", None))
        return [(r.run_id, r.status) for r in found] == [(handle.id, "terminated")]

    await wait_for(listed, seconds=HANG_GUARD)


async def test_a_token_budget_ends_a_looping_run(harness: Harness, llm: ScriptedLLM, model_name):
    llm.script(
        model_name,
        [Reply("Once more.", [call("calculator", expression="1+1")], usage=(1000, 100))],
        repeat_last=True,
    )
    result = await harness.run(model_name, "Loop", agent_id=unique_agent(), token_budget=2500)

    assert result.terminated_by == "budget_exceeded"
    assert result.success is False
    assert result.metadata.iterations == 3  # 1,100 · 2,200 · 3,300 tokens: over after the third
    assert result.metadata.tokens_used == 3300
    assert result.metadata.steps_count == 5  # 3 LLM steps, 2 tool calls: the third turn's
    assert result.output == "Once more."  # tool call did not run
    assert result.error == "token budget of 2,500 exceeded: 3,300 tokens used"
    assert result.debrief is not None
    assert result.debrief.errors_encountered[0] == f"Stopped: {result.error}"
    assert "token budget of 2,500" in result.debrief.markdown


async def test_a_cost_budget_on_a_model_with_no_price_is_not_called(
    harness: Harness, llm: ScriptedLLM, model_name
):
    """A model the worker has no price for costs $0 a call: a cost budget on it never ended
    the run, which looped for as long as the model called tools (here to its iteration cap,
    on a budget of a cent). Its LLM step fails for good (`llm_error`) naming the model and
    what to do; the run's steps never call the model. (Its debrief's synthesis, a call of
    its own outside the run's budget, may: it was a race with the assertion below.)"""
    llm.script(model_name, [Reply("Once more.", [call("calculator", expression="2+2")])],
               repeat_last=True)  # fmt: skip
    agent_id = unique_agent()
    result = await harness.run(model_name, "Loop", agent_id=agent_id, cost_budget=0.01)

    assert (result.terminated_by, result.success) == ("llm_error", False)
    assert result.error is not None
    assert f"no price for model {model_name!r}" in result.error
    assert "AGENT_MODEL_PRICES" in result.error
    await result.debrief_rich()  # the debrief's synthesis is done: every call there was
    steps = [
        r for r in llm.requests.get(model_name, [])
        if r["messages"][0]["content"] != SYNTHESIS_SYSTEM_PROMPT
    ]  # fmt: skip
    assert steps == []
    assert result.metadata.tokens_used == 0
    assert result.debrief is not None


async def test_a_cost_budget_ends_a_looping_run(harness: Harness, llm: ScriptedLLM, model_name):
    register_price(model_name, input_per_mtok=1000.0, output_per_mtok=1000.0)  # $1.10 a step
    llm.script(
        model_name,
        [Reply("Once more.", [call("calculator", expression="2+2")], usage=(1000, 100))],
        repeat_last=True,
    )
    result = await harness.run(model_name, "Loop", agent_id=unique_agent(), cost_budget=2.0)

    assert result.terminated_by == "budget_exceeded"
    assert result.metadata.iterations == 2
    assert result.metadata.cost == pytest.approx(2.2)
    assert result.error == "cost budget of $2.0000 exceeded: $2.2000 spent"
    assert result.debrief is not None and "cost budget" in result.debrief.errors_encountered[0]


async def test_a_final_answer_on_the_step_that_crosses_the_budget_still_counts(
    harness: Harness, llm: ScriptedLLM, model_name
):
    llm.script(model_name, [Reply("FINAL ANSWER: 4", usage=(5000, 10))])
    result = await harness.run(model_name, "2+2?", agent_id=unique_agent(), token_budget=100)
    assert (result.terminated_by, result.output, result.success) == ("final_answer", "4", True)


async def test_the_deadline_ends_a_run_whose_llm_is_slow(
    harness: Harness, llm: ScriptedLLM, model_name, calls_stopped
):
    llm.script(
        model_name,
        [
            Reply("First look.", [call("calculator", expression="3*3")]),
            Reply("FINAL ANSWER: 9", delay=SLOW),
        ],
    )
    # 15 s: room for the first turn on a loaded machine (a worker there has been seen 10 s late
    # with a workflow task); the second never answers in time
    agent = harness.agent(model_name, agent_id=unique_agent(), timeout_seconds=15)
    handle = await agent.start("Square three")
    result = await agent.result(handle)

    assert result.terminated_by == "timeout"
    assert result.success is False
    assert result.output == "First look."
    assert result.error == "deadline of 15 s reached during an LLM call"
    assert result.metadata.duration_ms < SLOW * 1000
    assert result.debrief is not None and result.debrief.errors_encountered[0] == (
        "Stopped: deadline of 15 s reached during an LLM call"
    )
    events = await history_events(handle)
    assert EventType.EVENT_TYPE_TIMER_FIRED in events
    assert EventType.EVENT_TYPE_ACTIVITY_TASK_CANCEL_REQUESTED in events
    if len(llm.requests[model_name]) == 2:  # the second call reached the model before 15 s
        await llm_call_abandoned(llm, model_name, handle, calls_stopped)


async def test_a_run_that_ends_before_its_deadline_cancels_the_timer(
    harness: Harness, llm: ScriptedLLM, model_name
):
    llm.script(model_name, [Reply("FINAL ANSWER: quick")])
    agent = harness.agent(model_name, agent_id=unique_agent(), timeout_seconds=600)
    handle = await agent.start("Be quick")
    result = await agent.result(handle)
    assert (result.terminated_by, result.success) == ("final_answer", True)
    events = await history_events(handle)
    assert EventType.EVENT_TYPE_TIMER_STARTED in events
    assert EventType.EVENT_TYPE_TIMER_CANCELED in events


async def test_cancel_refuses_unknown_and_finished_runs(
    harness: Harness, llm: ScriptedLLM, model_name
):
    llm.script(model_name, [Reply("FINAL ANSWER: done")])
    agent = harness.agent(model_name, agent_id=unique_agent())
    result = await agent.run("Quick")
    with pytest.raises(ValueError, match="no run with id 'run-nope'"):
        await agent.cancel("run-nope")
    with pytest.raises(
        ValueError, match=f"run '{result.run_id}' is not running \\(it is completed\\)"
    ):
        await agent.cancel(result.run_id)
    with pytest.raises(ValueError, match="limit is 500"):
        await agent.cancel(result.run_id, reason="x" * 501)
