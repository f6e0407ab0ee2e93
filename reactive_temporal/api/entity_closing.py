"""An agent's entity that ends while a request is on its way to it: sent again once, or said.

The agent's chat workflow can close between the calls that deliver a request: `agent reset`
terminates it (`api/entity_reset.py`), someone terminates it by hand, a bug fails it. The
server then answers the update in one of two ways, and each meant a raw error to the caller
(an RPCError of the SDK, or a ChatError "Workflow Update failed because the Workflow completed
before the Update completed", which the CLI took for a request that is wrong, exit 2):

- NOT_FOUND, "workflow execution already completed": the update reached a run that had
  closed, or that closed before it took it (the server drops an update it admitted but had
  not handed over). Nothing of it was taken. Sent again under its one update id, the
  update-with-start (or the start the fallback sends first) reaches the entity's next run,
  which runs it once: `EntityHandle._send` does so once.
- the update failed `AcceptedUpdateCompletedWorkflow`: the run took it and ended before it
  answered. A read (the last run, a session page, opening or ending a session) is sent again
  the same way. A chat turn is not: the model may have been asked and the turn saved to its
  session, and a reset entity does not remember the replies its last run gave
  (`answered_turns` is not carried), so sent again it could be answered and saved twice. The
  caller is told it may or may not have been answered, and where to look.

Both are ChatUnavailable (`EntityEnded`): not the request's fault, exit 1.
"""

from __future__ import annotations

import logging
import shlex
from collections.abc import Awaitable, Callable
from typing import Literal, TypeVar

from temporalio.client import WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError

from reactive_temporal.api.chat_refusals import ChatUnavailable
from reactive_temporal.contracts import names
from reactive_temporal.errors import workflow_not_found

T = TypeVar("T")

log = logging.getLogger(__name__)

ENDED_UNDER_UPDATE = "AcceptedUpdateCompletedWorkflow"
"""The failure type the server gives an update its run took and did not finish as it closed."""

Ended = Literal["before", "while"]
"""The run closed before it took the request, or while it was answering it."""


def ended_under(err: BaseException) -> Ended | None:
    """Whether `err` says the entity's run closed under the request, and when; else None."""
    if workflow_not_found(err):
        return "before"
    if isinstance(err, WorkflowUpdateFailedError):
        cause = err.cause
        if isinstance(cause, ApplicationError) and cause.type == ENDED_UNDER_UPDATE:
            return "while"
    return None


class EntityEnded(ChatUnavailable):
    """The agent's entity ended under the request, and it was not answered.

    `taken`: its run had taken the request (a chat turn may have been answered and saved).
    """

    def __init__(
        self, agent_id: str, workflow_id: str, *, taken: bool, session_id: str | None = None
    ) -> None:
        """`session_id`: the chat turn's session, which says where a taken turn shows."""
        super().__init__(ended_message(agent_id, workflow_id, taken=taken, session_id=session_id))
        self.agent_id = agent_id
        self.workflow_id = workflow_id
        self.taken = taken


def ended_message(
    agent_id: str, workflow_id: str, *, taken: bool, session_id: str | None = None
) -> str:
    """What the caller is told: whose workflow ended, whether the request was taken, what to do."""
    whose = f"agent {agent_id}'s chat workflow ({workflow_id})"
    why = (
        "(`agent reset`, or a terminate by hand: the ended run's history says why, "
        f"`temporal workflow describe -w {shlex.quote(workflow_id)}`)"
    )
    if not taken:
        return (
            f"{whose} ended as the request reached it, and again when it was sent to the next "
            f"run: something ends it as it starts {why}. The request was not taken: send it "
            "again once nothing ends it"
        )
    look = ""
    if session_id is not None:
        look = (
            ": `python starter.py session history "
            f"{shlex.quote(session_id)} --agent {shlex.quote(agent_id)}` shows it if it was"
        )
    return (
        f"{whose} ended while it was answering the request {why}. It was taken and may or "
        f"may not have been answered and saved{look}. Send it again if it was not; its next "
        "run starts with that send"
    )


async def once_more_if_ended(
    deliver: Callable[[], Awaitable[T]],
    agent_id: str,
    *,
    resend_taken: bool,
    session_id: str | None = None,
) -> T:
    """`deliver()`, once more when the entity's run ended under it.

    When that run had not taken it, or, with `resend_taken`, when it had (not for a chat turn).
    `deliver` sends the request under one update id each time: the next run runs it once.

    Raises:
        EntityEnded: the entity ended under it, and under the try sent again.
    """
    for last_try in (False, True):
        try:
            return await deliver()
        except (RPCError, WorkflowUpdateFailedError) as err:
            ended = ended_under(err)
            if ended is None:
                raise
            if last_try or (ended == "while" and not resend_taken):
                raise EntityEnded(
                    agent_id,
                    names.agent_workflow_id(agent_id),
                    taken=ended == "while",
                    session_id=session_id,
                ) from err
            log.info("agent %s's chat workflow ended under a request; sending it again", agent_id)
    raise AssertionError("unreachable")  # the last try returns or raises
