"""Results awaited and chat turns sent through a Temporal that turns calls away (`api/results.py`).

A dev server of its own holds 8 long polls per API method (`frontend.namespaceCount=8`; 1,200
by default), and the waiting client gives up on a refused call at once instead of after the
SDK's 10 s of retries, so what a crowd of waiters meets on a busy cluster happens here in
seconds. A plain `handle.result()` fails; `result_of`, and the agent API built on it, wait on.
A crowd chatting with one agent, or deciding one run's tool calls, meets a limit every
server has: 10 updates in flight per workflow.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path

import pytest
from temporalio import workflow
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client
from temporalio.service import RetryConfig, RPCError, RPCStatusCode
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from reactive_temporal.api.agents import Agent
from reactive_temporal.api.replay import replay
from reactive_temporal.api.replay_batch import quiet_replayer
from reactive_temporal.api.results import result_of
from reactive_temporal.codec import build_data_converter
from reactive_temporal.config import Settings
from reactive_temporal.contracts.run import AgentConfig, RunProgress
from reactive_temporal.embedded.dev_server import DevServer
from reactive_temporal.embedded.scripted_llm import Reply, ScriptedLLM, call
from reactive_temporal.hosting.runtime import Runtime
from reactive_temporal.hosting.worker_factory import WORKFLOWS
from reactive_temporal.limits import MAX_TOOL_CALLS_PER_TURN
from tests.conftest import wait_for
from tests.workflow.conftest import running_worker
from workflows.agent_run import AgentRunWorkflow

pytestmark = pytest.mark.workflow

LONG_POLLS = 8
"""More than a worker's pollers of one kind (5), fewer than the waiters."""
WAITERS = 24
CHATTERS = 16
UPDATES_PER_RUN = 12
"""More than the 10 updates a workflow admits in flight (`history.maxInFlightUpdates`)."""


@workflow.defn(name="NapWorkflow")
class NapWorkflow:
    @workflow.run
    async def run(self, seconds: float) -> str:
        await workflow.sleep(timedelta(seconds=seconds))
        return "rested"


@asynccontextmanager
async def dev_server_with(directory: Path, setting: str) -> AsyncIterator[DevServer]:
    """A dev server of its own, with one dynamic-config value changed."""
    server = DevServer(
        db_file=None,
        log_file=directory / "temporal.log",
        extra_args=["--dynamic-config-value", setting],
    )
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


@pytest.fixture(scope="module")
async def busy(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[DevServer]:
    setting = f"frontend.namespaceCount={LONG_POLLS}"
    async with dev_server_with(tmp_path_factory.mktemp("busy"), setting) as server:
        yield server


async def project_client(address: str, retry_config: RetryConfig | None = None) -> Client:
    return await Client.connect(
        address, data_converter=build_data_converter(None), retry_config=retry_config
    )


async def impatient_client(address: str) -> Client:
    """A client that gives up on a refused call at once (the SDK retries for 10 s)."""
    return await project_client(address, RetryConfig(max_retries=1, max_elapsed_time_millis=200))


async def test_waiters_turned_away_wait_on_for_their_results(busy: DevServer):
    worker_client = await project_client(busy.address)
    waiting = await impatient_client(busy.address)
    task_queue = f"naps-{uuid.uuid4().hex[:8]}"
    async with Worker(
        worker_client,
        task_queue=task_queue,
        workflows=[NapWorkflow],
        workflow_runner=UnsandboxedWorkflowRunner(),
    ):

        async def naps() -> list:
            return [
                await waiting.start_workflow(
                    NapWorkflow.run, 3.0, id=f"nap-{uuid.uuid4().hex[:8]}", task_queue=task_queue
                )
                for _ in range(WAITERS)
            ]

        # The control: plain awaits of three times as many naps as the server holds fail.
        plain = await asyncio.gather(*(h.result() for h in await naps()), return_exceptions=True)
        refused = [r for r in plain if isinstance(r, RPCError)]
        statuses = {(r.status, str(r)) for r in refused}
        assert (
            RPCStatusCode.RESOURCE_EXHAUSTED,
            "namespace concurrent poller limit exceeded",
        ) in statuses, statuses

        results = await asyncio.wait_for(
            asyncio.gather(*(result_of(h) for h in await naps())), timeout=60
        )
    assert results == ["rested"] * WAITERS


async def test_agent_runs_awaited_by_a_crowd_all_return(
    busy: DevServer, settings: Settings, llm: ScriptedLLM
):
    model = llm.script(
        f"slow-{uuid.uuid4().hex[:6]}",
        [Reply("FINAL ANSWER: done", delay=2.0)],
        repeat_last=True,
    )
    worker_client = await project_client(busy.address)
    waiting = await impatient_client(busy.address)
    async with running_worker(worker_client, settings, max_cached_workflows=100) as harness:
        agent = Agent(
            AgentConfig(agent_id="crowded", model=model, memory=False),
            Runtime(waiting, harness.task_queue, offline_model=False),
        )
        results = await asyncio.wait_for(
            asyncio.gather(*(agent.run(f"Task {i}") for i in range(WAITERS))), timeout=120
        )
    assert [r.output for r in results] == ["done"] * WAITERS
    assert all(r.success for r in results)


async def test_a_crowd_chatting_with_one_agent_is_answered_once_each(
    client: Client, settings: Settings, llm: ScriptedLLM, caplog: pytest.LogCaptureFixture
):
    """16 sessions' turns at once, on a server that admits 10 updates in flight per workflow:
    the six refused are sent again, under their own update ids, and every turn runs once."""
    model = llm.script(
        f"slow-chat-{uuid.uuid4().hex[:6]}", [Reply("hello there", delay=3.0)], repeat_last=True
    )
    chatting = await impatient_client(client.service_client.config.target_host)
    async with running_worker(client, settings, max_cached_workflows=100) as harness:
        agent = Agent(
            AgentConfig(agent_id=f"crowd-{uuid.uuid4().hex[:6]}", model=model, memory=False),
            Runtime(chatting, harness.task_queue, offline_model=False),
        )
        sessions = [agent.session() for _ in range(CHATTERS)]
        replies = await asyncio.wait_for(
            asyncio.gather(*(s.chat(f"Question {i}") for i, s in enumerate(sessions))),
            timeout=120,
        )
        histories = [await s.history() for s in sessions]
    assert [r.message for r in replies] == ["hello there"] * CHATTERS
    assert "in-flight updates" in caplog.text  # the limit was met, and waited out
    assert len(llm.requests[model]) == CHATTERS  # no turn ran twice
    for i, history in enumerate(histories):
        assert [(m.role, m.content) for m in history] == [
            ("user", f"Question {i}"),
            ("assistant", "hello there"),
        ]


async def test_decisions_past_the_updates_in_flight_are_each_made_once(
    client: Client, settings: Settings, llm: ScriptedLLM, caplog: pytest.LogCaptureFixture
):
    """A run waits for approval of 16 calls; 16 people decide one call each at once while no
    worker is there to take their updates, so the server admits 10 and refuses 6. The refused
    are sent again until it takes them, and each call is decided once, by its person."""
    calls = MAX_TOOL_CALLS_PER_TURN
    model = llm.script(
        f"many-calls-{uuid.uuid4().hex[:6]}",
        [
            Reply("Computing.", [call("calculator", expression=f"{i}+1") for i in range(calls)]),
            # The run stays open past the longest pause between tries (10 s), so every
            # decision's answer comes back while it runs. (With an instant answer, CI once saw
            # a decision's call end in "workflow update was aborted" as its run finished, every
            # decision made; `decide` now sends such an update again: tests/unit/test_refusals.)
            Reply("FINAL ANSWER: done", delay=12.0),
        ],
    )
    task_queue = f"decide-{uuid.uuid4().hex[:8]}"
    deciding = await impatient_client(client.service_client.config.target_host)
    agent = Agent(
        AgentConfig(
            agent_id=f"approver-{uuid.uuid4().hex[:6]}",
            model=model,
            approve_tools=["calculator"],
        ),
        Runtime(deciding, task_queue, offline_model=False),
    )
    async with running_worker(client, settings, task_queue=task_queue, max_cached_workflows=100):
        handle = await agent.start("Compute them all")
        waiting: list[RunProgress] = []

        async def parked() -> bool:
            waiting[:] = [await handle.query(AgentRunWorkflow.progress)]
            return len(waiting[0].pending_approvals) == calls

        await wait_for(parked, seconds=60)
    pending = [p.call_id for p in waiting[0].pending_approvals]
    decisions = asyncio.gather(
        *(agent.approve(handle.id, call_id, by=f"person-{i}") for i, call_id in enumerate(pending))
    )
    # the limit met (or, were refusals not waited out, a decision failed: raised below)
    await wait_for(lambda: "in-flight updates" in caplog.text or decisions.done(), 30)
    async with running_worker(client, settings, task_queue=task_queue, max_cached_workflows=100):
        try:
            outcomes = await asyncio.wait_for(decisions, timeout=120)
            result = await asyncio.wait_for(agent.result(handle), timeout=60)
        except Exception as failed:  # rare, under load (CI 2026-12-04): what the run holds
            raise AssertionError(await workflow_report(client, handle.id)) from failed
    assert [[(r.call_id, r.by) for r in o.decided] for o in outcomes] == [
        [(call_id, f"person-{i}")] for i, call_id in enumerate(pending)
    ]
    assert (result.output, result.success) == ("done", True)
    assert result.debrief is not None
    assert sorted((r.call_id, r.decision) for r in result.debrief.approvals) == sorted(
        (call_id, "approved") for call_id in pending
    )


@pytest.fixture(scope="module")
async def few_updates(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[DevServer]:
    """A dev server whose workflows take 12 updates per run (2,000 by default), and suggest
    continuing as new at 11 (90%, as by default)."""
    setting = f"history.maxTotalUpdates={UPDATES_PER_RUN}"
    async with dev_server_with(tmp_path_factory.mktemp("few-updates"), setting) as server:
        yield server


async def test_turns_past_the_updates_one_entity_run_takes_wait_for_the_next_run(
    few_updates: DevServer, settings: Settings, llm: ScriptedLLM
):
    """20 turns at once, 40 updates with their sessions' opening: the agent's entity refuses
    the 13th of its run ("limit on number of total updates"), finishes its handlers and
    continues as new, and the refused turns go to the next run; each runs once."""
    model = llm.script(
        f"many-turns-{uuid.uuid4().hex[:6]}", [Reply("noted", delay=0.5)], repeat_last=True
    )
    client = await project_client(few_updates.address)
    async with running_worker(client, settings, max_cached_workflows=100) as harness:
        agent = Agent(
            AgentConfig(agent_id=f"talked-{uuid.uuid4().hex[:6]}", model=model, memory=False),
            Runtime(client, harness.task_queue, offline_model=False),
        )
        sessions = [agent.session() for _ in range(20)]
        try:
            replies = await asyncio.wait_for(
                asyncio.gather(*(s.chat(f"Note {i}") for i, s in enumerate(sessions))),
                timeout=120,
            )
        except Exception as failed:  # rare, under load: say what the entity's runs hold
            report = await workflow_report(client, agent.entity.workflow_id)
            raise AssertionError(report) from failed
        histories = [await s.history() for s in sessions]
        runs = [
            r async for r in client.list_workflows(f"WorkflowId = '{agent.entity.workflow_id}'")
        ]
    assert [r.message for r in replies] == ["noted"] * 20
    assert len(llm.requests[model]) == 20
    assert [[m.content for m in h] for h in histories] == [
        [f"Note {i}", "noted"] for i in range(20)
    ]
    assert len(runs) >= 4  # 40 updates, at most 12 per run


async def workflow_report(client: Client, workflow_id: str) -> str:
    """Each run of the workflow (an agent's entity, a run): whether its history replays
    against this code, its failed workflow tasks, and its events in order (the entity test
    once met the nondeterminism that tests/workflow/test_entity_lifetime.py sets up on
    purpose; the decisions test once met a run's patch marker replayed without its patch)."""
    replayer = quiet_replayer(WORKFLOWS, build_data_converter(None))
    lines = []
    async for run in client.list_workflows(f"WorkflowId = '{workflow_id}'"):
        history = await client.get_workflow_handle(workflow_id, run_id=run.run_id).fetch_history()
        report = await replay(history, replayer)
        lines.append(f"run {run.run_id}: replays={report.ok} {report.error or ''}")
        for event in history.events:
            if event.HasField("workflow_task_failed_event_attributes"):
                failure = event.workflow_task_failed_event_attributes.failure.message
                lines.append(f"  task failed at {event.event_id}: {failure[:300]}")
        lines.append("  " + " ".join(f"{e.event_id}:{event_label(e)}" for e in history.events))
    return "\n".join(lines)


def event_label(event: HistoryEvent) -> str:
    """An event's type, with what tells two of a kind apart: a marker's patch, an activity's
    type and id, an update's name and id (enough to see which handler made which command)."""
    kind = EventType.Name(event.event_type).removeprefix("EVENT_TYPE_")
    if event.HasField("marker_recorded_event_attributes"):
        data = event.marker_recorded_event_attributes.details.get("patch-data")
        patch = json.loads(data.payloads[0].data) if data is not None else {}
        return f"{kind}({patch.get('id', '')})"
    if event.HasField("activity_task_scheduled_event_attributes"):
        scheduled = event.activity_task_scheduled_event_attributes
        return f"{kind}({scheduled.activity_type.name}#{scheduled.activity_id})"
    if event.HasField("workflow_execution_update_accepted_event_attributes"):
        request = event.workflow_execution_update_accepted_event_attributes.accepted_request
        return f"{kind}({request.input.name}:{request.meta.update_id[:8]})"
    if event.HasField("workflow_execution_update_completed_event_attributes"):
        meta = event.workflow_execution_update_completed_event_attributes.meta
        return f"{kind}({meta.update_id[:8]})"
    if event.HasField("upsert_workflow_search_attributes_event_attributes"):
        fields = event.upsert_workflow_search_attributes_event_attributes.search_attributes
        shown = {k: v.data.decode(errors="replace")[:120] for k, v in fields.indexed_fields.items()}
        return f"{kind}({shown})"  # which attributes: a patch's TemporalChangeVersion, or ours
    return kind


async def test_other_errors_are_not_waited_out(client: Client):
    """Only a busy server is waited out: a run that does not exist is an error at once."""
    with pytest.raises(RPCError) as raised:
        await asyncio.wait_for(result_of(client.get_workflow_handle("no-such-run")), timeout=60)
    assert raised.value.status == RPCStatusCode.NOT_FOUND
