"""The tool calls waiting for approval, across runs (`starter.py approvals`).

Each run visibility shows parked is asked for its calls, several at once; deciding one is
`api/control.py`'s.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import datetime

from pydantic import BaseModel
from temporalio.client import Client

from reactive_temporal import search_attributes as sa
from reactive_temporal.api.progress import ProgressUnavailable, no_worker_polls, run_progress
from reactive_temporal.api.runs import quote_literal
from reactive_temporal.api.unserved import silent
from reactive_temporal.api.worker_waits import TaskQueuePollers
from reactive_temporal.contracts import names


class PendingCall(BaseModel):
    """A tool call waiting for approval, and the run it belongs to (`starter.py approvals`)."""

    run_id: str
    agent: str
    call_id: str
    tool: str
    arguments: str
    since: datetime
    iteration: int


RUNS_GOING_QUERY = f"WorkflowType = '{names.AGENT_RUN_WORKFLOW}' AND ExecutionStatus = 'Running'"


def waiting_runs_query(agent: str | None = None) -> str:
    """The visibility query for runs parked on approvals (optionally one agent's)."""
    parts = [RUNS_GOING_QUERY, f"{sa.WAITING_FOR.name} = 'approval'"]
    if agent:
        parts.append(f"{sa.AGENT_NAME.name} = {quote_literal(agent)}")
    return " AND ".join(parts)


async def runs_still_going(client: Client) -> set[str]:
    """The workflow id of every run still going: what `prune` keeps.

    However long it has written nothing (parked on an approval for days). A run's rows are
    keyed by its workflow id, which a run continued as new keeps.
    """
    return {wf.id async for wf in client.list_workflows(RUNS_GOING_QUERY)}


APPROVALS_ASKED_AT_ONCE = 16
"""Runs asked for their waiting calls at once: a run no worker serves costs its query's
patience, so 200 of them asked one by one took 200 times that (29 s each with no worker up,
an hour and a half) before `approvals` said, wrongly, that nothing waited."""


class UnansweredRun(BaseModel):
    """A run listed as waiting for approval that could not say which calls wait."""

    run_id: str
    agent: str
    why: str
    """What the server shows (no worker polls its task queue, its workflow task keeps
    failing) or that no worker answered in time."""


class ApprovalsUnavailable(ValueError):
    """Some runs waiting for approval could not say which calls wait: the list is not whole.

    `pending` holds the calls the other runs named, `unanswered` the runs that could not.
    """

    def __init__(self, pending: list[PendingCall], unanswered: list[UnansweredRun]) -> None:
        """The message names the first run that could not answer, and why."""
        count = len(unanswered)
        lead = (
            f"{count:,} runs waiting for approval could not say which calls wait; the first: "
            if count > 1
            else "a run waiting for approval could not say which calls wait: "
        )
        super().__init__(lead + unanswered[0].why)
        self.pending = pending
        self.unanswered = unanswered


@dataclass(frozen=True)
class WaitingApprovals:
    """What `approvals` shows.

    The calls the waiting runs named, the runs that could not answer, and how many runs wait
    in all (more than were asked when past the limit).
    """

    pending: list[PendingCall]
    unanswered: list[UnansweredRun]
    runs_asked: int
    runs_waiting: int


async def waiting_approvals(
    client: Client, agent: str | None = None, limit: int = 200
) -> WaitingApprovals:
    """The tool calls waiting for approval, oldest first, in at most `limit` runs.

    The runs visibility lists as waiting are each asked for their pending calls (the
    `progress` query is the truth; visibility may lag by a moment), several at once, each
    not at all when the server shows no worker can answer (`api/progress.py`), or that the
    workers it remembers polling the run's task queue have gone (`api.unserved.silent`).
    """
    query = waiting_runs_query(agent)
    listed = [wf async for wf in client.list_workflows(query, limit=limit)]
    waiting = len(listed)
    if waiting >= limit:  # visibility's count says whether more wait than were listed
        waiting = max((await client.count_workflows(query)).count, waiting)
    pollers = TaskQueuePollers(client)
    gate = asyncio.Semaphore(APPROVALS_ASKED_AT_ONCE)

    async def ask(run_id: str, listed_agent: str, queue: str) -> list[PendingCall] | UnansweredRun:
        async with gate:
            if await silent(pollers, queue):  # its workers gone: the query would wait 10 s
                why = f"run {run_id!r} cannot answer: {no_worker_polls(queue)}"
                return UnansweredRun(run_id=run_id, agent=listed_agent, why=why)
            try:
                progress = await run_progress(client, run_id, pollers=pollers)
            except ProgressUnavailable as err:
                return UnansweredRun(run_id=run_id, agent=listed_agent, why=str(err))
            except ValueError:
                return []  # gone since it was listed
        return [
            PendingCall(run_id=run_id, agent=progress.agent_id, **p.model_dump())
            for p in progress.pending_approvals
        ]

    answers = await asyncio.gather(
        *(
            ask(wf.id, wf.typed_search_attributes.get(sa.AGENT_NAME) or "", wf.task_queue)
            for wf in listed
        )
    )
    return WaitingApprovals(
        pending=sorted(
            (call for a in answers if isinstance(a, list) for call in a),
            key=lambda p: (p.since, p.run_id, p.call_id),
        ),
        unanswered=[a for a in answers if isinstance(a, UnansweredRun)],
        runs_asked=len(listed),
        runs_waiting=waiting,
    )


async def pending_calls(
    client: Client, agent: str | None = None, limit: int = 200
) -> list[PendingCall]:
    """Every tool call waiting for approval (in at most `limit` runs), oldest first.

    Raises:
        ApprovalsUnavailable: a waiting run could not answer (no worker up for it, its
            workflow task failing), with the calls the others named: an empty list would
            say nothing waits.
    """
    found = await waiting_approvals(client, agent, limit)
    if found.unanswered:
        raise ApprovalsUnavailable(found.pending, found.unanswered)
    return found.pending
