"""A run's earlier timeline's debrief, ended by its current one.

An operator resets a run (the Web UI, `temporal workflow reset`) while the DebriefWorkflow its
old timeline started is still synthesizing. The reset run's wrap-up could not start its own
(the debrief's workflow id was taken), and the old one then kept the old timeline's debrief,
lessons and the agent's last run: a run that now succeeded was remembered as failed, with
the failed attempt's lessons. Now the reset run's wrap-up (`notify_agent`, only in a run that
is not on its first execution) ends that debrief before it keeps its own, so what pays for a
reset is the reset run: asking every debrief's persist whether its run was reset since cost
each run a describe (worker 1.14×, server 1.08× CPU per run in `bench.ab`). `starter.py
rerun` waits for the old debrief before it resets (`reactive_temporal/api/rerun.py`).
"""

from __future__ import annotations

from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError

from reactive_temporal.contracts import names
from reactive_temporal.errors import workflow_not_found


async def end_earlier_debrief(client: Client, run_id: str, execution: str) -> bool:
    """End the run's debrief workflow if another execution of the run (an earlier timeline,
    before a reset) started it and it still runs; whether there was one. One that ends by
    itself meanwhile kept its debrief: the caller keeps its own after it either way."""
    try:
        child = await client.get_workflow_handle(names.debrief_workflow_id(run_id)).describe()
    except RPCError as err:
        if workflow_not_found(err):
            return False
        raise
    if not (
        child.status == WorkflowExecutionStatus.RUNNING
        and child.parent_run_id is not None
        and child.parent_run_id != execution
    ):
        return False
    try:
        await client.get_workflow_handle(child.id, run_id=child.run_id).terminate(
            reason=f"run {run_id} was reset: its current execution {execution} keeps its debrief"
        )
    except RPCError as err:
        if not workflow_not_found(err):  # ended meanwhile: what it kept is overwritten next
            raise
    return True
