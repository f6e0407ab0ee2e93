"""Reading a run's debrief from outside it: the instant one, or the rich one once synthesized.

The instant debrief comes with the run's result; the rich one lives in its DebriefWorkflow,
which may not exist (memory off, nothing to synthesize), may have failed, may belong to the
run's timeline before a rerun, or may have no worker to finish it. `starter.py debrief`,
`RunResult.debrief_rich` and `Agent.dispose` (which waits for those still being written) meet
each case the same way because they share this.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Awaitable, Callable
from typing import TypeVar

from temporalio.client import (
    Client,
    WorkflowExecutionDescription,
    WorkflowExecutionStatus,
    WorkflowFailureError,
)
from temporalio.service import RPCError

from reactive_temporal.api.results import result_of
from reactive_temporal.api.runs import require_run
from reactive_temporal.api.unserved import while_served
from reactive_temporal.contracts import names
from reactive_temporal.contracts.debrief import AgentDebrief
from reactive_temporal.contracts.result import AgentResult
from reactive_temporal.errors import root_cause, workflow_not_found

log = logging.getLogger("reactive_temporal")
T = TypeVar("T")
Gave = Callable[[str], str]


async def load_debrief(client: Client, run_id: str, *, wait_for_rich: bool) -> AgentDebrief | None:
    """A run's debrief: the finished rich one, else the instant one.

    With `wait_for_rich`, waits for the rich one first. None when the run had memory off.

    Raises:
        ValueError: no such run, or it failed before it could be debriefed.
        RunUnserved: it is still running and no worker can end it now (none polls its task
            queue, or its workflow task keeps failing).
    """
    running = (await require_run(client, run_id)).status == WorkflowExecutionStatus.RUNNING
    ending: Awaitable[AgentResult] = result_of(
        client.get_workflow_handle(run_id, result_type=AgentResult)
    )
    if running:
        ending = _served(
            client,
            run_id,
            ending,
            lambda why: (
                f"run {run_id!r} is still running, and has no debrief until it ends; it "
                f"cannot end now: {why}"
            ),
        )
    try:
        result = await ending
    except WorkflowFailureError as err:
        raise ValueError(
            f"run {run_id!r} failed before it could be debriefed: {root_cause(err)}"
        ) from err
    if result.debrief is None:
        return None
    if not wait_for_rich:
        try:
            child = await _debrief_child(client, run_id)
        except RPCError:
            return result.debrief
        if child is None or child.status != WorkflowExecutionStatus.COMPLETED:
            return result.debrief
    return await fetch_rich_debrief(client, run_id, fallback=result.debrief)


async def _debrief_child(client: Client, run_id: str) -> WorkflowExecutionDescription | None:
    """The run's DebriefWorkflow, when its current execution started it.

    None when there is none, or only one a timeline of the run before a reset (`rerun`)
    started: that one debriefs the failed attempt ("failed"), where the rerun's own debrief,
    kept by the run itself when it had nothing to synthesize, says what happened.
    """
    try:
        child = await client.get_workflow_handle(names.debrief_workflow_id(run_id)).describe()
    except RPCError as err:
        if workflow_not_found(err):
            return None
        raise
    current = (await client.get_workflow_handle(run_id).describe()).run_id
    if child.parent_run_id and child.parent_run_id != current:
        return None
    return child


async def fetch_rich_debrief(
    client: Client, run_id: str, *, fallback: AgentDebrief | None = None
) -> AgentDebrief | None:
    """The run's rich debrief, awaited.

    `fallback` when its DebriefWorkflow failed or is gone, or when there is none: a run with
    nothing to synthesize keeps its deterministic debrief and starts no child.
    """
    handle = client.get_workflow_handle(names.debrief_workflow_id(run_id), result_type=AgentDebrief)
    try:
        if await _debrief_child(client, run_id) is None:
            return fallback
        return await _served(
            client,
            handle.id,
            result_of(handle),
            lambda why: f"its debrief workflow cannot finish now: {why}",
        )
    except RPCError as err:
        if workflow_not_found(err):
            return fallback
        log.warning("rich debrief of %s unavailable (%s); using the instant one", run_id, err)
        return fallback
    except Exception as err:  # the child failed: the instant debrief stands
        log.warning("rich debrief of %s unavailable (%s); using the instant one", run_id, err)
        return fallback


async def _served(client: Client, workflow_id: str, waiting: Awaitable[T], gave_up: Gave) -> T:
    """A debrief's wait, ended when no worker can end the workflow awaited (`while_served`)."""
    return await while_served(client, workflow_id, waiting, gave_up)


async def wait_for_rich_debriefs(client: Client, pending: list[str], seconds: float) -> list[str]:
    """Wait up to `seconds` for these runs' rich debriefs (`Agent.wait_for_debriefs`).

    `math.inf` waits until each is done; `Agent.wait_for_debriefs` has checked `seconds`.

    Returns:
        The run ids whose debrief did not finish in time.
    """
    if not pending:
        return []
    waits = {
        run_id: asyncio.ensure_future(
            result_of(client.get_workflow_handle(names.debrief_workflow_id(run_id)))
        )
        for run_id in pending
    }
    await asyncio.wait(waits.values(), timeout=None if math.isinf(seconds) else seconds)
    late = [run_id for run_id, w in waits.items() if not w.done()]
    for w in waits.values():
        if not w.done():
            w.cancel()
        elif (error := w.exception()) is not None and not _no_child(error):
            log.warning("a rich debrief failed: %s", error)
    if late:
        log.warning(
            "%d rich debrief(s) still running after %.0fs (%s); they complete on the "
            "next worker that runs",
            len(late), seconds, ", ".join(late),
        )  # fmt: skip
    return late


def _no_child(error: BaseException) -> bool:
    """The run kept its own debrief (nothing to synthesize): it started no DebriefWorkflow."""
    return workflow_not_found(error)
