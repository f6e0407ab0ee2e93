"""`run` in a terminal asks inline when the run waits for approval of a tool call.

The question does not hold the run's output hostage: when the call is decided elsewhere
(`starter.py approve` from another terminal, the approval timeout) or the run ends while the
person has not answered, the question is dropped and `run` goes on showing the run.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import Callable, Iterable
from datetime import timedelta
from typing import Any

from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHandle

from reactive_temporal import search_attributes as sa
from reactive_temporal.api.control import decide, default_decider
from reactive_temporal.cli.common import err
from reactive_temporal.cli.terminal import safe
from reactive_temporal.contracts.approvals import PendingApproval
from reactive_temporal.contracts.run import RunProgress
from workflows.agent_run import AgentRunWorkflow
from workflows.approval_rules import reason_problem

Ask = Callable[[str], str]
"""Reads one answer from the person at the terminal (`input`, or a test's script)."""

STILL_PENDING_POLL_SECONDS = 0.5
CALL_CHECK_EVERY = 10
"""Every 10th check (5 s) asks the run whether the question's own call still waits (another
of its calls may keep it waiting); the others only describe it."""


class Answers:
    """Lines the person types, read in a daemon thread so a question can be dropped.

    A dropped question's read stays outstanding (a blocking `input` cannot be interrupted):
    the next question prints its prompt and takes the line typed next, so no line is lost or
    read twice, and leaving the process never waits for a line.
    """

    def __init__(self, ask: Ask = input) -> None:
        self.ask = ask
        self.reading: asyncio.Future[str] | None = None

    def line(self, prompt: str) -> asyncio.Future[str]:
        """The next line typed after `prompt` (shielded: dropping the question leaves it)."""
        if self.reading is not None and not self.reading.done():
            sys.stderr.write(prompt)  # the outstanding read answers this question
            sys.stderr.flush()
            return self.reading
        loop = asyncio.get_running_loop()
        reading: asyncio.Future[str] = loop.create_future()

        def settle(value: str | None, error: BaseException | None) -> None:
            if reading.done():
                return
            if error is not None:
                reading.set_exception(error)
            else:
                reading.set_result(value or "")

        def read() -> None:
            try:
                value = self.ask(prompt)
            except BaseException as e:  # EOF, a closed terminal: no answer
                loop.call_soon_threadsafe(settle, None, e)
            else:
                loop.call_soon_threadsafe(settle, value, None)

        threading.Thread(target=read, name="approval-answer", daemon=True).start()
        self.reading = reading
        return reading


TERMINAL = Answers()
"""The process's terminal (one outstanding read shared by every question)."""


async def ask_inline(
    client: Client,
    run_id: str,
    pending: Iterable[PendingApproval],
    *,
    ask: Ask | None = None,
    by: str | None = None,
    answers: Answers | None = None,
) -> None:
    """Ask about each waiting call: approve, or deny with a reason (the model reads it).

    Someone else deciding first (another terminal, `starter.py approve`, the approval
    timeout) or the run ending drops the question, reported, not an error: the run goes on
    with that decision.
    """
    decider = by or default_decider()
    source = answers or (Answers(ask) if ask is not None else TERMINAL)
    for call in pending:
        err.print(
            f"[yellow]approval needed[/] call {safe(call.call_id)}: "
            f"[bold]{safe(call.tool)}[/]({safe(call.arguments)})"
        )
        answer = await _unless_decided(client, run_id, call, source.line("  approve? [y/N] "))
        if answer is None:
            continue
        approve = answer.strip().lower() in ("y", "yes")
        reason = None
        if not approve:
            reason = await _reason(client, run_id, call, source)
            if reason is None:
                continue
        try:
            await decide(client, run_id, [call.call_id], approve=approve, reason=reason, by=decider)
        except ValueError as e:
            # the person's answer was not taken: said as plainly as a decision, with the way
            # to give it again, or they took the call for decided and the run waited on
            verb = "approve" if approve else "deny"
            err.print(
                f"  [bold red]not {verb}d[/]: {safe(e)}\n"
                f"  decide it later: starter.py {verb} {safe(run_id)} {safe(call.call_id)}"
                + (" --reason TEXT" if not approve else "")
            )
            continue
        verdict = "[green]approved[/]" if approve else "[red]denied[/]"
        err.print(f"  {verdict} by {safe(decider)}")


async def _reason(
    client: Client, run_id: str, call: PendingApproval, source: Answers
) -> str | None:
    """A reason the run will take, asked again while the one typed is not (too long, a NUL
    byte pasted); None once the call no longer waits."""
    while True:
        typed = await _unless_decided(client, run_id, call, source.line("  reason for denying: "))
        if typed is None:
            return None
        reason = typed.strip() or "denied at the terminal"
        problem = reason_problem(reason, approve=False)
        if problem is None:
            return reason
        err.print(f"  [bold red]{safe(problem)}[/]: type it again")


async def _unless_decided(
    client: Client, run_id: str, call: PendingApproval, answer: asyncio.Future[str]
) -> str | None:
    """The typed answer, or None (said so) once the call no longer waits for it."""
    # described and queried only: no result type to infer (mypy inferred this one's from
    # `AgentRunWorkflow.run` in some import orders and not in others)
    handle: WorkflowHandle[Any, Any] = client.get_workflow_handle(run_id)
    polls = 0
    while True:
        try:
            return await asyncio.wait_for(asyncio.shield(answer), STILL_PENDING_POLL_SECONDS)
        except TimeoutError:
            pass
        except (EOFError, OSError):
            err.print("\n[dim]no answer (the terminal closed); the run goes on waiting[/]")
            return None
        polls += 1
        if not await _still_waiting(handle, call.call_id, which_call=polls % CALL_CHECK_EVERY == 0):
            err.print(f"\n[dim]call {safe(call.call_id)} was decided elsewhere or the run ended[/]")
            return None


async def _still_waiting(
    handle: WorkflowHandle[Any, Any], call_id: str, *, which_call: bool
) -> bool:
    """Whether the run still waits for approval: its description (no worker needed, not a
    billed action) says whether it waits at all; `which_call` also asks the run (a query)
    whether this call is among those it waits for."""
    try:
        description = await handle.describe()
    except Exception:  # Temporal unreachable for a moment: keep the question
        return True
    if description.status != WorkflowExecutionStatus.RUNNING:
        return False
    if description.typed_search_attributes.get(sa.WAITING_FOR) != "approval":
        return False
    if not which_call:
        return True
    try:
        progress: RunProgress = await handle.query(
            AgentRunWorkflow.progress, rpc_timeout=timedelta(seconds=2)
        )
    except Exception:  # no worker answered in time (a restart?): it still waits
        return True
    return any(p.call_id == call_id for p in progress.pending_approvals)
