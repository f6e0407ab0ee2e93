"""Activities that talk to other workflows: tell an agent about its runs, read a run's state.

Workflows cannot signal-with-start or query; activities can, with the worker's client.
"""

from __future__ import annotations

from temporalio import activity
from temporalio.client import Client, WorkflowQueryRejectedError
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.service import RPCError

from reactive_temporal.contracts import names
from reactive_temporal.contracts.entity import (
    AgentState,
    AgentWorkflowInput,
    NotifyAgentInput,
    ReadRunProgressInput,
    ReadRunProgressResult,
    RunStarted,
)
from reactive_temporal.contracts.run import AgentConfig, RunProgress


async def signal_agent(
    client: Client, task_queue: str, agent: AgentConfig, signal: str, payload: object
) -> None:
    """Signal the agent's AgentWorkflow, starting it first if it does not exist."""
    await client.start_workflow(
        names.AGENT_WORKFLOW,
        AgentWorkflowInput(state=AgentState(agent=agent)),
        id=names.agent_workflow_id(agent.agent_id),
        task_queue=task_queue,
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        start_signal=signal,
        start_signal_args=[payload],
        static_summary=f"agent {agent.agent_id}: chat, sessions, last debrief",
    )


class EntityActivities:
    def __init__(self, client: Client) -> None:
        self.client = client

    async def run_started(self, agent: AgentConfig, event: RunStarted) -> None:
        await signal_agent(
            self.client, activity.info().task_queue, agent, names.RUN_STARTED_SIGNAL, event
        )

    @activity.defn(name=names.NOTIFY_AGENT)
    async def notify_agent(self, input: NotifyAgentInput) -> None:
        payload = (
            input.run_started if input.signal == names.RUN_STARTED_SIGNAL else input.run_finished
        )
        await signal_agent(
            self.client, activity.info().task_queue, input.agent, input.signal, payload
        )

    @activity.defn(name=names.READ_RUN_PROGRESS)
    async def read_run_progress(self, input: ReadRunProgressInput) -> ReadRunProgressResult:
        """The run's live state from its `progress` query; None when it is gone."""
        handle = self.client.get_workflow_handle(input.run_id)
        try:
            progress = await handle.query(names.PROGRESS_QUERY, result_type=RunProgress)
        except (RPCError, WorkflowQueryRejectedError) as err:
            activity.logger.info("no progress for %s: %s", input.run_id, err)
            return ReadRunProgressResult()
        return ReadRunProgressResult(progress=progress)
