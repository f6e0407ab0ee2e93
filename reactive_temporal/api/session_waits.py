"""A chat turn that waits behind its session's tool-path turn, parked on approval: said.

A session's turns run one at a time. A tool-path turn is a child run, and a tool call of it
that needs approval parks it until a person decides (a day by default): a second turn in the
same session was taken and then waited on the session for that long, `starter.py chat`
saying nothing. Measured on a dev server: the second turn waited out the test's 60 s bound.

Now a turn not answered within PATIENCE_SECONDS asks the entity (`session_busy` query) which
tool-path run holds its session and whether the turn waits behind it; when that run waits
for approval, the caller is told at once, naming the run and the commands that decide it.
The turn stays taken: it is answered once the run ends (`session history` shows it). A
session merely slow (a long model call, many tools) is waited for, as before; and so is one
on a worker from before the query (it cannot tell).
"""

from __future__ import annotations

import asyncio
import contextlib
import shlex
from collections.abc import Awaitable
from typing import TypeVar

from temporalio.client import Client, WorkflowQueryFailedError
from temporalio.service import RPCError

from reactive_temporal import search_attributes as sa
from reactive_temporal.api.chat_refusals import ChatUnavailable
from reactive_temporal.contracts import names
from reactive_temporal.contracts.entity import SessionBusy, SessionRef

T = TypeVar("T")

PATIENCE_SECONDS = 2.0
"""How long a turn is waited for before its session is asked about."""
RECHECK_SECONDS = 10.0
"""How often after that, while the turn is not answered."""


class SessionWaitsOnApproval(ChatUnavailable):
    """The turn was taken, and waits behind its session's tool-path run parked on approval."""

    def __init__(self, agent_id: str, session_id: str, run_id: str) -> None:
        """`run_id`: the tool-path run (workflow id) holding the session."""
        super().__init__(waits_message(agent_id, session_id, run_id))
        self.agent_id = agent_id
        self.session_id = session_id
        self.run_id = run_id


def waits_message(agent_id: str, session_id: str, run_id: str) -> str:
    """Which run the turn waits for, how to decide it, and that the turn is kept."""
    agent, run, session = (shlex.quote(v) for v in (agent_id, run_id, session_id))
    return (
        f"agent {agent_id}'s session {session_id} is answering a tool-path turn whose run "
        f"{run_id} waits for a person's approval. This turn was taken and waits behind it: "
        "it is answered once that run's calls are decided (`python starter.py session "
        f"history {session} --agent {agent}` shows the answer). `python starter.py approvals "
        f"--agent {agent}` lists the calls; `python starter.py approve {run}` or `deny` "
        "decides them"
    )


async def run_holding_on_approval(
    client: Client, agent_id: str, session_id: str, update_id: str
) -> str | None:
    """The tool-path run holding the session while it waits for approval.

    When the turn `update_id` waits behind it; None when not, or when it cannot be told now.
    """
    entity = client.get_workflow_handle(names.agent_workflow_id(agent_id))
    try:
        busy = await entity.query(
            names.SESSION_BUSY_QUERY, SessionRef(session_id=session_id), result_type=SessionBusy
        )
    except (RPCError, WorkflowQueryFailedError):  # a worker from before the query, say
        return None
    if busy.tool_run is None or update_id not in busy.waiting_turns:
        return None
    try:
        attributes = (
            await client.get_workflow_handle(busy.tool_run).describe()
        ).typed_search_attributes
    except RPCError:
        return None
    return busy.tool_run if attributes.get(sa.WAITING_FOR) == "approval" else None


async def unless_session_waits(
    turn: Awaitable[T], client: Client, agent_id: str, session_id: str, update_id: str
) -> T:
    """The turn's reply.

    Raises:
        SessionWaitsOnApproval: as soon as the turn is seen to wait behind a tool-path run of
            its session parked on approval (the turn itself stays taken).
    """
    task = asyncio.ensure_future(turn)
    wait = PATIENCE_SECONDS
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=wait)
            if done:
                return task.result()
            run = await run_holding_on_approval(client, agent_id, session_id, update_id)
            if run is not None:
                raise SessionWaitsOnApproval(agent_id, session_id, run)
            wait = RECHECK_SECONDS
    finally:
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
