"""Which timeline of a run is its current one, for the writes a reset may have overtaken.

An operator resets a run (the Web UI, `temporal workflow reset`) while the DebriefWorkflow its
old timeline started is still synthesizing. The reset run's wrap-up could not start its own
(the debrief's workflow id was taken), and the old one then kept the old timeline's debrief,
lessons and the agent's last run: a run that now succeeded was remembered as failed, with
the failed attempt's lessons. Now the old timeline's debrief is not kept, and the reset run
keeps its deterministic debrief itself when it finds the id taken so (`starter.py rerun`
waits for the old debrief before it resets: `reactive_temporal/api/rerun.py`).
"""

from __future__ import annotations

from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError

from reactive_temporal.contracts import names
from reactive_temporal.errors import workflow_not_found


async def superseded(client: Client, run_id: str, execution: str) -> bool:
    """Whether the run's current execution is another than `execution` (a reset's)."""
    current = await client.get_workflow_handle(run_id).describe()
    return current.run_id != execution


async def debrief_taken(client: Client, run_id: str, execution: str) -> bool:
    """Whether the run's debrief workflow id is held by a debrief still running that another
    execution of the run started (an earlier timeline, before a reset)."""
    try:
        child = await client.get_workflow_handle(names.debrief_workflow_id(run_id)).describe()
    except RPCError as err:
        if workflow_not_found(err):
            return False
        raise
    return (
        child.status == WorkflowExecutionStatus.RUNNING
        and child.parent_run_id is not None
        and child.parent_run_id != execution
    )
