"""Controlling a running run from outside: cancel it, decide its tool calls, follow it.

Client-side functions the Python API (`Agent.cancel`, `Agent.approve`, …) and the CLI
(`starter.py cancel`, `approvals`, `approve`, `deny`) share.
"""

from __future__ import annotations

import asyncio
import getpass
import uuid
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any

from temporalio.client import (
    Client,
    WorkflowExecutionDescription,
    WorkflowExecutionStatus,
    WorkflowHandle,
    WorkflowQueryFailedError,
    WorkflowUpdateFailedError,
)
from temporalio.service import RPCError

from reactive_temporal.api.arguments import unencodable_problem
from reactive_temporal.api.chat_refusals import cluster_refusal
from reactive_temporal.api.progress import (
    task_failing,
)
from reactive_temporal.api.runs import require_run
from reactive_temporal.api.unserved import (
    RunUnserved,
    require_served,
    while_served,
    why_unserved,
)
from reactive_temporal.api.workflow_ids import shown
from reactive_temporal.contracts.approvals import ApprovalDecision, ApprovalOutcome
from reactive_temporal.contracts.result import AgentResult
from reactive_temporal.limits import TOOL_CALL_NAME_MAX_CHARS
from reactive_temporal.refusals import busy_or_aborted, tasks_failing, while_busy
from workflows.agent_run import AgentRunWorkflow

CANCEL_REASON_MAX_CHARS = 500


async def running_run(client: Client, run_id: str) -> WorkflowHandle[Any, AgentResult]:
    """The handle of a run that is still running.

    Raises:
        ValueError: naming what is wrong (no such run, not an agent run, already over).
    """
    await require_running(client, run_id)
    return client.get_workflow_handle_for(AgentRunWorkflow.run, run_id)


async def require_running(client: Client, run_id: str) -> WorkflowExecutionDescription:
    """The description of a run that is still running; ValueError as `running_run`."""
    description = await require_run(client, run_id)
    status = description.status
    if status != WorkflowExecutionStatus.RUNNING:
        state = status.name.lower() if status is not None else "closed"
        raise ValueError(f"run {run_id!r} is not running (it is {state})")
    return description


def check_cancel_reason(reason: str | None, what: str = "a cancel's reason") -> None:
    """ValueError when a cancel's reason cannot be kept; TypeError when it is not text.

    Kept: no NUL byte, no lone surrogate, at most CANCEL_REASON_MAX_CHARS. `what` names it:
    an agent reset's reason is held to the same rules (it was clipped to 1,000 characters
    without a word, and `5` was taken as "5").
    """
    if reason is None:
        return
    if not isinstance(reason, str):  # an int was "argument of type 'int' is not iterable"
        raise TypeError(f"{what} is a string, not {type(reason).__name__}")
    if "\x00" in reason:
        raise ValueError("the reason contains a NUL byte (\\x00), which cannot be stored")
    if len(reason) > CANCEL_REASON_MAX_CHARS:
        raise ValueError(
            f"the reason is {len(reason):,} characters; the limit is {CANCEL_REASON_MAX_CHARS}"
        )
    if (problem := unencodable_problem("the reason", reason)) is not None:
        raise ValueError(problem)  # protobuf's encoder raised, or U+FFFD was recorded


async def request_cancel(
    client: Client, run_id: str, reason: str | None = None
) -> WorkflowHandle[Any, AgentResult]:
    """Ask Temporal to cancel the run; returns the handle to await its graceful result.

    `reason` is recorded in the run's history, its result's `error` and its debrief.
    """
    check_cancel_reason(reason)
    handle = await running_run(client, run_id)
    await handle.cancel(reason=reason or "")
    return handle


def cancel_recorded(run_id: str) -> Callable[[str], str]:
    """What a wait for a cancelled run's end says when no worker can end it now.

    The cancel is in the run's history (Temporal records it without a worker): it ends as
    `cancelled` once one runs it, and sending it again changes nothing.
    """
    return lambda why: (
        f"the cancel of run {run_id!r} is recorded, and it ends as cancelled once a worker "
        f"runs it; none can now: {why}"
    )


# -- approvals ---------------------------------------------------------------------------------


def default_decider() -> str:
    """Who decides when `--by` is not given: the OS user."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no user name for this uid (a bare container)
        return "unknown"


DECISION_QUERY_PATIENCE_SECONDS = 30.0
"""How long `approve RUN_ID` (no call id) waits for the run to say which calls wait, once the
server shows a worker may answer: a loaded worker replaying a run it does not hold answered
CI's back-to-back queries in over 10 s, and the decision was refused for nothing."""
DECISION_PATIENCE_SECONDS = 5.0
"""How long a decision waits quietly for the run's worker before `notice` says it waits."""
DECISION_GIVE_UP_SECONDS = 90.0
"""How long a decision sent waits for a worker to take it when the server cannot tell that
none can (the last worker gone under POLL_SILENCE ago): a worker started after a crash took
over 30 s to take a decision sent meanwhile (the dead worker's sticky task timed out first),
and it was delivered; past this, the sender is told it may still be."""


CALL_ID_MAX_CHARS = TOOL_CALL_NAME_MAX_CHARS
"""No waiting call's id is longer: a model's id is used only when it is at most 64 plain
characters (`workflows/approval_rules.approval_id`), else `call-<position>`."""


def call_ids_problem(call_ids: Sequence[object]) -> str | None:
    """Why one of `call_ids` names no call any run can be waiting on, or None.

    Checked before anything is sent: a 2,000-character id went to the run, which echoed it
    whole in "unknown call id …"; an id is quoted here cut (`workflow_ids.shown`).
    """
    for call_id in call_ids:
        if not isinstance(call_id, str):
            return f"a call id is a string, not {type(call_id).__name__}"
        if len(call_id) > CALL_ID_MAX_CHARS:
            return (
                f"unknown call id {shown(call_id)}: no call waiting for approval has an id "
                f"over {CALL_ID_MAX_CHARS} characters (`approvals` lists them)"
            )
        if (problem := unencodable_problem("a call id", call_id)) is not None:
            return problem
    return None


async def decide(
    client: Client,
    run_id: str,
    call_ids: list[str],
    *,
    approve: bool,
    reason: str | None = None,
    by: str | None = None,
    notice: Callable[[str], None] | None = None,
) -> ApprovalOutcome:
    """Approve or deny a run's waiting calls (all of them when `call_ids` is empty).

    Not sent when the server shows no worker can take it (none polls the run's task queue,
    or its workflow task keeps failing): admitted, it would be delivered whenever one came
    back, long after anyone remembered deciding. `notice` is told when a decision sent
    waits DECISION_PATIENCE_SECONDS for the run's worker.

    Raises:
        ValueError: no such run, not running, or the run refused the decision (an unknown
            or already decided call, a denial without a reason), saying why; a call id no
            waiting call can have is refused before anything is sent.
        TypeError: `call_ids` is a string, or holds what is not one.
        ClusterRefusal: the cluster refuses workflow updates (a ValueError naming its fix).
        RunUnserved: no worker can take the decision now (it was not sent), or none took
            the one sent within DECISION_GIVE_UP_SECONDS (it may still be delivered).
    """
    if isinstance(call_ids, str):  # one id, not its letters
        raise TypeError(f"call_ids is a list of call ids, not the string {shown(call_ids)}")
    if (odd := next((c for c in call_ids if not isinstance(c, str)), None)) is not None:
        raise TypeError(f"a call id is a string, not {type(odd).__name__}")
    if (problem := call_ids_problem(list(call_ids))) is not None:
        raise ValueError(problem)
    try:
        decision = ApprovalDecision(
            call_ids=list(call_ids), approve=approve, reason=reason, by=by or default_decider()
        )
    except ValueError as err:
        raise ValueError(f"invalid decision: {err}") from err
    description = await require_running(client, run_id)
    await require_served(
        client,
        description,
        lambda why: (
            f"run {run_id!r} cannot take a decision now: {why}. Nothing was sent: "
            "decide again once a worker runs it"
        ),
    )
    handle = client.get_workflow_handle_for(AgentRunWorkflow.run, run_id)
    if not decision.call_ids:
        # "all" is the calls waiting now, named: a decision sent again after the run was too
        # busy to take it decided the next turn's calls, which nobody had seen
        try:
            waiting = (
                await handle.query(
                    AgentRunWorkflow.progress,
                    rpc_timeout=timedelta(seconds=DECISION_QUERY_PATIENCE_SECONDS),
                )
            ).pending_approvals
        except (RPCError, WorkflowQueryFailedError) as err:
            raise ValueError(
                f"run {run_id!r} did not say which calls wait within "
                f"{DECISION_QUERY_PATIENCE_SECONDS:g} s (is a worker running for task queue "
                f"{description.task_queue!r}?); nothing was sent: {err}"
            ) from err
        if not waiting:
            raise ValueError(f"run {run_id!r} has no call waiting for approval")
        decision = decision.model_copy(update={"call_ids": [p.call_id for p in waiting]})
    update_id = str(uuid.uuid4())  # one id for every try: a decision sent again is made once

    async def attempt() -> ApprovalOutcome:
        return await handle.execute_update(
            AgentRunWorkflow.decide_tool_calls, decision, id=update_id
        )

    async def sent() -> ApprovalOutcome:
        sending = asyncio.ensure_future(
            while_busy(attempt, f"a decision on {run_id}", passing=busy_or_aborted)
        )
        if (
            notice is not None
            and not (await asyncio.wait({sending}, timeout=DECISION_PATIENCE_SECONDS))[0]
        ):
            notice(
                "waiting for a worker to take the decision to the run (is one running for "
                f"task queue {description.task_queue!r}?); Ctrl-C stops waiting, the "
                "decision may still land"
            )
        return await sending

    try:
        return await while_served(
            client,
            run_id,
            sent(),
            lambda why: (
                f"run {run_id!r} has not taken the decision: {why}. It was sent and may "
                f"still be delivered when a worker runs it: `starter.py progress {run_id}` shows "
                "whether its calls still wait"
            ),
            give_up_after=DECISION_GIVE_UP_SECONDS,
        )
    except WorkflowUpdateFailedError as err:
        cause = err.cause
        message = getattr(cause, "message", None) or str(cause or err)
        raise ValueError(f"run {run_id!r} refused: {message}") from err
    except RPCError as err:
        if (refusal := cluster_refusal(err, client.namespace)) is not None:
            raise refusal from err  # for good: the cluster takes no update at all
        if tasks_failing(err):  # refused at once: the server admits no update then
            why, stall = await why_unserved(client, await require_run(client, run_id))
            raise RunUnserved(
                f"run {run_id!r} cannot take a decision now: "
                f"{why or task_failing(run_id)}. Nothing was decided: decide again "
                "once a worker completes its workflow task",
                stall.retrying,
                stall.waiting_for_worker,
            ) from err
        if not run_closed(err):
            raise
        raise ValueError(f"run {run_id!r} ended before the decision reached it") from err


def run_closed(err: RPCError) -> bool:
    """Whether the run ended as an update reached it (cancelled, answered).

    Temporal says the update was aborted by the workflow's closing, or that it had completed.
    """
    message = err.message.lower()
    return "closing workflow" in message or "already completed" in message
