"""How a chat turn is refused: for good, in words a person can act on, or for now.

A ChatError is a refusal for good and says why (the agent's validator, a bad field of the
request, the model endpoint's own error), never pydantic's or the SDK's wording. A refusal
for now (the server busy, the agent's entity moving to its next run) is sent again under the
same update id instead, so the turn still runs once. The entity handle, sessions and the
Python API's `Agent.chat` all refuse through this one module, so a refusal reads the same.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError
from temporalio.client import WorkflowUpdateFailedError
from temporalio.exceptions import ActivityError, ApplicationError, ChildWorkflowError
from temporalio.service import RPCError, RPCStatusCode

from reactive_temporal.api.arguments import (
    optional_bool,
    optional_int,
    text_argument,
    unencodable_problem,
)
from reactive_temporal.cluster_switches import (
    UPDATES,
    Switch,
    refusal_message,
    refused_for_good,
    switch_refused,
)
from reactive_temporal.contracts import names
from reactive_temporal.contracts.entity import ChatRequest
from reactive_temporal.refusals import busy_or_aborted
from reactive_temporal.sanitize import clip


class ChatError(ValueError):
    """The agent refused a chat request (empty message, unknown session, …)."""


class ChatArgumentError(ChatError, TypeError):
    """A chat argument of the wrong type (`b"hi"`, `max_iterations=True`).

    A TypeError naming it, and a ChatError, as chat's refusals of what it was given have
    always been.
    """


class ChatUnavailable(ChatError):
    """The agent can take no request now, whatever the request.

    No worker serves it, its workflow is stuck, or the cluster refuses what chat needs. Not
    the request's fault: the CLI exits 1 for it (2 is for a request that is wrong), as it
    does for runs no worker serves.
    """


class ClusterRefusal(ChatUnavailable):
    """The Temporal cluster refuses, for good, a kind of call chat and approvals need.

    A feature its namespace has switched off, or that its server lacks
    (`reactive_temporal.cluster_switches`). Sent again, it would be refused again: it is not.
    The message names the cluster's own words and the fix (the dynamic config key to set, or
    the server release that has the feature on); `setting` is that key. Nothing was taken:
    no turn, no decision. A ChatError, so a caller catching chat's refusals catches it, and a
    ValueError, as approvals' refusals are.
    """

    def __init__(self, message: str, setting: str) -> None:
        """`message` says what was refused and what to do; `setting` the key to turn on."""
        super().__init__(message)
        self.setting = setting


def cluster_refusal(
    err: BaseException, namespace: str, called: Switch = UPDATES
) -> ClusterRefusal | None:
    """`err` as a ClusterRefusal when it is one, for a call of `called`'s API; else None.

    A switch's refusal is told by its words whatever was called (an update-with-start refused
    for its update says the update's); UNIMPLEMENTED is the API called.
    """
    if not isinstance(err, RPCError):
        return None
    switch = switch_refused(err) or (called if refused_for_good(err, called) else None)
    if switch is None:
        return None
    message = f"{refusal_message(err, switch, namespace)}. The request was not taken"
    return ClusterRefusal(message, switch.key)


CHAT_ERROR_MAX_CHARS = 2_000


def update_failure_message(err: WorkflowUpdateFailedError) -> str:
    """Why the update failed, as its innermost cause says it.

    A failed activity's own error (the model endpoint's refusal), not "Activity task
    failed"; clipped, since an endpoint's error body can be megabytes.
    """
    cause: BaseException | None = err.cause
    while isinstance(cause, ActivityError | ChildWorkflowError) and cause.cause is not None:
        cause = cause.cause
    message = getattr(cause, "message", None) or str(cause or err)
    return clip(message, CHAT_ERROR_MAX_CHARS)


ENTITY_BETWEEN_RUNS = (
    (RPCStatusCode.FAILED_PRECONDITION, "limit on number of total updates"),  # older servers
    (RPCStatusCode.FAILED_PRECONDITION, "total number of distinct updates"),
)
"""How the server refuses an update while the agent's entity moves to its next run: one run
takes at most 2,000 updates (`history.maxTotalUpdates`; it is told to continue as new at 90%),
and the updates it had admitted but not begun when it does are aborted (`UPDATE_ABORTED`). Its
messages (which changed between server versions) are the only mark of either."""


def busy_or_between_runs(err: Exception) -> bool:
    """Refused for now: the server is busy, or the entity is continuing as new.

    The server says so past its limit; the entity itself once it is time (it takes no new
    update then, so that what it took can finish). Its next run takes the update, under the
    same update id; a chat turn the last run had answered is answered from the replies it
    carried over (`reactive_temporal.answered_turns`), so it still runs once.
    """
    if isinstance(err, WorkflowUpdateFailedError):
        cause = err.cause
        return isinstance(cause, ApplicationError) and cause.type == names.ENTITY_BETWEEN_RUNS
    return busy_or_aborted(err) or (
        isinstance(err, RPCError)
        and any(
            err.status == status and text in err.message for status, text in ENTITY_BETWEEN_RUNS
        )
    )


def chat_request(
    *,
    message: object,
    session_id: str,
    use_tools: object = None,
    max_iterations: object = None,
    stream_id: object = None,
) -> ChatRequest:
    """A chat request, or a ChatError naming what is wrong with it (not pydantic's error).

    Checked as a run's input is (`api/arguments.py`), before anything is sent: a
    ChatArgumentError (a TypeError) for an argument of the wrong type (`b"hi"` was the
    message "hi", `max_iterations=True` one iteration); a ChatError for a message with a
    lone surrogate, which the payload converter would have carried as U+FFFD (a message
    other than the one given, where `run` refused such a task).
    """
    try:
        text = text_argument("message", message)
        fields: dict[str, Any] = {
            "message": text,
            "session_id": session_id,
            "use_tools": optional_bool("use_tools", use_tools),
            "max_iterations": optional_int("max_iterations", max_iterations),
            "stream_id": None if stream_id is None else text_argument("stream_id", stream_id),
        }
    except TypeError as err:
        raise ChatArgumentError(str(err)) from None
    if (problem := unencodable_problem("message", text)) is not None:
        raise ChatError(problem)
    try:
        return ChatRequest(**fields)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "request"
        raise ChatError(f"invalid {where}: {first['msg']}") from None
