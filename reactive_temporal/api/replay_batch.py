"""Check a batch of live runs against the current code before a deploy.

`replay_recent` takes the N most recent runs (of an agent, or matching a visibility query),
adds each run's debrief workflow and its agent's entity workflow, and replays every history
against the workflows this process has. A history that no longer replays is a run the new
code would break mid-flight: guard the change with `workflow.patched` (README, "Changing
workflow code") before deploying.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from temporalio.client import Client, WorkflowHistory
from temporalio.converter import DataConverter
from temporalio.runtime import Runtime, TelemetryConfig
from temporalio.service import RPCError
from temporalio.worker import Replayer

from reactive_temporal import search_attributes as sa
from reactive_temporal.api.replay import ReplayReport, replay
from reactive_temporal.api.runs import quote_literal, runs_query
from reactive_temporal.contracts import names
from reactive_temporal.errors import workflow_not_found

MAX_RECENT = 1_000


def quiet_replayer(
    workflows: Sequence[type], data_converter: DataConverter, **options: Any
) -> Replayer:
    """A Replayer whose SDK core logs nothing.

    A history that no longer replays is reported by us, once (the core would also write a
    warning to stdout, in the middle of `--json`).
    """
    runtime = Runtime(telemetry=TelemetryConfig(logging=None))
    return Replayer(workflows=workflows, data_converter=data_converter, runtime=runtime, **options)


@dataclass
class BatchReport:
    """What `replay --recent` checked: every history's report, run first, then its debrief."""

    replays: list[ReplayReport] = field(default_factory=list)

    @property
    def failed(self) -> list[str]:
        """The workflow ids whose histories do not replay."""
        return [r.workflow_id for r in self.replays if not r.ok]

    @property
    def ok(self) -> bool:
        """Every history replays."""
        return not self.failed


def recent_runs_query(agent: str | None = None, query: str | None = None) -> str:
    """Runs of `agent`, or runs matching `query` (a visibility query, e.g. "Outcome = 'failed'")."""
    if agent is not None and query is not None:
        raise ValueError("give --agent or --query, not both")
    if query is not None:
        if not query.strip():
            raise ValueError("--query is empty")
        return f"{runs_query()} AND ({query})"
    return runs_query(agent=agent)


def recent_entities_query(agent: str | None = None, query: str | None = None) -> str | None:
    """The agents' entities to replay beside the runs: `agent`'s, or every running one.

    None when runs are picked by a query (it says nothing of entities). Found through their
    runs only, a chat-only agent's entity was never replayed before a deploy (an audit's
    rollback broke one that `replay --recent 30` had passed).
    """
    if query is not None:
        return None
    if agent is not None:
        return f"WorkflowId = {quote_literal(names.agent_workflow_id(agent))}"
    return f"WorkflowType = '{names.AGENT_WORKFLOW}' AND ExecutionStatus = 'Running'"


async def _history(
    client: Client, workflow_id: str, run_id: str | None = None
) -> WorkflowHistory | None:
    try:
        return await client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
    except RPCError as err:
        if workflow_not_found(err):
            return None
        raise


def check_recent(recent: int) -> None:
    """ValueError unless `recent` is a sensible batch size (1 to MAX_RECENT)."""
    if not 1 <= recent <= MAX_RECENT:
        raise ValueError(f"--recent must be between 1 and {MAX_RECENT}, not {recent}")


async def replay_recent(
    client: Client, replayer: Replayer, *, recent: int, query: str, entities: str | None = None
) -> BatchReport:
    """Replay the `recent` most recent runs matching `query`, with their debriefs and agents.

    Also the `recent` most recent entities matching `entities` (`recent_entities_query`).
    """
    check_recent(recent)
    report = BatchReport()
    agents: list[str] = []
    async for run in client.list_workflows(query, limit=recent):
        history = await _history(client, run.id, run.run_id)
        if history is None:
            continue
        report.replays.append(await replay(history, replayer))
        debrief = await _history(client, names.debrief_workflow_id(run.id))
        if debrief is not None:
            report.replays.append(await replay(debrief, replayer))
        agent = run.typed_search_attributes.get(sa.AGENT_NAME)
        if agent and agent not in agents:
            agents.append(agent)
    entity_ids = [names.agent_workflow_id(agent) for agent in agents]
    if entities is not None:
        async for wf in client.list_workflows(entities, limit=recent):
            if wf.id not in entity_ids:
                entity_ids.append(wf.id)
    for entity_id in entity_ids:
        entity = await _history(client, entity_id)
        if entity is not None:
            report.replays.append(await replay(entity, replayer))
    return report
