"""Finding runs: those a visibility query lists, and the one a run id names.

`starter.py runs`, every command that takes a run id, the Python API and `api.replay_batch`
share these, so that a filter, a listing and the refusal of an id that names no agent run read
the same wherever a run is looked for.
"""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import get_args

from pydantic import BaseModel
from temporalio.client import Client, WorkflowExecutionDescription, WorkflowExecutionStatus
from temporalio.service import RPCError

from reactive_temporal import search_attributes as sa
from reactive_temporal.api.stalls import Stall, run_stall
from reactive_temporal.api.worker_waits import TaskQueuePollers
from reactive_temporal.api.workflow_ids import shown, valid_workflow_id
from reactive_temporal.codec import unreadable_payload
from reactive_temporal.contracts import names
from reactive_temporal.contracts.retrying import RetryingStep, WaitingForWorker
from reactive_temporal.contracts.run import TerminatedBy
from reactive_temporal.errors import workflow_not_found

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
        raise ValueError(f"{shown(value)} may not contain quotes or backslashes")
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
            raise ValueError(f"unknown status {shown(status)}: use one of {', '.join(STATUSES)}")
        parts.append(
            f"ExecutionStatus = '{STATUSES[status.lower()].name.title().replace('_', '')}'"
        )
    if terminated_by:
        endings = get_args(TerminatedBy)
        if terminated_by not in endings:
            raise ValueError(
                f"unknown ending {shown(terminated_by)}: use one of {', '.join(endings)}"
            )
        parts.append(f"{sa.TERMINATED_BY.name} = {quote_literal(terminated_by)}")
    return " AND ".join(parts)


async def list_runs(client: Client, query: str, limit: int = 20) -> list[RunSummary]:
    """The runs a visibility query (`runs_query`) finds, newest first, at most `limit`.

    Each run once, as its latest execution: a rerun run was listed twice, its failed
    execution beside its current one, nothing saying which was which. And only as its latest
    execution: a run reset (`rerun`, `temporal workflow reset`, the Web UI) whose old,
    terminated execution a filter matches (`--status terminated`, `--terminated-by`) while
    the run goes on or ended otherwise in its new one is not listed (`superseded_runs`).
    A running run's `retrying` names the step it is stuck on, if any, and
    `waiting_for_worker` the step no worker takes; of the newest RETRYING_LOOKUPS_MAX running
    runs only, so that a listing of many stays quick (each costs the server a `describe()`).
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
    gone = await superseded_runs(client, {r.run_id: executions[r.run_id] for r in runs})
    runs = [r for r in runs if r.run_id not in gone]
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


SUPERSEDED_LOOKUP_IDS = 100
"""Workflow ids `superseded_runs` asks about in one visibility query."""


async def superseded_runs(client: Client, listed: dict[str, str]) -> set[str]:
    """The workflow ids of `listed` (id → the execution listed) now run by another execution.

    A newer execution runs, or closed after the listed one did (a reset's).

    One visibility query per SUPERSEDED_LOOKUP_IDS ids, not a `describe()` each; an id a
    query cannot quote (quotes, backslashes) is kept as listed.
    """
    quotable = [i for i in listed if "'" not in i and "\\" not in i]
    current: dict[str, tuple[bool, datetime | None, str]] = {}
    for at in range(0, len(quotable), SUPERSEDED_LOOKUP_IDS):
        chunk = quotable[at : at + SUPERSEDED_LOOKUP_IDS]
        query = (
            f"WorkflowType = '{names.AGENT_RUN_WORKFLOW}' AND WorkflowId IN ("
            + ", ".join(quote_literal(i) for i in chunk)
            + ")"
        )
        async for wf in client.list_workflows(query):
            running = wf.status == WorkflowExecutionStatus.RUNNING
            seen = current.get(wf.id)
            if seen is None or _later((running, wf.close_time), seen[:2]):
                current[wf.id] = (running, wf.close_time, wf.run_id)
    return {i for i, (_, _, run) in current.items() if run != listed[i]}


def _later(a: tuple[bool, datetime | None], b: tuple[bool, datetime | None]) -> bool:
    """Whether execution `a` (running?, closed at) is a workflow id's later one than `b`.

    One running is the current one (an id has at most one), else the one closed last.
    """
    if a[0] != b[0]:
        return a[0]
    return a[1] is not None and (b[1] is None or a[1] > b[1])


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


async def require_run(client: Client, run_id: str) -> WorkflowExecutionDescription:
    """The run's description; ValueError unless `run_id` names an agent run.

    Not, say, an agent's chat entity: every command that takes a run id refuses those the same way.
    """
    # (an int gave protobuf's "bad argument type for built-in operation")
    valid_workflow_id(run_id)
    try:
        description = await client.get_workflow_handle(run_id).describe()
    except RPCError as err:
        if workflow_not_found(err):
            raise ValueError(f"no run with id {shown(run_id)}") from err
        raise
    if description.workflow_type != names.AGENT_RUN_WORKFLOW:
        raise ValueError(f"{shown(run_id)} is a {description.workflow_type}, not an agent run")
    return description
