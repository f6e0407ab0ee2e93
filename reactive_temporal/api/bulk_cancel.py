"""Stopping every running run of an agent at once: the on-call's answer to an agent gone wrong.

An agent whose prompt or model went bad (a loop that calls a paid tool, a model that never
answers) has runs going everywhere, each spending until it ends; cancelling them one id at a
time from `starter.py runs` took a minute a dozen runs. `cancel --agent NAME` (and
`Agent.cancel_running()`) cancels each running run of the agent as `cancel RUN_ID` does (it
ends `cancelled`, with its last text and its debrief), CANCELS_AT_ONCE at a time, and waits for
each to end. A run no worker can end now keeps its cancel (Temporal recorded it) and is named;
one that ended before its cancel reached it is counted apart.

The runs are found through Temporal's visibility, which lists a run a moment after it starts
(about a second on a dev server, more on a busy cluster): a run started during the cancel may
be missed, and the command said so. Run it again to catch it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

from temporalio.client import Client

from reactive_temporal.api.control import cancel_recorded, check_cancel_reason, request_cancel
from reactive_temporal.api.results import UNREACHABLE_PATIENCE_SECONDS
from reactive_temporal.api.run_results import AgentRunError, RunResult, run_result
from reactive_temporal.api.runs import runs_query
from reactive_temporal.api.unserved import RunUnserved, while_served
from reactive_temporal.api.workflow_ids import valid_agent_name

CANCELS_AT_ONCE = 16
"""Runs cancelled and waited for at once: each is a cancel request, a result's long poll and
a look at its task queue every few seconds."""


@dataclass
class CancelledRuns:
    """What became of an agent's running runs, each named by its run id."""

    agent: str
    ended: dict[str, str] = field(default_factory=dict)
    """Run id → how it ended (`cancelled`, or what ended it first)."""
    failed: dict[str, str] = field(default_factory=dict)
    """Run id → why it produced no result (its workflow failed, or was terminated)."""
    already_over: list[str] = field(default_factory=list)
    """Runs listed as running that had ended before their cancel reached them."""
    unserved: dict[str, str] = field(default_factory=dict)
    """Run id → why no worker can end it now; its cancel is recorded and it ends once one can."""

    @property
    def found(self) -> int:
        """How many running runs the cancel found."""
        return len(self.ended) + len(self.failed) + len(self.already_over) + len(self.unserved)


async def running_run_ids(client: Client, agent: str) -> list[str]:
    """The agent's runs that visibility lists as running, oldest first, each once."""
    ids: dict[str, None] = {}
    async for wf in client.list_workflows(runs_query(agent=agent, status="running")):
        ids[wf.id] = None
    return list(reversed(ids))


async def cancel_running(
    client: Client,
    agent: str,
    reason: str | None = None,
    *,
    unreachable_for: float = UNREACHABLE_PATIENCE_SECONDS,
    on_end: Callable[[str, str], None] | None = None,
) -> CancelledRuns:
    """Cancel every running run of `agent` and wait for each to end.

    `on_end(run_id, what)` is told of each run as it is settled (how it ended, or why it
    could not be). Raises ValueError for a bad agent name or reason, before anything is sent.
    """
    # No agent can have a name this refuses; "" was no filter at all, every agent's runs.
    valid_agent_name(agent)
    check_cancel_reason(reason)
    outcome = CancelledRuns(agent=agent)
    at_once = asyncio.Semaphore(CANCELS_AT_ONCE)

    def settled(run_id: str, what: str) -> None:
        if on_end is not None:
            on_end(run_id, what)

    async def one(run_id: str) -> None:
        async with at_once:
            try:
                handle = await request_cancel(client, run_id, reason)
            except ValueError:  # ended (or was reset) between the listing and the cancel
                outcome.already_over.append(run_id)
                settled(run_id, "had already ended")
                return
            try:
                result: RunResult = await while_served(
                    client,
                    run_id,
                    run_result(client, handle, unreachable_for=unreachable_for),
                    cancel_recorded(run_id),
                )
            except RunUnserved as err:
                outcome.unserved[run_id] = str(err)
                settled(run_id, "waits for a worker to end it")
                return
            except AgentRunError as err:
                outcome.failed[run_id] = str(err)
                settled(run_id, "failed")
                return
            outcome.ended[run_id] = result.terminated_by
            settled(run_id, result.terminated_by)

    await asyncio.gather(*(one(run_id) for run_id in await running_run_ids(client, agent)))
    return outcome
