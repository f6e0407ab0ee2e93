"""Resetting an agent's stuck entity: end it, and start a fresh one with what it knew.

An agent entity whose workflow task fails on every try (`api/entity_wedge.py`) stays so: a
signal sent by hand that it kept whole (before `entity-inputs-bounded`), a value that did not
survive the trip, a bug. `starter.py agent reset NAME` (and `Agent.reset_entity()`) ends its
run with a reason that names the failure and starts a fresh one at once, whose state is the
stuck run's own held to bounds (`api/entity_carry.py`): the configuration its builder last
set, its last run; sessions and runs are in Postgres and are read back when next used. A
healthy entity is left alone unless forced, and so is one whose chat turns would be lost.

Why not Temporal's own reset (measured on a dev server, three ways of getting stuck): to the
last good workflow task, the signal that broke the entity is before that point or sent again
after it, and the entity stays stuck; to the run's first task without its signals, the chat
turns since are run again (the model asked again, each turn saved to its session twice), and
an entity that carries the fault in its input (as it continued as new) is stuck again. An
entity whose run failed its first task has no good task to go back to at all.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC
from typing import Any

from pydantic import BaseModel, Field
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.converter import DataConverter
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError

from reactive_temporal.api.control import check_cancel_reason
from reactive_temporal.api.entity_carry import Carried, Told, carried_state
from reactive_temporal.api.entity_handle import AgentEntity
from reactive_temporal.api.entity_wedge import wedged
from reactive_temporal.api.failing_tasks import failing_workflow_task
from reactive_temporal.contracts import names
from reactive_temporal.contracts.entity import AgentWorkflowInput, new_entity_input
from reactive_temporal.contracts.retrying import RetryingStep
from reactive_temporal.contracts.run import AgentConfig
from reactive_temporal.errors import workflow_not_found
from reactive_temporal.limits import PAYLOAD_BUDGET_BYTES, json_bytes
from reactive_temporal.sanitize import one_line
from workflows.agent_entity import AgentWorkflow

SAVING_PATCHES = frozenset({names.SESSIONS_IN_POSTGRES_PATCH, names.ENTITY_PATCHES_2026_12})
"""A run holding either marker saves its sessions turn by turn."""
INPUT_MAX_BYTES = PAYLOAD_BUDGET_BYTES
"""The fresh entity's input: the payload budget's one ceiling (docs/payload-budget.md), below
Temporal's 2 MiB with room for metadata and the codec."""


class EntityReset(BaseModel):
    """What `reset_entity` did (`starter.py agent reset --json` prints it)."""

    agent_id: str
    workflow_id: str
    stuck: bool
    """Its workflow task kept failing (else it was reset by force)."""
    failure: RetryingStep | None = None
    """The failing workflow task, as the server showed it."""
    ended_run_id: str
    """The Temporal run ended (terminated, with a reason that says why)."""
    new_run_id: str | None = None
    """The fresh entity's run; None when a chat started one first (with its own settings)."""
    kept: list[str] = Field(default_factory=list)
    """What the fresh entity starts with, in words."""
    left: list[str] = Field(default_factory=list)
    """What it does not carry over, and why (Postgres keeps its sessions and runs)."""


@dataclass
class StuckRun:
    """What the stuck run's history tells of it."""

    start: AgentWorkflowInput | None = None
    start_problem: str | None = None
    told: list[Told] = field(default_factory=list)
    """The configure signals since it began."""
    saved_per_turn: bool = False
    chat_turns: int = 0
    """Chat turns it took (updates accepted), for a run that held its sessions whole."""
    answering: set[str] = field(default_factory=set)
    """The update ids of chat turns it took and had not answered."""


async def reset_entity(
    client: Client,
    task_queue: str,
    config: AgentConfig,
    *,
    force: bool = False,
    reason: str | None = None,
) -> EntityReset:
    """End the agent's entity and start a fresh one with what it knew (`api/entity_carry.py`).

    `config` is the agent's (its id names the entity), taken when the entity's own cannot be;
    the fresh entity runs on the stuck one's task queue (`task_queue` when none is known).

    Raises:
        ValueError: nothing was done, saying why: no entity runs; it is healthy and not
            `force`d; it holds chat turns Postgres does not and is not `force`d; it moved on
            meanwhile; or the reason cannot be kept (`check_cancel_reason`).
        TypeError: the reason is not text.
    """
    check_cancel_reason(reason, "an agent reset's reason")  # before anything is read or ended
    entity = AgentEntity(client, task_queue, config, send_config=False)
    whose = f"agent {config.agent_id}'s chat workflow ({entity.workflow_id})"
    try:
        description = await entity.handle().describe()
    except RPCError as err:
        if workflow_not_found(err):
            raise ValueError(f"{whose} does not exist: nothing to reset") from err
        raise
    if description.status != WorkflowExecutionStatus.RUNNING:
        status = description.status.name if description.status else "closed"
        raise ValueError(
            f"{whose} is not running ({status}): nothing to reset; its next chat starts a fresh one"
        )
    failure = await failing_workflow_task(client, description)
    stuck = wedged(failure)
    if not stuck and not force:
        why = f" ({failure.last_failure})" if failure and failure.last_failure else ""
        raise ValueError(
            f"{whose} is not stuck: its workflow task does not keep failing{why}. Nothing "
            "was done; --force resets it anyway"
        )
    run = await read_stuck_run(client, entity.workflow_id, description.run_id or "")
    if not run.saved_per_turn and run.chat_turns and not force:
        raise ValueError(
            f"{whose} began before sessions were saved turn by turn, and took "
            f"{run.chat_turns} chat turns since that Postgres does not hold: a reset loses "
            "them. Nothing was done; --force resets it anyway"
        )
    carried = carried_state(run.start.state if run.start else None, run.told, config)
    if run.start_problem:
        carried.left.append(f"its state: {run.start_problem}")
    if run.answering:
        carried.left.append(
            f"the chat turns it was answering ({len(run.answering)}): each sender is told it "
            "may or may not have been answered (its session's history shows it if it was)"
        )
    fresh = _fresh_input(run.start, carried, config)
    ended = description.run_id or ""
    await _terminate(client, entity.workflow_id, ended, _reason(reason, failure, stuck), whose)
    new_run_id = await _start(client, entity, fresh, description.task_queue or task_queue)
    if new_run_id is None:
        carried = await _started_first(client, entity.workflow_id, carried)
    return EntityReset(
        agent_id=config.agent_id,
        workflow_id=entity.workflow_id,
        stuck=stuck,
        failure=failure,
        ended_run_id=ended,
        new_run_id=new_run_id,
        kept=carried.kept,
        left=carried.left,
    )


async def read_stuck_run(client: Client, workflow_id: str, run_id: str) -> StuckRun:
    """The run's start state, the configurations it was sent, its patches and chat turns."""
    handle = client.get_workflow_handle(workflow_id, run_id=run_id)
    events = [event async for event in handle.fetch_history_events()]
    return await stuck_run(events, client.data_converter)


async def stuck_run(events: Iterable[HistoryEvent], converter: DataConverter) -> StuckRun:
    """What a run's history tells of it: `read_stuck_run` on events already read."""
    run = StuckRun()
    patches: set[str] = set()
    for event in events:
        kind = event.event_type
        if kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
            payloads = event.workflow_execution_started_event_attributes.input.payloads
            run.start, run.start_problem = await _decoded(converter, payloads, AgentWorkflowInput)
        elif kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
            signaled = event.workflow_execution_signaled_event_attributes
            if signaled.signal_name == names.CONFIGURE_SIGNAL:
                config, problem = await _decoded(converter, signaled.input.payloads, AgentConfig)
                at = event.event_time.ToDatetime(tzinfo=UTC)
                run.told.append(Told(at=at, config=config, problem=problem))
        elif kind == EventType.EVENT_TYPE_MARKER_RECORDED:
            patches |= {patch} if (patch := _patch_id(event)) else set()
        elif kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
            accepted = event.workflow_execution_update_accepted_event_attributes
            if accepted.accepted_request.input.name == names.CHAT_UPDATE:
                run.chat_turns += 1
                run.answering.add(accepted.accepted_request.meta.update_id)
        elif kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED:
            completed = event.workflow_execution_update_completed_event_attributes
            run.answering.discard(completed.meta.update_id)
    bundled = run.start is not None and run.start.patch_bundle == names.ENTITY_PATCHES_2026_12
    run.saved_per_turn = bundled or bool(patches & SAVING_PATCHES)
    return run


async def _decoded(
    converter: DataConverter, payloads: Sequence[Any], kind: type[Any]
) -> tuple[Any, Any]:
    """(the value, None), or (None, why it could not be read)."""
    try:
        values = await converter.decode(list(payloads), [kind])
        return kind.model_validate(values[0]), None
    except Exception as err:  # a value that does not read back, a key missing: said, not raised
        return None, f"it could not be read ({one_line(str(err), 200)})"


def _patch_id(event: HistoryEvent) -> str | None:
    attributes = event.marker_recorded_event_attributes
    data = attributes.details.get("patch-data")
    if attributes.marker_name != "core_patch" or data is None or not data.payloads:
        return None
    try:
        return str(json.loads(data.payloads[0].data)["id"])
    except (ValueError, KeyError, TypeError):
        return None


def _fresh_input(
    start: AgentWorkflowInput | None, carried: Carried, config: AgentConfig
) -> AgentWorkflowInput:
    """The fresh entity's input: the carried state, the stuck one's settings, today's bundle.

    ValueError when it would not fit a payload.
    """
    fresh = new_entity_input(config).model_copy(update={"state": carried.state})
    if start is not None:
        fresh.session_idle_seconds = start.session_idle_seconds
        fresh.continue_as_new_after_events = start.continue_as_new_after_events
    if (size := json_bytes(fresh)) > INPUT_MAX_BYTES:  # the budget rules out; said, never sent
        raise ValueError(
            f"the fresh entity's state would be {size:,} bytes, past the {INPUT_MAX_BYTES:,} "
            "a payload may weigh. Nothing was done"
        )
    return fresh


def _reason(reason: str | None, failure: RetryingStep | None, stuck: bool) -> str:
    """Why the run was ended, as its history and the Web UI show it."""
    said = reason or (
        f"its workflow task kept failing (attempt {failure.attempt}: {failure.last_failure})"
        if stuck and failure is not None
        else "reset by force"
    )
    return one_line(f"agent reset: {said}", 1_000)


async def _terminate(
    client: Client, workflow_id: str, run_id: str, reason: str, whose: str
) -> None:
    """End exactly the run that was read (not one a chat may have started since)."""
    try:
        await client.get_workflow_handle(workflow_id, run_id=run_id).terminate(reason=reason)
    except RPCError as err:
        if not workflow_not_found(err):
            raise
        raise ValueError(f"{whose} moved on to another run meanwhile: nothing was reset") from err


async def _started_first(client: Client, workflow_id: str, carried: Carried) -> Carried:
    """A chat started a fresh entity first: the agent's own configuration is sent to it.

    That chat's entity began with the chat's settings (the CLI's defaults, when it sent none),
    and the configuration is sent as the agent's builder sends it. Its users, told to send
    their turn again once the agent is reset, send it at once. The rest of what was carried
    is not: the last run is read from Postgres with the next turn.
    """
    told = Carried(carried.state, left=list(carried.left))
    told.left.append("the rest: a chat started a fresh entity first")
    if not carried.own_config:
        return told
    try:
        await client.get_workflow_handle(workflow_id).signal(
            names.CONFIGURE_SIGNAL, carried.state.agent
        )
    except RPCError as err:  # moved on again meanwhile: said, not raised
        told.left.append(f"its configuration: not sent to it ({one_line(err.message, 200)})")
        return told
    told.kept.append(
        "its configuration, sent to the fresh entity a chat started first (from its next turn)"
    )
    return told


async def _start(
    client: Client, entity: AgentEntity, fresh: AgentWorkflowInput, task_queue: str
) -> str | None:
    """Start the fresh entity; None when a chat started one first (it stays)."""
    options = {
        **entity.start_options(),
        "task_queue": task_queue,
        "id_conflict_policy": WorkflowIDConflictPolicy.FAIL,
    }
    try:
        handle = await client.start_workflow(AgentWorkflow.run, fresh, **options)
    except WorkflowAlreadyStartedError:
        return None
    return handle.first_execution_run_id
