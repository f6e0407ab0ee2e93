"""Controlling a running run from outside: cancel it, decide its tool calls, follow it.

Client-side functions the Python API (`Agent.cancel`) and the CLI (`starter.py cancel`) share.
"""

from __future__ import annotations

from typing import Any

from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHandle
from temporalio.service import RPCError, RPCStatusCode

from reactive_temporal.contracts import names
from reactive_temporal.contracts.result import AgentResult
from workflows.agent_run import AgentRunWorkflow

CANCEL_REASON_MAX_CHARS = 500


async def running_run(client: Client, run_id: str) -> WorkflowHandle[Any, AgentResult]:
    """The handle of a run that is still running.

    Raises:
        ValueError: naming what is wrong (no such run, not an agent run, already over).
    """
    handle = client.get_workflow_handle_for(AgentRunWorkflow.run, run_id)
    try:
        description = await handle.describe()
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            raise ValueError(f"no run with id {run_id!r}") from err
        raise
    if description.workflow_type != names.AGENT_RUN_WORKFLOW:
        raise ValueError(f"{run_id!r} is a {description.workflow_type}, not an agent run")
    status = description.status
    if status != WorkflowExecutionStatus.RUNNING:
        state = status.name.lower() if status is not None else "closed"
        raise ValueError(f"run {run_id!r} is not running (it is {state})")
    return handle


async def request_cancel(
    client: Client, run_id: str, reason: str | None = None
) -> WorkflowHandle[Any, AgentResult]:
    """Ask Temporal to cancel the run; returns the handle to await its graceful result.

    `reason` is recorded in the run's history, its result's `error` and its debrief.
    """
    if reason is not None:
        if "\x00" in reason:
            raise ValueError("the reason contains a NUL byte (\\x00), which cannot be stored")
        if len(reason) > CANCEL_REASON_MAX_CHARS:
            raise ValueError(
                f"the reason is {len(reason)} characters; the limit is {CANCEL_REASON_MAX_CHARS}"
            )
    handle = await running_run(client, run_id)
    await handle.cancel(reason=reason or "")
    return handle
