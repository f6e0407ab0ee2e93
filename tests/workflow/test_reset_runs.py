"""A reset run (`temporal workflow reset`, the Web UI's reset, `starter.py rerun`) takes a new
timeline at positions its old one already filled in Postgres: its steps, its live output and
its debrief must be the new timeline's, never the old one's. Real dev server and Postgres."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import psycopg
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.enums.v1 import EventType
from temporalio.api.workflowservice.v1 import ResetWorkflowExecutionRequest
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHandle

from reactive_temporal import search_attributes as sa
from reactive_temporal.api.debriefs import load_debrief
from reactive_temporal.api.rerun import rerun_from_failure
from reactive_temporal.api.run_results import RunResult, run_result
from reactive_temporal.api.runs import list_runs, runs_query
from reactive_temporal.api.watching import follow_events
from reactive_temporal.contracts import names
from reactive_temporal.contracts.events import RunEvent
from reactive_temporal.contracts.result import AgentResult
from reactive_temporal.embedded.scripted_llm import HttpError, Reply, ScriptedLLM, call
from tests.conftest import wait_for
from tests.workflow.conftest import Harness


async def reset_to_first_task(client: Client, workflow_id: str) -> str:
    """The run reset to its first completed workflow task, as an operator does; the new
    Temporal run id."""
    handle = client.get_workflow_handle(workflow_id)
    history = await handle.fetch_history()
    first = next(
        e.event_id
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED
    )
    response = await client.workflow_service.reset_workflow_execution(
        ResetWorkflowExecutionRequest(
            namespace=client.namespace,
            workflow_execution=WorkflowExecution(workflow_id=workflow_id),
            reason="test: an operator's reset",
            workflow_task_finish_event_id=first,
            request_id=str(uuid.uuid4()),
        )
    )
    return str(response.run_id)


async def rows(database_url: str, query: str, *params: object) -> list[tuple]:
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        cur = await conn.execute(query, params)  # type: ignore[arg-type]
        return await cur.fetchall()


async def test_a_reset_run_does_its_steps_again_and_shows_them(
    harness: Harness, client: Client, llm: ScriptedLLM, model_name: str, database_url: str
):
    """Its retried model step called the model again (it returned the row the old timeline
    recorded at its position, a tool's result, as the model's reply: the run "succeeded" with
    it), and watchers see its tool calls (the old timeline's keys hid them)."""
    llm.script(
        model_name,
        [
            Reply(None, [call("calculator", expression=e) for e in ("2+2", "3+3")]),
            Reply("FINAL ANSWER: 4 and 6"),
        ],
    )
    first = await harness.run(model_name, "Compute what you need", memory=False)
    assert first.output == "4 and 6"

    # now one call, then an overloaded model, then the answer: the step at the position of
    # the old timeline's second tool result is retried
    llm.script(
        model_name,
        [
            Reply(None, [call("calculator", expression="7*7")]),
            HttpError(503, "overloaded"),
            Reply("FINAL ANSWER: 49"),
        ],
    )
    llm.requests[model_name].clear()
    new_run = await reset_to_first_task(client, first.run_id)
    handle = client.get_workflow_handle(first.run_id, run_id=new_run, result_type=AgentResult)
    result = await asyncio.wait_for(handle.result(), 60)
    assert (result.terminated_by, result.output) == ("final_answer", "49")
    assert len(llm.requests[model_name]) == 3  # the retried step asked the model again

    started = await rows(
        database_url,
        "SELECT data->>'arguments' FROM run_events WHERE run_id = %s AND type = 'tool_start'"
        ' ORDER BY "offset"',
        first.run_id,
    )
    assert [json.loads(a)["expression"] for (a,) in started] == ["2+2", "3+3", "7*7"]


DEBRIEF = json.dumps(
    {
        "summary": "the failed run's debrief",
        "key_findings": ["the model failed"],
        "lessons_learned": ["a lesson of the failed run"],
        "confidence": "low",
    }
)


async def failed_while_debriefed(
    harness: Harness, client: Client, llm: ScriptedLLM, model_name: str, prefix: str
) -> tuple[str, RunResult, WorkflowHandle[Any, Any]]:
    """A run of a new agent that failed (`llm_error`) after a tool call, its debrief still
    synthesizing (4 s): the agent, the run's result and its debrief workflow."""
    debrief_model = f"{model_name}-debrief"
    llm.script(debrief_model, [Reply(DEBRIEF, delay=4)], repeat_last=True)
    llm.script(
        model_name,
        [Reply(None, [call("calculator", expression="5*5")]), HttpError(400, "model not found")],
    )
    agent_id = f"{prefix}-{uuid.uuid4().hex[:8]}"
    failed = await harness.run(
        model_name, "5*5 then answer", agent_id=agent_id, debrief_model=debrief_model
    )
    assert failed.terminated_by == "llm_error"
    return agent_id, failed, client.get_workflow_handle(names.debrief_workflow_id(failed.run_id))


async def test_a_rerun_waits_for_the_failed_run_s_debrief(
    harness: Harness, client: Client, llm: ScriptedLLM, model_name: str, database_url: str
):
    """Rerun at once, while the failed run's debrief is still being synthesized: that debrief
    finished after the rerun had kept its own and wrote the failure over it (the debrief row,
    the agent's lessons and its last run all said the rerun had failed)."""
    agent_id, failed, _ = await failed_while_debriefed(harness, client, llm, model_name, "rerun")

    llm.script(model_name, [Reply("FINAL ANSWER: 25")], repeat_last=True)
    said: list[str] = []
    new_run = await rerun_from_failure(client, failed.run_id, notice=said.append)
    assert said and "debrief" in said[0]
    rerun = client.get_workflow_handle(failed.run_id, run_id=new_run, result_type=AgentResult)
    assert (await rerun.result()).terminated_by == "final_answer"

    async def settled() -> bool:
        kept = await rows(
            database_url,
            "SELECT terminated_by FROM agent_debriefs WHERE run_id = %s",
            failed.run_id,
        )
        return kept == [("final_answer",)]

    await wait_for(settled, seconds=60)
    await asyncio.sleep(5)  # the failed run's debrief, had it gone on, would have written by now
    assert await rows(
        database_url, "SELECT terminated_by FROM agent_debriefs WHERE run_id = %s", failed.run_id
    ) == [("final_answer",)]
    lessons = await rows(
        database_url, "SELECT lesson FROM agent_lessons WHERE run_id = %s", failed.run_id
    )
    assert ("a lesson of the failed run",) not in lessons, lessons
    last = await rows(
        database_url,
        "SELECT run_id, run->'debrief'->>'outcome' FROM agent_last_runs WHERE agent_id = %s",
        agent_id,
    )
    assert last == [(failed.run_id, "success")], last
    # `debrief RUN_ID` showed the failed attempt's debrief ("failed"): its child, the last
    # DebriefWorkflow with the run's debrief id when the rerun started none of its own
    for wait_for_rich in (False, True):
        shown = await load_debrief(client, failed.run_id, wait_for_rich=wait_for_rich)
        assert shown is not None and shown.outcome == "success", (wait_for_rich, shown)

    async def listed_once() -> bool:  # `runs` listed the failed execution beside the rerun
        listed = await list_runs(client, runs_query(agent=agent_id))
        return [(r.run_id, r.terminated_by) for r in listed] == [(failed.run_id, "final_answer")]

    await wait_for(listed_once, seconds=60)


async def test_a_run_reset_while_awaited_and_watched_is_followed_to_its_end(
    harness: Harness, client: Client, llm: ScriptedLLM, model_name: str, database_url: str
):
    """Reset while its second model call hangs: the server terminates the execution being
    awaited and goes on in a new one. Its waiter (`run`, `Agent.result`) raised AgentRunError
    ("terminated") and its watcher ended with a `finished` event of status "running" and no
    result, while the run went on to its answer; both now follow it there."""
    llm.script(
        model_name,
        [
            Reply(None, [call("calculator", expression="2+2")]),
            Reply("FINAL ANSWER: 4", delay=90),  # the old timeline never gets past it
            Reply(None, [call("calculator", expression="3+3")]),
            Reply("FINAL ANSWER: 6"),
        ],
    )
    handle = await harness.start(model_name, "Compute what you need", memory=False)
    awaited = asyncio.ensure_future(run_result(client, handle))
    events: list[RunEvent] = []

    async def watch() -> None:
        async for event in follow_events(client, database_url, handle.id):
            events.append(event)

    watched = asyncio.ensure_future(watch())

    async def in_second_call() -> bool:
        return len(llm.requests[model_name]) == 2

    await wait_for(in_second_call, seconds=60)
    await reset_to_first_task(client, handle.id)

    result = await asyncio.wait_for(awaited, 60)
    assert (result.terminated_by, result.output) == ("final_answer", "6")
    await asyncio.wait_for(watched, 60)
    last = events[-1]
    assert (last.type, last.status) == ("finished", "completed"), last
    assert last.result is not None and last.result.output == "6"


async def test_a_run_reset_while_its_debrief_is_written_keeps_the_new_timeline_s(
    harness: Harness, client: Client, llm: ScriptedLLM, model_name: str, database_url: str
):
    """Reset from the Web UI (not `rerun`, which waits for the old debrief) while the failed
    run's debrief is still synthesized: the reset run could not start its own debrief (the
    id was taken), and the old one then kept the failed timeline's debrief, its lessons and
    the agent's last run ("failed") for a run that had succeeded. Now the reset run keeps
    its deterministic debrief and the old timeline's is not kept."""
    agent_id, failed, old_debrief = await failed_while_debriefed(
        harness, client, llm, model_name, "reset"
    )
    old_execution = (await old_debrief.describe()).run_id

    llm.script(
        model_name,
        [Reply(None, [call("calculator", expression="5*5")]), Reply("FINAL ANSWER: 25")],
    )
    new_run = await reset_to_first_task(client, failed.run_id)
    reset = client.get_workflow_handle(failed.run_id, run_id=new_run, result_type=AgentResult)
    assert (await asyncio.wait_for(reset.result(), 60)).terminated_by == "final_answer"
    # the old timeline's debrief was ended by the reset run's wrap-up, before it kept anything
    described = await client.get_workflow_handle(old_debrief.id, run_id=old_execution).describe()
    assert described.status == WorkflowExecutionStatus.TERMINATED, described.status

    kept = await rows(
        database_url, "SELECT terminated_by FROM agent_debriefs WHERE run_id = %s", failed.run_id
    )
    assert kept == [("final_answer",)]
    lessons = await rows(
        database_url, "SELECT lesson FROM agent_lessons WHERE run_id = %s", failed.run_id
    )
    assert ("a lesson of the failed run",) not in lessons, lessons
    last = await rows(
        database_url,
        "SELECT run_id, run->'debrief'->>'outcome' FROM agent_last_runs WHERE agent_id = %s",
        agent_id,
    )
    assert last == [(failed.run_id, "success")], last


LONG_ANSWER = "25, " + "and here is why, at length: " * 5
"""An answer past the trivial debrief's length (debrief_rules.TRIVIAL_OUTPUT_CHARS): the run
wants its debrief synthesized, by a child of its own."""


async def test_a_reset_run_that_kept_its_debrief_itself_says_so(
    harness: Harness, client: Client, llm: ScriptedLLM, model_name: str, database_url: str
):
    """Reset while the old timeline's debrief is synthesized, the reset run's answer one to
    synthesize a debrief for: its child cannot start (the id is taken), its wrap-up keeps its
    deterministic debrief itself, and its DebriefStatus said `pending` for good."""
    agent_id, failed, old_debrief = await failed_while_debriefed(
        harness, client, llm, model_name, "kept"
    )
    assert (await old_debrief.describe()).status == WorkflowExecutionStatus.RUNNING

    llm.script(
        model_name,
        [
            Reply(None, [call("calculator", expression="5*5")]),
            Reply(f"FINAL ANSWER: {LONG_ANSWER}"),
        ],
    )
    new_run = await reset_to_first_task(client, failed.run_id)
    reset = client.get_workflow_handle(failed.run_id, run_id=new_run, result_type=AgentResult)
    assert (await asyncio.wait_for(reset.result(), 60)).terminated_by == "final_answer"
    kept = await rows(
        database_url, "SELECT terminated_by FROM agent_debriefs WHERE run_id = %s", failed.run_id
    )
    assert kept == [("final_answer",)]  # kept by the reset run itself, not by a child
    attributes = (await reset.describe()).typed_search_attributes
    assert attributes.get(sa.DEBRIEF_STATUS) == "deterministic"

    # `runs --terminated-by llm_error` listed the old execution (completed, llm_error) of a
    # run whose current one answered
    async def listed_once() -> bool:
        listed = await list_runs(client, runs_query(agent=agent_id))
        return [(r.run_id, r.terminated_by) for r in listed] == [(failed.run_id, "final_answer")]

    await wait_for(listed_once, seconds=60)
    old_ending = await list_runs(client, runs_query(agent=agent_id, terminated_by="llm_error"))
    assert old_ending == [], old_ending


async def test_a_reset_run_going_on_is_not_listed_as_terminated(
    harness: Harness, client: Client, llm: ScriptedLLM, model_name: str
):
    """`runs --status terminated` listed a reset run's old execution, terminated by the reset,
    while the run went on under the same id (plain `runs` listed it once, running)."""
    llm.script(
        model_name,
        [
            Reply(None, [call("calculator", expression="2+2")]),
            Reply("FINAL ANSWER: 4", delay=90),  # the old timeline never gets past it
            Reply(None, [call("calculator", expression="3+3")]),
            Reply("FINAL ANSWER: 6", delay=90),  # nor the new one, while the test looks
        ],
    )
    agent_id = f"listed-{uuid.uuid4().hex[:8]}"
    handle = await harness.start(model_name, "Compute what you need", agent_id=agent_id)

    async def in_call(n: int) -> bool:
        return len(llm.requests[model_name]) == n

    await wait_for(lambda: in_call(2), seconds=60)
    await reset_to_first_task(client, handle.id)
    await wait_for(lambda: in_call(4), seconds=60)  # the reset run is in its second call
    try:
        raw = [
            (wf.id, wf.status)
            async for wf in client.list_workflows(runs_query(agent=agent_id, status="terminated"))
        ]
        assert raw == [(handle.id, WorkflowExecutionStatus.TERMINATED)], raw  # what is asked
        terminated = await list_runs(client, runs_query(agent=agent_id, status="terminated"))
        assert terminated == [], terminated
        running = await list_runs(client, runs_query(agent=agent_id, status="running"))
        assert [r.run_id for r in running] == [handle.id]
    finally:
        await client.get_workflow_handle(handle.id).terminate("test: done looking")
