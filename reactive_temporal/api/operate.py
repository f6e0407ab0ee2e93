"""Operating runs: find them, read their debriefs, replay their history, re-run them.

Client-side functions the CLI (`runs`, `debrief`, `replay`, `export`, `rerun`), the Python API
and tests share.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar, get_args

from pydantic import BaseModel
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.api.workflowservice.v1 import ResetWorkflowExecutionRequest
from temporalio.client import (
    Client,
    WorkflowExecutionDescription,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowHistory,
)
from temporalio.service import RPCError
from temporalio.worker import Replayer

from reactive_temporal import search_attributes as sa
from reactive_temporal.api.results import result_of
from reactive_temporal.api.stalls import Stall, run_stall
from reactive_temporal.api.worker_waits import TaskQueuePollers
from reactive_temporal.codec import unreadable_payload
from reactive_temporal.contracts import names
from reactive_temporal.contracts.debrief import AgentDebrief
from reactive_temporal.contracts.result import AgentResult
from reactive_temporal.contracts.retrying import RetryingStep, WaitingForWorker
from reactive_temporal.contracts.run import AgentRunInput, TerminatedBy
from reactive_temporal.errors import root_cause, workflow_not_found

log = logging.getLogger("reactive_temporal")
T = TypeVar("T")
Gave = Callable[[str], str]
STATUSES = {s.name.lower(): s for s in WorkflowExecutionStatus}


class RunSummary(BaseModel):
    """One run as `starter.py runs` lists it (from Temporal visibility)."""

    run_id: str
    agent: str | None
    status: str
    terminated_by: str | None
    outcome: str | None
    iterations: int | None
    tokens: int | None
    debrief_status: str | None
    started_at: datetime
    closed_at: datetime | None
    task: str | None
    unreadable: str | None = None
    """Why the run's task cannot be shown: its memo is encrypted with a key this client does
    not have (or arrived unencrypted where encryption is required)."""
    retrying: RetryingStep | None = None
    """A running run's step that failed and is tried again (`api.retrying_steps`), its
    workflow task among them (`api.failing_tasks`)."""
    waiting_for_worker: WaitingForWorker | None = None
    """A running run's step no worker takes: none polls its task queue (`api.worker_waits`)."""


def quote_literal(value: str) -> str:
    """A visibility-query string literal; ValueError for quotes or backslashes in it."""
    if "'" in value or "\\" in value:
        raise ValueError(f"{value!r} may not contain quotes or backslashes")
    return f"'{value}'"


def runs_query(
    agent: str | None = None, status: str | None = None, terminated_by: str | None = None
) -> str:
    """A visibility query for AgentRunWorkflow executions; ValueError naming a bad filter."""
    parts = [f"WorkflowType = '{names.AGENT_RUN_WORKFLOW}'"]
    if agent:
        parts.append(f"{sa.AGENT_NAME.name} = {quote_literal(agent)}")
    if status:
        if status.lower() not in STATUSES:
            raise ValueError(f"unknown status {status!r}: use one of {', '.join(STATUSES)}")
        parts.append(
            f"ExecutionStatus = '{STATUSES[status.lower()].name.title().replace('_', '')}'"
        )
    if terminated_by:
        endings = get_args(TerminatedBy)
        if terminated_by not in endings:
            raise ValueError(f"unknown ending {terminated_by!r}: use one of {', '.join(endings)}")
        parts.append(f"{sa.TERMINATED_BY.name} = {quote_literal(terminated_by)}")
    return " AND ".join(parts)


async def list_runs(client: Client, query: str, limit: int = 20) -> list[RunSummary]:
    """The runs a visibility query (`runs_query`) finds, newest first, at most `limit`.

    Each run once, as its latest execution: a rerun run was listed twice, its failed
    execution beside its current one, nothing saying which was which. A running run's
    `retrying` names the step it is stuck on, if any, and `waiting_for_worker` the step no
    worker takes; of the newest RETRYING_LOOKUPS_MAX running runs only, so that a listing of
    many stays quick (each costs the server a `describe()`).
    """
    runs: list[RunSummary] = []
    executions: dict[str, str] = {}
    async for wf in client.list_workflows(query, limit=limit):
        if wf.id in executions:
            continue
        executions[wf.id] = wf.run_id
        attrs = wf.typed_search_attributes
        unreadable = None
        try:
            task = (await wf.memo()).get(names.TASK_MEMO)
        except Exception as err:  # one run this client cannot decode hid every run
            if (unreadable := unreadable_payload(err)) is None:
                raise
            task = None
        runs.append(
            RunSummary(
                run_id=wf.id,
                agent=attrs.get(sa.AGENT_NAME),
                status=wf.status.name.lower() if wf.status else "unknown",
                terminated_by=attrs.get(sa.TERMINATED_BY),
                outcome=attrs.get(sa.OUTCOME),
                iterations=attrs.get(sa.ITERATIONS),
                tokens=attrs.get(sa.TOKENS_USED),
                debrief_status=attrs.get(sa.DEBRIEF_STATUS),
                started_at=wf.start_time,
                closed_at=wf.close_time,
                task=task if isinstance(task, str) else None,
                unreadable=unreadable,
            )
        )
    running = [r for r in runs if r.status == "running"][:RETRYING_LOOKUPS_MAX]
    at_once = asyncio.Semaphore(RETRYING_LOOKUPS_AT_ONCE)
    pollers = TaskQueuePollers(client)  # most runs share a task queue: asked once
    found = await asyncio.gather(
        *(_stall(client, r.run_id, executions[r.run_id], at_once, pollers) for r in running)
    )
    for run, stall in zip(running, found, strict=True):
        run.retrying = stall.retrying
        run.waiting_for_worker = stall.waiting_for_worker
    return runs


RETRYING_LOOKUPS_AT_ONCE = 16
"""Running runs `list_runs` describes at once (up to 1,000 are listed)."""
RETRYING_LOOKUPS_MAX = 100
"""Running runs `list_runs` looks at, the newest: past them, `retrying` and
`waiting_for_worker` are left unset. `progress RUN_ID` looks at any one."""


async def _stall(
    client: Client,
    workflow_id: str,
    run_id: str,
    at_once: asyncio.Semaphore,
    pollers: TaskQueuePollers,
) -> Stall:
    """What the running run is stuck on; nothing when that cannot be told (it just ended)."""
    async with at_once:
        try:
            description = await client.get_workflow_handle(workflow_id, run_id=run_id).describe()
        except RPCError:
            return Stall()
        return await run_stall(client, description, pollers)


# -- debriefs ------------------------------------------------------------------------------


async def load_debrief(client: Client, run_id: str, *, wait_for_rich: bool) -> AgentDebrief | None:
    """A run's debrief: the finished rich one, else the instant one.

    With `wait_for_rich`, waits for the rich one first. None when the run had memory off.

    Raises:
        ValueError: no such run, or it failed before it could be debriefed.
        RunUnserved: it is still running and no worker can end it now (none polls its task
            queue, or its workflow task keeps failing).
    """
    running = (await require_run(client, run_id)).status == WorkflowExecutionStatus.RUNNING
    ending: Awaitable[AgentResult] = result_of(
        client.get_workflow_handle(run_id, result_type=AgentResult)
    )
    if running:
        ending = _served(
            client,
            run_id,
            ending,
            lambda why: (
                f"run {run_id!r} is still running, and has no debrief until it ends; it "
                f"cannot end now: {why}"
            ),
        )
    try:
        result = await ending
    except WorkflowFailureError as err:
        raise ValueError(
            f"run {run_id!r} failed before it could be debriefed: {root_cause(err)}"
        ) from err
    if result.debrief is None:
        return None
    if not wait_for_rich:
        try:
            child = await _debrief_child(client, run_id)
        except RPCError:
            return result.debrief
        if child is None or child.status != WorkflowExecutionStatus.COMPLETED:
            return result.debrief
    return await fetch_rich_debrief(client, run_id, fallback=result.debrief)


async def _debrief_child(client: Client, run_id: str) -> WorkflowExecutionDescription | None:
    """The run's DebriefWorkflow, when its current execution started it.

    None when there is none, or only one a timeline of the run before a reset (`rerun`)
    started: that one debriefs the failed attempt ("failed"), where the rerun's own debrief,
    kept by the run itself when it had nothing to synthesize, says what happened.
    """
    try:
        child = await client.get_workflow_handle(names.debrief_workflow_id(run_id)).describe()
    except RPCError as err:
        if workflow_not_found(err):
            return None
        raise
    current = (await client.get_workflow_handle(run_id).describe()).run_id
    if child.parent_run_id and child.parent_run_id != current:
        return None
    return child


async def require_run(client: Client, run_id: str) -> WorkflowExecutionDescription:
    """The run's description; ValueError unless `run_id` names an agent run.

    Not, say, an agent's chat entity: every command that takes a run id refuses those the same way.
    """
    if not isinstance(run_id, str) or not run_id.strip() or "\x00" in run_id:
        # (an int gave protobuf's "bad argument type for built-in operation")
        raise ValueError(f"a run id is a non-empty string without NUL, not {run_id!r:.100}")
    try:
        description = await client.get_workflow_handle(run_id).describe()
    except RPCError as err:
        if workflow_not_found(err):
            raise ValueError(f"no run with id {run_id!r}") from err
        raise
    if description.workflow_type != names.AGENT_RUN_WORKFLOW:
        raise ValueError(f"{run_id!r} is a {description.workflow_type}, not an agent run")
    return description


async def fetch_rich_debrief(
    client: Client, run_id: str, *, fallback: AgentDebrief | None = None
) -> AgentDebrief | None:
    """The run's rich debrief, awaited.

    `fallback` when its DebriefWorkflow failed or is gone, or when there is none: a run with
    nothing to synthesize keeps its deterministic debrief and starts no child.
    """
    handle = client.get_workflow_handle(names.debrief_workflow_id(run_id), result_type=AgentDebrief)
    try:
        if await _debrief_child(client, run_id) is None:
            return fallback
        return await _served(
            client,
            handle.id,
            result_of(handle),
            lambda why: f"its debrief workflow cannot finish now: {why}",
        )
    except RPCError as err:
        if workflow_not_found(err):
            return fallback
        log.warning("rich debrief of %s unavailable (%s); using the instant one", run_id, err)
        return fallback
    except Exception as err:  # the child failed: the instant debrief stands
        log.warning("rich debrief of %s unavailable (%s); using the instant one", run_id, err)
        return fallback


async def _served(client: Client, workflow_id: str, waiting: Awaitable[T], gave_up: Gave) -> T:
    """A debrief's wait, ended when no worker can end the workflow awaited (`while_served`).

    Imported here: `api.unserved` builds on `api.progress`, which needs this module.
    """
    from reactive_temporal.api.unserved import while_served

    return await while_served(client, workflow_id, waiting, gave_up)


# -- replay --------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReplayReport:
    """Whether a history still replays against the current code, and where not."""

    workflow_id: str
    ok: bool
    events: int
    error: str | None = None
    event_id: int | None = None
    """The history event the current code disagreed with, when the error names one."""
    unreadable: bool = False
    """The history's payloads could not be read (an encryption key): not the code's fault."""


_EVENT_ID = re.compile(r"(?:HistoryEvent\(id|event[_ ]?id|event)\W{0,3}(\d+)", re.IGNORECASE)


def history_to_json(history: WorkflowHistory) -> str:
    """The history as `temporal workflow show -o json` writes it, plus its workflow id.

    Replay needs the id: our workflows derive ids from it.
    """
    data = json.loads(history.to_json())
    return json.dumps({"workflowId": history.workflow_id, **data}, indent=1)


def load_history_file(path: Path, workflow_id: str | None = None) -> WorkflowHistory:
    """A history exported with `starter.py export` or `temporal workflow show -o json`.

    The latter has no workflow id: pass it, or the file name (without .json) is used.
    """
    try:
        data = json.loads(path.read_text())
    except OSError as err:
        raise ValueError(f"cannot read history file {path}: {err}") from err
    except ValueError as err:
        raise ValueError(f"{path} is not a Temporal history JSON: {err}") from err
    if not isinstance(data, dict) or "events" not in data:
        raise ValueError(f"{path} is not a Temporal history JSON: no 'events'")
    events = data["events"]
    if not events or not isinstance(events, list) or not isinstance(events[0], dict):
        raise ValueError(f"{path} is not a Temporal history JSON: it holds no events")
    first = str(events[0].get("eventType", ""))
    if first not in ("EVENT_TYPE_WORKFLOW_EXECUTION_STARTED", "WorkflowExecutionStarted"):
        raise ValueError(
            f"{path} is not a Temporal history JSON: its first event is {first!r}, "
            "not WorkflowExecutionStarted"
        )
    found = data.pop("workflowId", None)
    try:
        return WorkflowHistory.from_json(workflow_id or found or path.stem, data)
    except Exception as err:
        raise ValueError(f"{path} is not a Temporal history JSON: {err}") from err


async def unreadable_history(history: WorkflowHistory, replayer: Replayer) -> str | None:
    """Why the replayer's converter cannot read the history's input, or None.

    A key missing or wrong, or plaintext refused: a replay that fails on that fails before
    any workflow code runs, and its failure says only "Encoded failure".
    """
    converter = replayer.config().get("data_converter")
    if converter is None or not history.events:
        return None
    started = history.events[0].workflow_execution_started_event_attributes
    try:
        await converter.decode(list(started.input.payloads))
    except Exception as err:
        return unreadable_payload(err)
    return None


async def replay(history: WorkflowHistory, replayer: Replayer) -> ReplayReport:
    """Replay a history against the workflows this process has; never raises on a mismatch."""
    result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    failure = result.replay_failure
    if failure is None:
        return ReplayReport(history.workflow_id, True, len(history.events))
    if (problem := await unreadable_history(history, replayer)) is not None:
        return ReplayReport(
            history.workflow_id, False, len(history.events), error=problem, unreadable=True
        )
    message = str(failure)
    match = _EVENT_ID.search(message)
    return ReplayReport(
        history.workflow_id,
        False,
        len(history.events),
        error=f"{type(failure).__name__}: {message}",
        event_id=int(match.group(1)) if match else None,
    )


# -- rerun -----------------------------------------------------------------------------------

_FAILED = {
    EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED,
    EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT,
    EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_FAILED,
    EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_TIMED_OUT,
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED,
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT,
}


def _scheduled_event_id(event: HistoryEvent) -> int | None:
    for field in (
        "activity_task_failed_event_attributes",
        "activity_task_timed_out_event_attributes",
    ):
        if event.HasField(field):  # type: ignore[arg-type]
            return int(getattr(event, field).scheduled_event_id)
    for field in (
        "child_workflow_execution_failed_event_attributes",
        "child_workflow_execution_timed_out_event_attributes",
    ):
        if event.HasField(field):  # type: ignore[arg-type]
            return int(getattr(event, field).initiated_event_id)
    return None


def reset_point(events: list[HistoryEvent]) -> int:
    """The last good point before a run's failure.

    That is the completed workflow task that scheduled the failing step (so the step runs
    again), else the last one before the end.

    Raises:
        ValueError: the history shows no failure, or no completed workflow task to go back to.
    """
    failure = next((e for e in reversed(events) if e.event_type in _FAILED), None)
    if failure is None:
        raise ValueError("this run has no failed step or failure to re-run from")
    cut = _scheduled_event_id(failure) or failure.event_id
    completed = [
        e.event_id
        for e in events
        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED and e.event_id < cut
    ]
    if not completed:
        raise ValueError(
            "the run failed before its first workflow task completed: use --from-start"
        )
    return completed[-1]


DEBRIEF_SETTLE_SECONDS = 60.0
"""How long a rerun waits for the failed run's debrief to be written before stopping it."""


async def settle_debrief(
    client: Client,
    workflow_id: str,
    *,
    wait: float = DEBRIEF_SETTLE_SECONDS,
    notice: Callable[[str], None] | None = None,
) -> None:
    """Let the run's debrief workflow finish before the run is reset.

    It is waited for up to `wait` seconds, then terminated. Left writing, it wrote the failed
    run's debrief, lessons and last run over the rerun's once the rerun had kept its own, and
    the rerun's own debrief child could not start under the same id.
    """
    handle = client.get_workflow_handle(names.debrief_workflow_id(workflow_id))
    try:
        description = await handle.describe()
    except RPCError as err:
        if workflow_not_found(err):
            return  # memory off, or a debrief kept in the run itself
        raise
    if description.status != WorkflowExecutionStatus.RUNNING:
        return
    running = client.get_workflow_handle(handle.id, run_id=description.run_id)
    if notice is not None:
        notice(f"waiting for the failed run's debrief to be written (up to {wait:.0f} s)")
    try:
        await asyncio.wait_for(running.result(), wait)
    except TimeoutError:
        await running.terminate(reason=f"superseded by a rerun of {workflow_id}")
        log.warning("%s: its debrief took over %.0f s; stopped for the rerun", workflow_id, wait)
    except WorkflowFailureError:
        pass  # it ended; nothing more of it will be written


async def rerun_from_failure(
    client: Client, workflow_id: str, *, notice: Callable[[str], None] | None = None
) -> str:
    """Reset the run to its last good point, once its debrief is settled (`settle_debrief`).

    Returns:
        The new run's Temporal run id.
    """
    handle = client.get_workflow_handle(workflow_id)
    description = await handle.describe()
    if description.status == WorkflowExecutionStatus.RUNNING:
        raise ValueError(f"run {workflow_id!r} is still running")
    history = await handle.fetch_history()
    event_id = reset_point(list(history.events))
    await settle_debrief(client, workflow_id, notice=notice)
    response = await client.workflow_service.reset_workflow_execution(
        ResetWorkflowExecutionRequest(
            namespace=client.namespace,
            workflow_execution=WorkflowExecution(
                workflow_id=workflow_id, run_id=description.run_id
            ),
            reason="rerun from the last good point (starter.py rerun)",
            workflow_task_finish_event_id=event_id,
            request_id=str(uuid.uuid4()),
        )
    )
    return str(response.run_id)


async def original_input(client: Client, workflow_id: str) -> AgentRunInput:
    """The input a run was started with, decoded with the client's converter."""
    await require_run(client, workflow_id)
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    started = history.events[0].workflow_execution_started_event_attributes
    values: list[Any] = await client.data_converter.decode(started.input.payloads, [AgentRunInput])
    return AgentRunInput.model_validate(values[0])
