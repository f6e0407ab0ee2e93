"""What a busy Temporal server refuses for now, and waiting it out.

The frontend holds only so many long polls of one kind at once, a workflow admits only so
many updates in flight, and the server drops an update it had admitted when the workflow
moves on; each answer asks the caller to come back. `while_busy` does, for calls that are
safe to send twice (`reactive_temporal.api` for results, chat and approvals; the worker's
start for the search attributes).
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from temporalio.service import RPCError, RPCStatusCode

log = logging.getLogger(__name__)

T = TypeVar("T")

FIRST_PAUSE_SECONDS = 0.5
LONGEST_PAUSE_SECONDS = 10.0
"""Pauses double up to this between two tries, each drawn from its half to its whole so that
the waiters turned away together do not come back together."""


def busy(err: Exception) -> bool:
    """The server is too busy to take the call now.

    It holds as many long polls, or as many updates in flight on the workflow, as it takes.
    Not a message too large for gRPC (the same status): that one would be refused forever,
    and a chat message of 5 MB waited for good.
    """
    return (
        isinstance(err, RPCError)
        and err.status == RPCStatusCode.RESOURCE_EXHAUSTED
        and "larger than max" not in err.message
    )


def tasks_failing(err: Exception) -> bool:
    """The workflow's last workflow task failed, so it takes no update until one completes
    ("Workflow Task in failed state": a nondeterminism error on a worker, or a bug)."""
    return (
        isinstance(err, RPCError)
        and err.status == RPCStatusCode.FAILED_PRECONDITION
        and "workflow task in failed state" in err.message.lower()
    )


TRANSPORT_FAILED = (RPCStatusCode.UNKNOWN, "transport error")
"""How gRPC reports a connection that was made and then dropped, or reset mid-call: a load
balancer whose server behind it restarts, a server killed as it accepts. The transport failed,
not the call: sent again (`while_busy` sends only calls safe to send twice), it is answered
once the server is back. Taken for a refusal, a wait for a run's result gave up ~7 s into a
restart while the run went on."""


CALL_DROPPED = (RPCStatusCode.CANCELLED, "operation was canceled")
"""How a call whose connection was dropped under it ends once the SDK's own retries (about
10 s) are spent: a start sent through a load balancer whose server restarts. Not the caller's
cancellation (that is asyncio's CancelledError): sent again, it is answered once the server
is back."""


def unreachable(err: Exception) -> bool:
    """The server could not be reached (restarting, a network partition), or the connection
    to it was dropped before it answered (`TRANSPORT_FAILED`, `CALL_DROPPED`; for an update,
    the SDK raises the latter as WorkflowUpdateRPCTimeoutOrCancelledError, which it also
    raises for the caller's own cancellation: that one is not the server's)."""
    # here, not at the top: workflows import this module (through search_attributes), and
    # nothing of the client may be imported with them (tests/unit/test_layout.py)
    from temporalio.client import WorkflowUpdateRPCTimeoutOrCancelledError

    if isinstance(err, WorkflowUpdateRPCTimeoutOrCancelledError):
        cause = err.__cause__
        return isinstance(cause, RPCError) and unreachable(cause)
    if not isinstance(err, RPCError):
        return False
    return err.status == RPCStatusCode.UNAVAILABLE or any(
        err.status == status and err.message == text
        for status, text in (TRANSPORT_FAILED, CALL_DROPPED)
    )


UPDATE_ABORTED = (RPCStatusCode.UNAVAILABLE, "workflow update was aborted")
"""How the server drops an update it had admitted but not yet handed to the workflow: when the
workflow continues as new, or its state is reloaded. It asks the caller to send it again."""


def busy_or_aborted(err: Exception) -> bool:
    """The server is too busy to take an update now, or dropped it before the workflow saw it.

    Sent again under the same update id it runs once in the run it reaches. The server says
    "aborted" also, rarely, for an update the run it was sent to had already run, as that run
    continued as new; sent again, it reaches the next run, which has not seen its id. The agent
    entity answers such a chat turn from the replies it carries over
    (`reactive_temporal.answered_turns`).
    """
    status, text = UPDATE_ABORTED
    return busy(err) or (isinstance(err, RPCError) and err.status == status and text in err.message)


async def while_busy(
    attempt: Callable[[], Awaitable[T]],
    what: str,
    *,
    passing: Callable[[Exception], bool] = busy,
    give_up_after: float | None = None,
    unreachable_for: float = 0.0,
) -> T:
    """`attempt()`, tried again for as long as the server's refusal is `passing` (or, with
    `give_up_after`, until that many seconds of refusals: then the last one is raised), and
    through `unreachable_for` seconds of a server that cannot be reached.

    Only what is safe to send twice goes through here: an await, or an update with its own
    update id, which the server runs once however often it is sent. Besides the long-poll limit
    (`api/results.py`), a workflow admits 10 updates in flight at once
    (`history.maxInFlightUpdates`): the eleventh chat turn sent to one agent at once is
    refused, not queued, and waits here.
    """
    pause = FIRST_PAUSE_SECONDS
    told = False
    deadline = None if give_up_after is None else time.monotonic() + give_up_after
    lost_since: float | None = None
    while True:
        try:
            return await attempt()
        except Exception as err:
            now = time.monotonic()
            if unreachable(err) and not passing(err):
                lost_since = lost_since or now
                if now - lost_since >= unreachable_for:
                    raise
            elif not passing(err) or (deadline is not None and now >= deadline):
                raise
            else:
                lost_since = None
            if not told:
                why = err.__cause__ or err  # a refused update: the workflow's own words
                log.warning("Temporal cannot take %s now (%s); waiting on", what, why)
                told = True
        await asyncio.sleep(random.uniform(pause / 2, pause))
        pause = min(pause * 2, LONGEST_PAUSE_SECONDS)
