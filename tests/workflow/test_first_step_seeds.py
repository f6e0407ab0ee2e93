"""A run seeds its transcript and resolves its tools in its first LLM step (the
first-step-seeds patch), not in a `prepare_run` local activity before it; a retried first
step goes on after the seed it wrote. Real Postgres, real dev server, scripted model over
HTTP."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from activities.debrief_store import DebriefStore
from activities.llm_calls import LlmEndpoint
from activities.llm_step import LlmActivities
from activities.store import Store
from reactive_temporal.contracts.debrief import AgentDebrief, DebriefInput
from reactive_temporal.contracts.llm_payloads import LlmStepInput
from reactive_temporal.contracts.run import RunSeed
from reactive_temporal.embedded.scripted_llm import HttpError, Reply, ScriptedLLM, call
from reactive_temporal.hosting.worker_factory import llm_client
from reactive_temporal.prompts import NOTES_LABEL
from reactive_temporal.tool_registry import ToolRegistry
from tests.support.pg_proxy import CountingProxy
from tests.support.steps import attempt
from tests.workflow.conftest import Harness

pytestmark = pytest.mark.workflow


async def remember(harness: Harness, agent_id: str, summary: str) -> None:
    """An earlier run of the agent, so that a new run has notes to seed."""
    await DebriefStore(harness.store).save(
        DebriefInput(
            run_id=f"run-{agent_id}-earlier", agent_id=agent_id, task="count the stock",
            terminated_by="final_answer",
        ),
        AgentDebrief(summary=summary, outcome="success", lessons_learned=["count twice"]),
    )  # fmt: skip


async def test_a_run_seeds_in_its_first_llm_step(
    harness: Harness, client: Client, llm: ScriptedLLM, model_name: str
):
    """No marker before the first activity (a `prepare_run` local activity recorded one):
    the first LLM step writes the system prompt, the task and the notes, offers the run's
    tools, and the reply goes after the notes."""
    agent_id = f"seeds-{uuid.uuid4().hex[:8]}"
    await remember(harness, agent_id, "counted 41 crates")
    llm.script(
        model_name,
        [Reply(None, [call("calculator", expression="41+1")]), Reply("FINAL ANSWER: 42")],
    )
    agent = harness.agent(model_name, agent_id=agent_id, tools=["calculator"])
    result = await agent.run("count the stock again")
    assert result.output == "42"

    history = await client.get_workflow_handle(result.run_id).fetch_history()
    types = [e.event_type for e in history.events]
    first_activity = types.index(EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED)
    assert EventType.EVENT_TYPE_MARKER_RECORDED not in types[:first_activity]
    assert types[:first_activity].count(EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED) == 1

    transcript = await harness.store.load_transcript(result.run_id)
    assert [e.message.role for e in transcript] == [
        "system", "user", "user", "assistant", "tool", "assistant"
    ]  # fmt: skip
    assert [e.seq for e in transcript] == list(range(6))
    assert transcript[1].message.content == "count the stock again"
    notes = transcript[2].message.content or ""
    assert notes.startswith(NOTES_LABEL) and "counted 41 crates" in notes
    first_request = llm.requests[model_name][0]
    assert [t["function"]["name"] for t in first_request["tools"]] == ["calculator"]
    assert len(first_request["messages"]) == 2  # the notes go in the task's user turn


async def test_a_retried_first_step_goes_on_after_the_seed_it_wrote(
    harness: Harness, settings, llm: ScriptedLLM, model_name: str
):
    """An attempt that wrote the seed and then failed leaves it in place: the next attempt
    neither reads the notes again (a lesson learnt meanwhile would move the reply) nor
    writes the seed twice, and an attempt after the reply was recorded returns it."""
    agent_id = f"reseed-{uuid.uuid4().hex[:8]}"
    run_id = f"run-{agent_id}"
    llm.script(model_name, [HttpError(400, "the first attempt fails"), Reply("done")])
    endpoint = LlmEndpoint(llm_client(settings, llm.base_url))
    activities = LlmActivities(harness.store, endpoint, harness.worker.registry)
    step = LlmStepInput(
        run_id=run_id, seq=0, iteration=0, model=model_name, tool_names=[], max_attempts=1,
        seed=RunSeed(task="count the stock", agent_id=agent_id, tools=["calculator"]),
    )  # fmt: skip
    try:
        with pytest.raises(Exception, match="the first attempt fails"):
            await attempt(1).run(activities.llm_step, step)
        seeded = await harness.store.load_transcript(run_id)
        assert [e.message.role for e in seeded] == ["system", "user"]

        await remember(harness, agent_id, "learnt between two attempts")
        second = await attempt(2).run(activities.llm_step, step)
        third = await attempt(3).run(activities.llm_step, step)
    finally:
        await endpoint.close()
    assert second.content == "done"
    assert second.prepared is not None and second.prepared.next_seq == 2
    assert second.prepared.tool_names == ["calculator"]
    assert third == second
    assert len(llm.requests[model_name]) == 2  # the failed call and one more
    transcript = await harness.store.load_transcript(run_id)
    assert [(e.seq, e.message.role) for e in transcript] == [
        (0, "system"), (1, "user"), (2, "assistant")
    ]  # fmt: skip


async def test_runs_started_at_once_lose_no_first_workflow_task_on_a_worker_without_a_cache(
    harness: Harness, client: Client, llm: ScriptedLLM
):
    """The suite's worker keeps no workflow cache: every task replays, and runs started
    together take turns at it. A first task that ran a local activity (`prepare_run`) lost
    it to the next run's task and timed out 10 s later (10, 20, 30 s for three of four
    runs); a first task with nothing in flight completes. (The wrap-up's `notify_agent` is
    still a local activity: runs ending together on such a worker can lose that task.)"""
    models = [
        llm.script(f"at-once-{i}-{uuid.uuid4().hex[:6]}", [Reply("FINAL ANSWER: ok")])
        for i in range(4)
    ]
    results = await asyncio.gather(*(harness.run(m, f"task {i}") for i, m in enumerate(models)))
    assert [r.terminated_by for r in results] == ["final_answer"] * 4
    for result in results:
        history = await client.get_workflow_handle(result.run_id).fetch_history()
        types = [e.event_type for e in history.events]
        first_step = types.index(EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED)
        assert EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT not in types[:first_step], " ".join(
            EventType.Name(t).removeprefix("EVENT_TYPE_") for t in types[:first_step]
        )


async def test_a_first_step_with_memory_reaches_the_model_in_two_round_trips(
    database_url: str, settings, llm: ScriptedLLM, model_name: str
):
    """Before the model call: the transcript and the agent's notes in one round trip, the
    seed in another; the step holds the seed it wrote and reads nothing back. The reply's
    record is one more (counted at a proxy; nothing timed)."""
    agent_id = f"trips-{uuid.uuid4().hex[:8]}"
    proxy = await CountingProxy(database_url).start()
    store = await Store.open(proxy.url, max_size=1)
    endpoint = LlmEndpoint(llm_client(settings, llm.base_url))
    try:
        await DebriefStore(store).save(
            DebriefInput(
                run_id=f"run-{agent_id}-1", agent_id=agent_id, task="count the stock",
                terminated_by="final_answer",
            ),
            AgentDebrief(summary="counted", outcome="success", lessons_learned=["count twice"]),
        )  # fmt: skip
        llm.script(model_name, [Reply("done")])
        activities = LlmActivities(store, endpoint, ToolRegistry([]))
        step = LlmStepInput(
            run_id=f"run-{agent_id}-2", seq=0, iteration=0, model=model_name, tool_names=[],
            seed=RunSeed(task="count the stock again", agent_id=agent_id, tools=[]),
        )  # fmt: skip
        proxy.round_trips = 0
        result = await attempt(1).run(activities.llm_step, step)
        assert result.prepared is not None and result.prepared.next_seq == 3
        assert proxy.round_trips == 3
        request = llm.requests[model_name][0]
        assert "count twice" in request["messages"][1]["content"]  # with the task
    finally:
        await endpoint.close()
        await store.close()
        await proxy.stop()
