"""What a run pays Temporal for (issue 14): no child workflow when there is nothing to
synthesize, no search-attribute upsert per iteration, no signal to its agent (counted from
real histories); and a worker's Postgres pool sized from its activity slots."""

from __future__ import annotations

import json
import uuid
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle, WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.service import RPCError, RPCStatusCode

from reactive_temporal import search_attributes as sa
from reactive_temporal.api.agents import Agent
from reactive_temporal.api.replay import replay
from reactive_temporal.api.replay_batch import quiet_replayer
from reactive_temporal.api.run_inputs import build_run_input
from reactive_temporal.config import Settings
from reactive_temporal.contracts import names
from reactive_temporal.contracts.result import AgentResult
from reactive_temporal.embedded.scripted_llm import Reply, ScriptedLLM, call
from reactive_temporal.hosting.worker_factory import WORKFLOWS
from tests.conftest import wait_for
from tests.support.histories import with_bundle_in_input
from tests.workflow.conftest import Harness, running_worker

pytestmark = pytest.mark.workflow


def events_of(history: WorkflowHistory, kind: EventType.ValueType) -> list:
    return [e for e in history.events if e.event_type == kind]


def upserted_names(event) -> set[str]:
    """The attributes an upsert sets, leaving out the version marker `workflow.patched`
    upserts (Temporal exempts it from billing; it is not ours)."""
    fields = event.upsert_workflow_search_attributes_event_attributes.search_attributes
    return set(fields.indexed_fields) - {"TemporalChangeVersion"}


async def test_a_trivial_run_keeps_its_debrief_without_a_child(
    harness: Harness, client: Client, llm: ScriptedLLM, model_name: str, database_url: str
):
    llm.script(
        model_name,
        [
            Reply(None, [call("calculator", expression="2+2")]),
            Reply(None, [call("final-answer", output="4", format="text", summary="Added.")]),
        ],
    )
    agent = harness.agent(model_name, agent_id=f"trivial-{uuid.uuid4().hex[:6]}")
    result = await agent.run("What is 2+2?")
    assert result.output == "4" and result.debrief is not None

    history = await client.get_workflow_handle(result.run_id).fetch_history()
    assert not events_of(history, EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED)
    with pytest.raises(RPCError) as missing:
        await client.get_workflow_handle(names.debrief_workflow_id(result.run_id)).describe()
    assert missing.value.status == RPCStatusCode.NOT_FOUND

    with psycopg.connect(database_url) as conn:
        rows = conn.execute(
            "SELECT synthesized, outcome, debrief_json->>'summary', output FROM agent_debriefs"
            " WHERE run_id = %s",
            (result.run_id,),
        ).fetchall()
    assert rows == [(False, result.debrief.outcome, result.debrief.summary, "4")]
    rich = await result.debrief_rich()  # no child to wait for: the instant debrief is final
    assert rich is not None and rich.summary == result.debrief.summary
    assert not await agent.wait_for_debriefs(seconds=5)
    described = await client.get_workflow_handle(result.run_id).describe()
    attributes = described.typed_search_attributes
    assert attributes.get(sa.DEBRIEF_STATUS) == "deterministic"


async def test_a_run_upserts_no_search_attribute_between_its_first_and_last_iteration(
    harness: Harness, client: Client, llm: ScriptedLLM, model_name: str
):
    llm.script(
        model_name,
        [Reply("Adding.", [call("calculator", expression=f"{i}+1")]) for i in range(4)]
        + [Reply("FINAL ANSWER: done")],
    )
    agent_id = f"quiet-{uuid.uuid4().hex[:6]}"
    result = await harness.agent(model_name, agent_id=agent_id, memory=False).run("Count to 5")
    assert result.metadata.iterations == 5

    history = await client.get_workflow_handle(result.run_id).fetch_history()
    llm_steps = [
        e.event_id
        for e in events_of(history, EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED)
        if e.activity_task_scheduled_event_attributes.activity_type.name == names.LLM_STEP
    ]
    assert len(llm_steps) == 5
    upserts = [
        (e.event_id, upserted_names(e))
        for e in events_of(history, EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES)
        if upserted_names(e)
    ]
    between = [(i, n) for i, n in upserts if llm_steps[0] < i < llm_steps[-1]]
    assert between == []  # nothing new to say while the run goes on
    # AgentName came with the start (its starter set it); the rest once, at the end
    assert [n for _, n in upserts] == [
        {"TerminatedBy", "Outcome", "DebriefStatus", "Iterations", "TokensUsed"}
    ]
    described = await client.get_workflow_handle(result.run_id).describe()
    attributes = described.typed_search_attributes
    assert attributes.get(sa.AGENT_NAME) == agent_id
    assert attributes.get(sa.ITERATIONS) == 5
    assert attributes.get(sa.TOKENS_USED) == result.metadata.tokens_used
    assert attributes.get(sa.DEBRIEF_STATUS) == "none"


async def test_a_worker_sizes_its_postgres_pool_from_its_activity_slots(
    client: Client, settings: Settings
):
    sized = settings.model_copy(update={"max_concurrent_activities": 60})
    async with running_worker(client, sized) as running:
        assert running.store.pool.max_size == 30
    chosen = settings.model_copy(update={"db_pool_size": 7})
    async with running_worker(client, chosen) as running:
        assert running.store.pool.max_size == 7


async def test_a_worker_keeps_its_runs_tasks_30_s_on_its_sticky_queue(
    client: Client, settings: Settings
):
    """Not the SDK's 10 s, which a saturated worker overran hundreds of times at 1,000 runs."""
    async with running_worker(client, settings) as running:
        waits = running.worker.worker.config()["sticky_queue_schedule_to_start_timeout"]
    assert waits == timedelta(seconds=30)
    shorter = settings.model_copy(update={"sticky_queue_timeout_seconds": 5})
    async with running_worker(client, shorter) as running:
        waits = running.worker.worker.config()["sticky_queue_schedule_to_start_timeout"]
    assert waits == timedelta(seconds=5)


async def test_a_run_tells_its_agent_without_a_signal(
    harness: Harness, client: Client, llm: ScriptedLLM, model_name: str
):
    """The run keeps itself in Postgres as it ends: no agent entity is started or signalled
    for it (no action, no workflow task there), and chat and `get_last_debrief` still know it."""
    llm.script(
        model_name,
        [
            Reply(None, [call("calculator", expression="40+2")]),
            Reply(None, [call("final-answer", output="42", format="text", summary="Added them.")]),
            Reply("I added 40 and 2."),  # the chat turn
        ],
    )
    agent = harness.agent(model_name, agent_id=f"unsignalled-{uuid.uuid4().hex[:6]}")
    result = await agent.run("Add 40 and 2")
    entity = client.get_workflow_handle(names.agent_workflow_id(agent.config.agent_id))
    with pytest.raises(RPCError) as missing:
        await entity.describe()  # a run used to start it with a `run_finished` signal
    assert missing.value.status == RPCStatusCode.NOT_FOUND

    last = await agent.get_last_debrief()
    assert last is not None and last.summary == "Added them."
    await agent.chat("What did you do?")
    notes = llm.requests[model_name][-1]["messages"][1]["content"]
    assert "Summary: Added them." in notes and "calculator (1x, 100% success)" in notes
    signals = events_of(
        await entity.fetch_history(), EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED
    )
    assert signals == []  # what the agent knows of the run it read itself
    held = await entity.query(names.LAST_DEBRIEF_QUERY)
    assert held["summary"] == "Added them." and result.debrief is not None


async def test_a_rich_debrief_reaches_the_agent_without_a_signal(
    harness: Harness, client: Client, llm: ScriptedLLM, model_name: str
):
    """The debrief child keeps the rich debrief in Postgres, where the agent reads its last
    run: it signals nobody (a signal was an action and the debrief twice more in histories),
    and an agent already running learns of it all the same."""
    synthesis = {
        "summary": "Multiplied twelve by three.",
        "key_findings": ["12*3 is 36"],
        "errors_encountered": [],
        "lessons_learned": ["Check the units"],
        "caveats": "",
    }
    long_answer = "Twelve times three is thirty-six, as the calculator confirmed. " * 4
    llm.script(
        model_name,
        [
            Reply("Hello."),  # the chat turn that starts the agent before the run
            Reply(None, [call("calculator", expression="12*3")]),
            Reply(
                None, [call("final-answer", output=long_answer, format="text", summary="Did it.")]
            ),
        ],
    )
    synth = llm.script(f"{model_name}-debrief", [Reply(json.dumps(synthesis))])
    agent = harness.agent(model_name, agent_id=f"rich-{uuid.uuid4().hex[:6]}", debrief_model=synth)
    await agent.chat("Hi")
    result = await agent.run("What is 12*3?")
    rich = await result.debrief_rich()
    assert rich is not None and rich.synthesized and rich.summary == synthesis["summary"]

    child = await client.get_workflow_handle(
        names.debrief_workflow_id(result.run_id)
    ).fetch_history()
    assert not events_of(
        child, EventType.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED
    )  # it used to signal the agent `debrief_ready`
    last = await agent.get_last_debrief()
    assert last is not None and last.synthesized and last.summary == synthesis["summary"]
    entity = client.get_workflow_handle(names.agent_workflow_id(agent.config.agent_id))
    signals = events_of(
        await entity.fetch_history(), EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED
    )
    assert [s.workflow_execution_signaled_event_attributes.signal_name for s in signals] == []


def asked_patches(history: WorkflowHistory) -> list[str]:
    return [
        json.loads(e.marker_recorded_event_attributes.details["patch-data"].payloads[0].data)["id"]
        for e in events_of(history, EventType.EVENT_TYPE_MARKER_RECORDED)
        if e.marker_recorded_event_attributes.marker_name == "core_patch"
    ]


def version_upserts(history: WorkflowHistory) -> list:
    """Upserts of TemporalChangeVersion alone: what each `workflow.patched` adds."""
    return [
        e
        for e in events_of(history, EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES)
        if not upserted_names(e)
    ]


async def start_with_bundle(
    harness: Harness, client: Client, agent: Agent, task: str, bundle: str | None
) -> WorkflowHandle[Any, AgentResult]:
    """`task` started with Temporal's client, `bundle` in its input in place of the one the
    project's starters put."""
    run_input = build_run_input(agent.config, task).model_copy(update={"patch_bundle": bundle})
    return await client.start_workflow(
        names.AGENT_RUN_WORKFLOW,
        run_input,
        id=names.run_workflow_id(agent.config.agent_id, uuid.uuid4()),
        task_queue=harness.task_queue,
        result_type=AgentResult,
    )


async def run_with_bundle(
    harness: Harness, client: Client, agent: Agent, bundle: str | None
) -> WorkflowHistory:
    """Run "Say done" started with Temporal's client, `bundle` in its input in place of the
    one the project's starters put; its history once it answered."""
    handle = await start_with_bundle(harness, client, agent, "Say done", bundle)
    assert (await handle.result()).terminated_by == "final_answer"
    return await handle.fetch_history()


async def test_a_new_run_asks_no_patch(
    harness: Harness, client: Client, llm: ScriptedLLM, model_name: str
):
    """Each `workflow.patched` records a marker and upserts TemporalChangeVersion (two events
    and a visibility write); a run started by the project carries its patch bundle in its
    input, so it asks none of the patches the bundle covers, not even the bundle."""
    llm.script(model_name, [Reply("FINAL ANSWER: done")])
    # a deadline and a budget: the patches only such runs ask are covered too
    agent_id = f"patches-{uuid.uuid4().hex[:6]}"
    agent = harness.agent(model_name, agent_id=agent_id, timeout_seconds=60, token_budget=10**6)
    result = await agent.run("Say done")
    history = await client.get_workflow_handle(result.run_id).fetch_history()
    assert asked_patches(history) == []
    assert version_upserts(history) == []


async def test_a_run_started_without_the_bundle_asks_it_once(
    harness: Harness, client: Client, llm: ScriptedLLM, model_name: str
):
    """A run whose input lacks the bundle (started before it was carried, or by hand with
    Temporal's client) asks the newest bundle once, for every earlier patch."""
    llm.script(model_name, [Reply("FINAL ANSWER: done")])
    agent_id = f"patches-{uuid.uuid4().hex[:6]}"
    agent = harness.agent(model_name, agent_id=agent_id, timeout_seconds=60, token_budget=10**6)
    history = await run_with_bundle(harness, client, agent, None)
    assert asked_patches(history) == [names.RUN_PATCHES_2026_12_03]
    assert len(version_upserts(history)) == 1


async def test_a_run_started_with_the_earlier_bundle_asks_only_the_patch_since(
    harness: Harness, client: Client, llm: ScriptedLLM, model_name: str
):
    """A starter one deploy behind its workers puts RUN_PATCHES_2026_12 in the run's input:
    the run takes that bundle's patches unasked and asks `first-step-seeds` on its own (and
    then seeds in its first LLM step)."""
    llm.script(model_name, [Reply("FINAL ANSWER: done")])
    agent = harness.agent(model_name, agent_id=f"patches-{uuid.uuid4().hex[:6]}")
    history = await run_with_bundle(harness, client, agent, names.RUN_PATCHES_2026_12)
    assert asked_patches(history) == [names.FIRST_STEP_SEEDS_PATCH]
    assert len(version_upserts(history)) == 1


async def _run_meeting_every_late_patch(
    harness: Harness, client: Client, llm: ScriptedLLM, model_name: str, bundle: str | None
) -> WorkflowHistory:
    """A run that meets the case of each patch asked one by one since RUN_PATCHES_2026_12_03:
    two waiting calls whose ids collide (`unique-approval-ids`), approved while it waits
    (`answer-ends-approval-wait` is asked at the wait), a reply cut off at the token limit
    (`cut-short-replies-go-on`), a bare `FINAL ANSWER:` (`bare-final-answer-marker-nudged`)
    and a `final-answer` call whose summary is null (`final-answer-null-fields`)."""
    llm.script(
        model_name,
        [
            Reply("Two sums.", [call("calculator", expression="1+1", call_id="call-4"),
                                call("calculator", expression="2+2", call_id="bad id!")]),
            Reply("FINAL ANSWER: The sums are", finish_reason="length"),
            Reply("FINAL ANSWER:"),
            Reply(None, [call("final-answer", output="2 and 4", format="text", summary=None)]),
        ],
    )  # fmt: skip
    agent = harness.agent(
        model_name,
        agent_id=f"late-{uuid.uuid4().hex[:6]}",
        memory=False,
        approve_tools=["calculator"],
    )
    handle = await start_with_bundle(harness, client, agent, "1+1 and 2+2", bundle)

    async def waiting() -> bool:
        progress = await agent.progress(handle.id)
        return sorted(p.call_id for p in progress.pending_approvals) == ["call-4", "call-4-2"]

    await wait_for(waiting, seconds=60)
    await agent.approve(handle.id, by="tester")
    result = await handle.result()
    assert (result.terminated_by, result.output) == ("final_answer_tool", "2 and 4")
    return await handle.fetch_history()


async def test_a_run_with_the_newest_bundle_asks_not_even_the_patches_asked_case_by_case(
    harness: Harness, client: Client, llm: ScriptedLLM, model_name: str
):
    """With RUN_PATCHES_2026_12_03 in its input, a run meeting these cases asks their five
    patches one by one, each marker landing where the run met its case (a task that may also
    take updates: the replay of one such task failed in CI); with RUN_PATCHES_2026_12_04 it
    asks none, and makes the same decisions."""
    late = sorted(names.RUN_PATCHES_2026_12_04_COVERS - names.RUN_PATCHES_2026_12_03_COVERS)
    before = await _run_meeting_every_late_patch(
        harness, client, llm, model_name, names.RUN_PATCHES_2026_12_03
    )
    assert sorted(asked_patches(before)) == late
    assert len(version_upserts(before)) == len(late)
    newest = await _run_meeting_every_late_patch(
        harness, client, llm, f"{model_name}-newest", names.RUN_PATCHES_2026_12_04
    )
    assert asked_patches(newest) == []
    assert version_upserts(newest) == []


async def test_a_run_carrying_the_newest_bundle_begun_by_a_worker_before_it_replays(
    harness: Harness, client: Client, llm: ScriptedLLM, model_name: str
):
    """Starters and workers deploy apart: a worker from before RUN_PATCHES_2026_12_04 takes a
    run carrying it for a run without a bundle (it asks RUN_PATCHES_2026_12_03, then the five
    patches case by case). Such a run replays on this worker, which finds that bundle's marker
    and asks the five as that worker did."""
    began = await _run_meeting_every_late_patch(harness, client, llm, model_name, None)
    late = names.RUN_PATCHES_2026_12_04_COVERS - names.RUN_PATCHES_2026_12_03_COVERS
    assert sorted(asked_patches(began)) == sorted({names.RUN_PATCHES_2026_12_03, *late})
    carried = with_bundle_in_input(began, names.RUN_PATCHES_2026_12_04)
    report = await replay(carried, quiet_replayer(WORKFLOWS, pydantic_data_converter))
    assert report.ok, report.error


async def test_a_run_the_next_release_began_without_a_bundle_replays(
    harness: Harness,
    client: Client,
    llm: ScriptedLLM,
    model_name: str,
    monkeypatch: pytest.MonkeyPatch,
):
    """In the next release a run started without a bundle asks RUN_PATCHES_2026_12_04 (the
    bundle its starters send); rolled back to this release, a worker replays it."""
    monkeypatch.setattr(names, "RUN_PATCH_BUNDLE", names.RUN_PATCHES_2026_12_04)
    next_release = await _run_meeting_every_late_patch(harness, client, llm, model_name, None)
    assert asked_patches(next_release) == [names.RUN_PATCHES_2026_12_04]
    monkeypatch.undo()
    assert names.RUN_PATCH_BUNDLE == names.RUN_PATCHES_2026_12_03
    report = await replay(next_release, quiet_replayer(WORKFLOWS, pydantic_data_converter))
    assert report.ok, report.error
