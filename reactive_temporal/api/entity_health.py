"""Which agents' chat is stuck (their entity's workflow task keeps failing), for `check`.

A stuck entity looks "running" and says nothing until someone chats with it
(`api/entity_wedge.py`). Temporal's server marks a workflow whose workflow task has failed
several times in a row (five by default:
`system.numConsecutiveWorkflowTaskProblemsToTriggerSearchAttribute`) with the
`TemporalReportedProblems` search attribute (Temporal 1.28 and later), so one visibility
query finds them all, on the task queue checked, with the cause the server saw. A server
without it refuses the query: the check then says it cannot tell.
"""

from __future__ import annotations

from dataclasses import dataclass

from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from reactive_temporal.api.entity_wedge import reset_command
from reactive_temporal.api.runs import quote_literal
from reactive_temporal.contracts import names

PROBLEMS = "TemporalReportedProblems"
WORKFLOW_TASK_FAILED = "category=WorkflowTaskFailed"
CAUSE_PREFIX = "cause=WorkflowTaskFailedCause"
LISTED = 10
"""Stuck agents named in the check's one line; the rest are counted."""


class ProblemsUnreported(Exception):
    """The server does not report workflow task problems (no TemporalReportedProblems)."""


@dataclass(frozen=True)
class StuckEntity:
    """An agent whose chat workflow's task keeps failing."""

    agent_id: str
    workflow_id: str
    cause: str | None
    """As the server names it (`PayloadsTooLarge`, `NonDeterministicError`, …), when it does."""


def stuck_query(task_queue: str) -> str:
    """The visibility query for the running agent entities on `task_queue` the server marks."""
    return (
        f"WorkflowType = '{names.AGENT_WORKFLOW}' AND ExecutionStatus = 'Running' AND "
        f"TaskQueue = {quote_literal(task_queue)} AND {PROBLEMS} IN ('{WORKFLOW_TASK_FAILED}')"
    )


async def stuck_entities(client: Client, task_queue: str, limit: int = 100) -> list[StuckEntity]:
    """The agents on `task_queue` whose chat is stuck, at most `limit`.

    Raises:
        ProblemsUnreported: the server has no TemporalReportedProblems to ask by.
    """
    found: list[StuckEntity] = []
    try:
        async for execution in client.list_workflows(stuck_query(task_queue), limit=limit):
            marks = execution.search_attributes.get(PROBLEMS) or []
            causes = [str(m) for m in marks if str(m).startswith(CAUSE_PREFIX)]
            cause = causes[0].removeprefix(CAUSE_PREFIX) if causes else None
            agent_id = execution.id.removeprefix(names.agent_workflow_id(""))
            found.append(StuckEntity(agent_id, execution.id, cause))
    except RPCError as err:
        if err.status == RPCStatusCode.INVALID_ARGUMENT and PROBLEMS in err.message:
            raise ProblemsUnreported(err.message) from err
        raise
    return found


def stuck_line(stuck: list[StuckEntity], task_queue: str) -> str:
    """The check's detail for `stuck` (not empty): who, why, and the way out."""
    named = ", ".join(
        f"{s.agent_id} ({s.cause})" if s.cause else s.agent_id for s in stuck[:LISTED]
    )
    more = f" and {len(stuck) - LISTED} more" if len(stuck) > LISTED else ""
    return (
        f"{len(stuck)} agents' chat on {task_queue!r} is stuck, their chat workflow's task "
        f"failing on every try: {named}{more}. Each takes no chat turn until reset: "
        f"`{reset_command('NAME')}`"
    )
