"""Activities that talk to other workflows: tell an agent about its runs, read a run's state.

Workflows cannot signal-with-start or query; activities can, with the worker's client.
`notify_agent` is a run's wrap-up: it saves the deterministic debrief when the run keeps its
own (nothing to synthesize), then tells the agent — by keeping the run as the agent's last
run in Postgres, which the agent reads when chat needs it (no signal, no workflow task on the
agent per run), or, for runs started before that, with a `run_finished` signal. It also stops
the run's calls still in flight (`activities.run_stops`).

What the agent is told of a run (its debrief, its last observations) and of the runs in
progress is what chat quotes to whoever asks: it goes without credentials
(`activities/memory_redaction.py`).
"""

from __future__ import annotations

import asyncio

from temporalio import activity
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowQueryRejectedError
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.service import RPCError

from activities.debrief_store import DebriefStore
from activities.memory_redaction import redacted, redacted_run
from activities.pg_refusals import refused_data_fails
from activities.run_stops import RUN_STOPS, announce_stop
from activities.run_timelines import end_earlier_debrief
from reactive_temporal import search_attributes as sa
from reactive_temporal.contracts import names
from reactive_temporal.contracts.entity import (
    NotifyAgentInput,
    ReadLastRunInput,
    ReadLastRunResult,
    ReadLiveRunsInput,
    ReadLiveRunsResult,
    ReadRunProgressInput,
    ReadRunProgressResult,
    RunFinished,
    new_entity_input,
)
from reactive_temporal.contracts.run import AgentConfig, RunProgress
from reactive_temporal.limits import LIVE_RUNS_MAX_BYTES, within_bytes


async def signal_agent(
    client: Client, task_queue: str, agent: AgentConfig, signal: str, payload: object
) -> None:
    """Signal the agent's AgentWorkflow, starting it first if it does not exist."""
    await client.start_workflow(
        names.AGENT_WORKFLOW,
        new_entity_input(agent),
        id=names.agent_workflow_id(agent.agent_id),
        task_queue=task_queue,
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        start_signal=signal,
        start_signal_args=[payload],
        static_summary=f"agent {agent.agent_id}: chat, sessions, last debrief",
    )


def live_runs_result(
    running: list[RunProgress], last_run: RunFinished | None
) -> ReadLiveRunsResult:
    """`read_live_runs`' result: the newest of the runs in progress whose progress fits
    LIVE_RUNS_MAX_BYTES together, beside the agent's last run (within the payload budget:
    docs/payload-budget.md)."""
    return ReadLiveRunsResult(
        runs=within_bytes(running, LIVE_RUNS_MAX_BYTES, latest=False), last_run=last_run
    )


class EntityActivities:
    def __init__(self, client: Client, debriefs: DebriefStore | None = None) -> None:
        self.client = client
        self.debriefs = debriefs

    @activity.defn(name=names.NOTIFY_AGENT)
    @refused_data_fails
    async def notify_agent(self, input: NotifyAgentInput) -> bool:
        """Save the run's debrief when it keeps its own (first: the agent may be asked about
        it at once), then keep the run as the agent's last run, or signal the agent (starting
        its entity when there is none yet).

        Returns whether it kept the run's debrief: the run's wrap-up reads it to tell a reset
        run's DebriefStatus (kept here, `debrief_if_taken`, not `pending`).
        """
        if input.keep_last_run and input.run_finished is None:
            raise ValueError("notify_agent was asked to keep a last run without one")
        finished = input.signal == names.RUN_FINISHED_SIGNAL
        run_key = activity.info().workflow_run_id if finished else None
        if run_key:  # whatever of the run still runs on this worker is nobody's to wait for
            RUN_STOPS.stop(run_key)
        announce = run_key if input.calls_in_flight else None  # and on the other workers
        execution = activity.info().workflow_run_id or ""
        if input.persist is None and input.debrief_if_taken is not None:
            taken = input.debrief_if_taken
            if await end_earlier_debrief(self.client, taken.input.run_id, execution):
                input = input.model_copy(update={"persist": taken})  # its child cannot start
        elif input.persist is not None and input.earlier_timeline:  # kept here: not theirs
            await end_earlier_debrief(self.client, input.persist.input.run_id, execution)
        if input.persist is not None or input.keep_last_run or announce:
            store = self._store(
                "save a debrief"
                if input.persist
                else "keep the last run"
                if input.keep_last_run
                else "tell the workers the run stopped"
            )
            async with store.pipelined() as conn:  # one round trip for all
                if announce:
                    await announce_stop(conn, announce)
                if input.persist is not None:
                    await store.save(input.persist.input, input.persist.debrief, conn=conn)
                if input.keep_last_run and input.run_finished is not None:
                    await store.keep_last_run_on(conn, input.run_finished)
            if input.keep_last_run:
                return input.persist is not None
        payload = (
            input.run_started
            if input.signal == names.RUN_STARTED_SIGNAL
            else input.run_finished and redacted_run(input.run_finished, where="last_run")
        )
        await signal_agent(
            self.client, activity.info().task_queue, input.agent, input.signal, payload
        )
        return input.persist is not None

    def _store(self, doing: str) -> DebriefStore:
        if self.debriefs is None:
            raise RuntimeError(f"asked to {doing}, but this worker was given no Postgres store")
        return self.debriefs

    async def _last_run(self, agent_id: str) -> RunFinished | None:
        return await self._store("read a last run").last_run(agent_id)

    @activity.defn(name=names.READ_LAST_RUN)
    @refused_data_fails
    async def read_last_run(self, input: ReadLastRunInput) -> ReadLastRunResult:
        """The agent's last finished run, as the run kept it in Postgres."""
        return ReadLastRunResult(last_run=await self._last_run(input.agent_id))

    @activity.defn(name=names.READ_LIVE_RUNS)
    @refused_data_fails
    async def read_live_runs(self, input: ReadLiveRunsInput) -> ReadLiveRunsResult:
        """The agent's runs in progress, found with Temporal's visibility (runs carry their
        AgentName from the start), each read with its `progress` query, at once; and, when
        asked, its last finished run from Postgres (one activity per chat turn for both)."""
        query = (
            f"WorkflowType = '{names.AGENT_RUN_WORKFLOW}' AND ExecutionStatus = 'Running' "
            f"AND {sa.AGENT_NAME.name} = '{input.agent_id}'"  # agent ids are [A-Za-z0-9_.:-]
        )
        run_ids = [
            execution.id async for execution in self.client.list_workflows(query, limit=input.limit)
        ]
        reads = await asyncio.gather(*(self._progress(run_id) for run_id in run_ids))
        last_run = await self._last_run(input.agent_id) if input.last_run else None
        running = [p for p in reads if p is not None and p.status == "running"]
        result = live_runs_result(
            [redacted(p, where="live_runs", owner=f"run {p.run_id}") for p in running], last_run
        )
        if len(result.runs) < len(running):
            activity.logger.info(
                "%s: chat reads %d of its %d runs in progress: the others' progress is past "
                "%s bytes",
                input.agent_id,
                len(result.runs),
                len(running),
                f"{LIVE_RUNS_MAX_BYTES:,}",
            )
        return result

    async def _progress(self, run_id: str) -> RunProgress | None:
        """The run's live state from its `progress` query; None when it is not running.

        Temporal is asked first (visibility can lag): a run that was terminated, cancelled or
        timed out never said it ended, and its `progress` query (answered by replaying its
        history) would still say "running" forever."""
        handle = self.client.get_workflow_handle(run_id)
        try:
            description = await handle.describe()
            if description.status != WorkflowExecutionStatus.RUNNING:
                activity.logger.info("%s is not running: %s", run_id, description.status)
                return None
            return await handle.query(names.PROGRESS_QUERY, result_type=RunProgress)
        except (RPCError, WorkflowQueryRejectedError) as err:
            activity.logger.info("no progress for %s: %s", run_id, err)
            return None

    @activity.defn(name=names.READ_RUN_PROGRESS)
    async def read_run_progress(self, input: ReadRunProgressInput) -> ReadRunProgressResult:
        """The run's live state from its `progress` query; None when it is not running."""
        return ReadRunProgressResult(progress=await self._progress(input.run_id))
