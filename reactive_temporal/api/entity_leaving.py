"""An agent entity that is moving to its next run and waits on a person: chat says so.

Once it is time for the agent's entity to continue as new, it takes no new request until the
handlers it is running finish (`workflows/entity_lifetime.py`), and a request refused so is
sent again, to its next run (`chat_refusals.busy_or_between_runs`): a wait of seconds. But a
tool-path chat turn is a child run, and a tool call of it that needs approval parks it until
someone decides (a day by default): every request to the agent, in any session, was sent
again and again for that long, with one log line, and `starter.py chat` said nothing.
Measured on a dev server: the second turn after such a turn, once the entity was due to
continue as new, waited out the test's 40 s bound.

When the entity refuses a request so, its pending child runs are asked (a `describe()`
each, as the server holds their search attributes): one that waits for approval makes the
request refused at once, naming the runs and the commands that decide them. A child run that
is merely slow (a long model call, many tools) is waited for, as before.
"""

from __future__ import annotations

import shlex
from collections.abc import Awaitable, Callable
from typing import TypeVar

from temporalio.client import Client, WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError

from reactive_temporal import search_attributes as sa
from reactive_temporal.api.chat_refusals import ChatUnavailable
from reactive_temporal.contracts import names

T = TypeVar("T")

LISTED = 5
"""Runs named in the refusal."""


class EntityWaitsOnApproval(ChatUnavailable):
    """The agent's entity takes no request until a turn's run, waiting for approval, ends."""

    def __init__(self, agent_id: str, workflow_id: str, runs: list[str]) -> None:
        """`runs`: the tool-path chat runs waiting for approval (their workflow ids)."""
        super().__init__(waits_message(agent_id, workflow_id, runs))
        self.agent_id = agent_id
        self.workflow_id = workflow_id
        self.runs = runs


async def runs_waiting_for_approval(client: Client, workflow_id: str) -> list[str]:
    """The workflow ids of the entity's child runs that wait for a person's approval.

    Empty when it has none, or when the server cannot tell now (the request is then sent
    again, as it was).
    """
    try:
        description = await client.get_workflow_handle(workflow_id).describe()
    except RPCError:
        return []
    waiting = []
    for child in description.raw_description.pending_children:
        handle = client.get_workflow_handle(child.workflow_id, run_id=child.run_id or None)
        try:
            attributes = (await handle.describe()).typed_search_attributes
        except RPCError:
            continue
        if attributes.get(sa.WAITING_FOR) == "approval":
            waiting.append(child.workflow_id)
    return waiting


def waits_message(agent_id: str, workflow_id: str, runs: list[str]) -> str:
    """Whose chat waits, on which runs, how to decide them; that the request was not taken."""
    named = ", ".join(runs[:LISTED]) + (
        f" and {len(runs) - LISTED} more" if len(runs) > LISTED else ""
    )
    first = shlex.quote(runs[0]) if runs else "RUN_ID"
    return (
        f"agent {agent_id}'s chat workflow ({workflow_id}) is moving to its next run and takes "
        "no request until the chat turns it is answering finish, and a tool-path turn's run "
        f"waits for a person's approval: {named}. `python starter.py approvals --agent "
        f"{shlex.quote(agent_id)}` lists its calls; `python starter.py approve {first}` or "
        "`deny` decides them. The request was not taken: send it again once they are decided"
    )


def leaving(err: BaseException) -> bool:
    """The entity refused the request as it moves to its next run (its validator's words)."""
    if not isinstance(err, WorkflowUpdateFailedError):
        return False
    cause = err.cause
    return isinstance(cause, ApplicationError) and cause.type == names.ENTITY_BETWEEN_RUNS


def unless_waiting_on_approval(
    attempt: Callable[[], Awaitable[T]], client: Client, agent_id: str
) -> Callable[[], Awaitable[T]]:
    """`attempt`, whose refusal by an entity moving on that waits for approval is said.

    Raises:
        EntityWaitsOnApproval: the entity refused it as it moves to its next run, and a
            tool-path turn's run it waits for waits for approval.
    """
    workflow_id = names.agent_workflow_id(agent_id)

    async def attempted() -> T:
        try:
            return await attempt()
        except WorkflowUpdateFailedError as err:
            if leaving(err) and (runs := await runs_waiting_for_approval(client, workflow_id)):
                raise EntityWaitsOnApproval(agent_id, workflow_id, runs) from err
            raise

    return attempted
