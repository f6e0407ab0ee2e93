"""Signals sent by hand to an agent's entity, as anyone who may signal its workflow can
(`temporal workflow signal --input …`): whatever they carry, the agent chats on and continues
as new (the `entity-inputs-bounded` patch, workflows/entity_inputs.py).

Each test sends its hostile signals as raw JSON, as the CLI does (no client-side checks; NaN
as written), then chats until the entity has continued as new, and chats with its next run.
Before the patch each of them failed a workflow task on every retry (a chat turn's activity
input, or the continue-as-new input, past the 2 MiB Temporal takes), or failed the entity's
next run, whose input did not read back (a new entity took its place, knowing nothing). A
chat turn waits at most TURN_SECONDS (a hang guard): one that never answers fails the test
with the workflow tasks' failures.

The patch is asked by new entity runs from the next release (`names.ENTITY_INPUTS_BOUNDED_ASKED`),
switched on here as that release does.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest
from temporalio.api.common.v1 import Payload
from temporalio.api.enums.v1 import EventType, WorkflowTaskFailedCause
from temporalio.client import Client, WorkflowHandle, WorkflowUpdateRPCTimeoutOrCancelledError
from temporalio.common import RawValue

from reactive_temporal.api.chat_refusals import ChatError
from reactive_temporal.api.entity_handle import AgentEntity
from reactive_temporal.contracts import names
from reactive_temporal.contracts.entity import (
    AgentState,
    AgentWorkflowInput,
    ChatReply,
    ChatRequest,
)
from reactive_temporal.contracts.run import AgentConfig
from reactive_temporal.embedded.scripted_llm import Reply, ScriptedLLM
from tests.workflow.conftest import Harness
from workflows.entity_inputs import ACTIVE_RUNS_MAX, STATE_MAX_BYTES

pytestmark = pytest.mark.workflow

TURN_SECONDS = 60
"""A hang guard: how long a chat turn may take before the entity is taken for wedged."""
REPLY = "noted " + "\x01" * 20_000
"""The model's reply to every turn: 120 KB as JSON, which the entity remembers for two
minutes (its answered turns) and carries into its next run."""
Entity = WorkflowHandle[Any, Any]


@pytest.fixture(autouse=True)
def bounds_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(names, "ENTITY_INPUTS_BOUNDED_ASKED", True)  # as the next release


def raw(value: object) -> RawValue:
    """`value` as `temporal workflow signal --input` sends it: JSON text as written (`NaN`
    too), which nothing checks before the entity reads it."""
    return RawValue(Payload(metadata={"encoding": b"json/plain"}, data=json.dumps(value).encode()))


def now() -> str:
    return datetime.now(UTC).isoformat()


@dataclass
class Sent:
    """An entity and what its test sends it."""

    entity: Entity
    agent_id: str
    model: str
    task_queue: str

    def config(self, **fields: object) -> dict[str, object]:
        return {"agent_id": self.agent_id, "model": self.model, **fields}

    async def signal(self, name: str, value: object) -> None:
        await self.entity.signal(name, raw(value))
        await self.settled()

    async def settled(self) -> None:
        """Until the entity has taken what was sent: signals that wait for a workflow task in
        flight are buffered by the server, which fails that task (FORCE_CLOSE_COMMAND) past
        100 of them or 2 MiB, to write them out; and a chat client takes a task failing
        again for a stuck entity (`starter.py chat` refuses to send)."""
        for _ in range(1200):  # a hang guard: a minute at least
            description = (await self.entity.describe()).raw_description
            if not description.HasField("pending_workflow_task"):
                return
            await asyncio.sleep(0.05)
        raise AssertionError("the entity took no workflow task in 60 s (one failing on every try?)")

    async def run_finished(self, run_id: str, **fields: object) -> None:
        await self.signal(
            names.RUN_FINISHED_SIGNAL,
            {"run_id": run_id, "started_at": now(), "agent": self.config(), **fields},
        )


@dataclass
class Run:
    """One Temporal run of the entity, as its history says."""

    run_id: str
    failures: list[str]
    """Its failed workflow tasks' causes and messages."""
    input_bytes: int
    closed: str | None
    """How it closed (`CONTINUED_AS_NEW`, `FAILED`…), or None while it runs."""


CLOSED = {
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW: "CONTINUED_AS_NEW",
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED: "FAILED",
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED: "TERMINATED",
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED: "COMPLETED",
}


async def runs_of(client: Client, entity: Entity, first_run: str) -> list[Run]:
    """Each Temporal run of the entity, in order, followed from the first run by its
    continued-as-new links."""
    found: list[Run] = []
    run_id: str | None = first_run
    while run_id:
        run = Run(run_id, [], 0, None)
        next_run = None
        handle = client.get_workflow_handle(entity.id, run_id=run_id)
        async for event in handle.fetch_history_events():
            if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
                attributes = event.workflow_execution_started_event_attributes
                run.input_bytes = sum(len(p.data) for p in attributes.input.payloads)
            failed = event.workflow_task_failed_event_attributes
            # the server refuses a task that continues as new while signals it has not handed
            # over wait, and hands the task again with them: not a failure of the entity's
            if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED and failed.cause != (
                WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_UNHANDLED_COMMAND
            ):
                cause = WorkflowTaskFailedCause.Name(failed.cause)
                run.failures.append(f"{cause}: {failed.failure.message}")
            run.closed = CLOSED.get(event.event_type, run.closed)
            if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
                attributes_ = event.workflow_execution_continued_as_new_event_attributes
                next_run = attributes_.new_execution_run_id
        found.append(run)
        run_id = next_run
    return found


async def chat(client: Client, sent: Sent, first_run: str, message: str) -> ChatReply:
    """One chat turn as `starter.py chat` from another process sends it (the agent's own
    configuration; sent again while the entity moves to its next run), or the entity's
    workflow tasks' failures once it is refused as failing or TURN_SECONDS pass."""
    config = AgentConfig(agent_id=sent.agent_id, model=sent.model)
    handle = AgentEntity(client, sent.task_queue, config, send_config=False)
    turn = handle.chat(ChatRequest(message=message, use_tools=False))
    try:
        return await asyncio.wait_for(turn, TURN_SECONDS)
    except (TimeoutError, ChatError, WorkflowUpdateRPCTimeoutOrCancelledError) as err:
        runs = await runs_of(client, sent.entity, first_run)
        failures = [f for run in runs for f in run.failures]
        raise AssertionError(
            f"the chat turn was not answered ({type(err).__name__}); the entity's workflow "
            f"tasks failed: {sorted(set(failures))[:3]}"
        ) from err


Send = Callable[[Sent], Awaitable[None]]


async def chats_on_and_continues(
    harness: Harness, llm: ScriptedLLM, send: Send, *, continue_after: int = 40
) -> Sent:
    """An entity that continues as new past `continue_after` events, sent `send`'s signals;
    then chat until it has continued as new, and chat with its next run. Every run's input
    within STATE_MAX_BYTES, no workflow task failed."""
    client = harness.client
    model = llm.script(f"bounds-{uuid.uuid4().hex[:6]}", [Reply(REPLY)], repeat_last=True)
    agent_id = f"bounds-{uuid.uuid4().hex[:8]}"
    config = AgentConfig(agent_id=agent_id, model=model, memory=False)
    entity = await client.start_workflow(
        names.AGENT_WORKFLOW,
        AgentWorkflowInput(
            state=AgentState(agent=config), continue_as_new_after_events=continue_after
        ),
        id=names.agent_workflow_id(agent_id),
        task_queue=harness.task_queue,
    )
    first_run = (await entity.describe()).run_id
    assert first_run is not None
    sent = Sent(entity, agent_id, model, harness.task_queue)
    await send(sent)
    message = "\x01" * 20_000  # the heaviest message a turn may have: 120 KB as JSON
    for _ in range(30):
        reply = await chat(client, sent, first_run, message)
        assert reply.message == REPLY and reply.routed_via == "direct-llm"
        if (await entity.describe()).run_id != first_run:
            break
    else:
        raise AssertionError("the entity did not continue as new")
    assert (await chat(client, sent, first_run, "and now?")).message == REPLY
    runs = await runs_of(client, entity, first_run)
    # the entity its first run continued into answers: not a new one started in its place
    assert [r.closed for r in runs] == ["CONTINUED_AS_NEW"] * (len(runs) - 1) + [None]
    assert runs[-1].run_id == (await entity.describe()).run_id
    assert [r.failures for r in runs] == [[]] * len(runs)
    assert all(r.input_bytes <= STATE_MAX_BYTES + 300 for r in runs), [r.input_bytes for r in runs]
    return sent


async def state_of_the_last_run(sent: Sent) -> AgentState:
    """The state the entity's current run was given."""
    async for event in sent.entity.fetch_history_events():
        attributes = event.workflow_execution_started_event_attributes
        return AgentWorkflowInput.model_validate_json(attributes.input.payloads[0].data).state
    raise AssertionError("no history")


async def test_a_configuration_of_megabytes_is_ignored(harness: Harness, llm: ScriptedLLM):
    """2 MB of tool names, another model: a chat turn's activity input held them and the
    message, past 2 MiB (the builders' limits were checked for the system prompt only)."""

    async def send(sent: Sent) -> None:
        tools = ["\x01" * 1_000] * 330
        await sent.signal(names.CONFIGURE_SIGNAL, sent.config(model="unscripted", tools=tools))

    sent = await chats_on_and_continues(harness, llm, send)
    agent = (await state_of_the_last_run(sent)).agent
    assert (agent.model, agent.tools) == (sent.model, None)


async def test_a_run_s_news_of_megabytes_keeps_what_chat_reads(harness: Harness, llm: ScriptedLLM):
    """A 1 MB debrief and 1 MB of observations: kept whole, they took the continue-as-new
    input past 2 MiB with the turn's reply the entity remembers."""

    async def send(sent: Sent) -> None:
        await sent.run_finished(
            f"run-{sent.agent_id}-1",
            debrief={"outcome": "success", "summary": "Four. " + "\x01" * 170_000},
            observations=["[Tool result]: 4" + "\x01" * 160_000],
        )

    sent = await chats_on_and_continues(harness, llm, send)
    state = await state_of_the_last_run(sent)
    assert state.last_run_id == f"run-{sent.agent_id}-1"
    assert len(state.last_observations) == 1
    assert state.last_observations[0].startswith("[Tool result]: 4")
    assert len(state.last_observations[0]) <= 3_001


async def test_thousands_of_runs_started_keep_the_latest(cached_harness: Harness, llm: ScriptedLLM):
    """1,500 runs "started", each id of 1,000 control characters (6 KB as JSON): the entity's
    runs in progress grew past 2 MiB before it continued as new."""

    async def send(sent: Sent) -> None:
        for first in range(0, 1_500, 50):
            await asyncio.gather(
                *(
                    sent.entity.signal(
                        names.RUN_STARTED_SIGNAL,
                        raw({"run_id": f"run-{n:05d}-" + "\x01" * 990, "started_at": now()}),
                    )
                    for n in range(first, first + 50)
                )
            )
            await sent.settled()

    sent = await chats_on_and_continues(cached_harness, llm, send, continue_after=1_000)
    active = (await state_of_the_last_run(sent)).active_runs
    assert len(active) <= ACTIVE_RUNS_MAX


async def test_runs_started_with_ids_of_100_kb_are_ignored(harness: Harness, llm: ScriptedLLM):
    async def send(sent: Sent) -> None:
        for n in range(6):
            run_id = f"{n}" + "\x01" * 100_000  # 600 KB as JSON
            await sent.signal(names.RUN_STARTED_SIGNAL, {"run_id": run_id, "started_at": now()})

    sent = await chats_on_and_continues(harness, llm, send, continue_after=60)
    assert (await state_of_the_last_run(sent)).active_runs == {}


async def test_a_rich_debrief_of_megabytes_is_ignored(harness: Harness, llm: ScriptedLLM):
    async def send(sent: Sent) -> None:
        run_id = f"run-{sent.agent_id}-1"
        await sent.run_finished(run_id, debrief={"outcome": "success", "summary": "Four."})
        huge = {"outcome": "success", "summary": "\x01" * 340_000, "synthesized": True}
        await sent.signal(names.DEBRIEF_READY_SIGNAL, {"run_id": run_id, "debrief": huge})

    sent = await chats_on_and_continues(harness, llm, send)
    debrief = (await state_of_the_last_run(sent)).last_debrief
    assert debrief is not None and debrief.summary == "Four."  # the instant one stands


async def test_a_debrief_holding_nan_is_ignored(harness: Harness, llm: ScriptedLLM):
    """Read as NaN, written `null`: the next run's input did not read back (no number), and
    that run failed (a ValidationError fails the entity's workflow): the next chat started a
    new entity in its place, the agent's configuration and all it knew lost."""

    async def send(sent: Sent) -> None:
        run_id = f"run-{sent.agent_id}-1"
        await sent.run_finished(run_id, debrief={"outcome": "success", "summary": "Four."})
        bad = {
            "outcome": "success",
            "summary": "Four, richly.",
            "tools_used": [{"name": "calculator", "calls": 1, "success_rate": float("nan")}],
        }
        await sent.signal(names.DEBRIEF_READY_SIGNAL, {"run_id": run_id, "debrief": bad})

    sent = await chats_on_and_continues(harness, llm, send)
    debrief = (await state_of_the_last_run(sent)).last_debrief
    assert debrief is not None and debrief.summary == "Four."


async def test_news_of_a_run_no_workflow_can_be_is_ignored(harness: Harness, llm: ScriptedLLM):
    """A run id of 900 KB (no workflow id is over 1,000 bytes), taken as the last run's, and
    then its rich debrief of 1 MB."""

    async def send(sent: Sent) -> None:
        run_id = "\x01" * 150_000
        await sent.run_finished(run_id, observations=["\x01" * 50_000])
        huge = {"outcome": "success", "summary": "\x01" * 180_000}
        await sent.signal(names.DEBRIEF_READY_SIGNAL, {"run_id": run_id, "debrief": huge})

    sent = await chats_on_and_continues(harness, llm, send)
    state = await state_of_the_last_run(sent)
    assert (state.last_run_id, state.last_debrief) == (None, None)


async def test_a_chat_turn_s_own_configuration_past_its_bytes_is_refused(
    harness: Harness, llm: ScriptedLLM
):
    """A chat turn's own configuration travels in its activity input as the agent's does: one
    within the builders' limits but 600 KB as JSON (a prompt of control characters) is
    refused by the validator (no trace in history), and the agent chats on."""
    model = llm.script(f"bounds-{uuid.uuid4().hex[:6]}", [Reply("fine")], repeat_last=True)
    agent_id = f"bounds-{uuid.uuid4().hex[:8]}"
    heavy = harness.agent(model, agent_id=agent_id, memory=False, system_prompt="\x01" * 100_000)
    with pytest.raises(
        ChatError, match=r"configuration is 600,\d{3} bytes as JSON; the limit is 400,000"
    ):
        await asyncio.wait_for(heavy.chat("hello"), TURN_SECONDS)
    agent = harness.agent(model, agent_id=agent_id, memory=False)
    assert (await asyncio.wait_for(agent.chat("hello again"), TURN_SECONDS)).message == "fine"
