"""`run` in a terminal asks inline when the run waits for approval of a tool call."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable

from temporalio.client import Client

from reactive_temporal.api.control import decide, default_decider
from reactive_temporal.cli.common import err
from reactive_temporal.cli.terminal import safe
from reactive_temporal.contracts.approvals import PendingApproval

Ask = Callable[[str], str]
"""Reads one answer from the person at the terminal (`input`, or a test's script)."""


async def ask_inline(
    client: Client,
    run_id: str,
    pending: Iterable[PendingApproval],
    *,
    ask: Ask = input,
    by: str | None = None,
) -> None:
    """Ask about each waiting call: approve, or deny with a reason (the model reads it).

    Someone else deciding first (another terminal, `starter.py approve`) is reported, not
    an error: the run goes on with their decision.
    """
    decider = by or default_decider()
    for call in pending:
        err.print(
            f"[yellow]approval needed[/] call {safe(call.call_id)}: "
            f"[bold]{safe(call.tool)}[/]({safe(call.arguments)})"
        )
        answer = (await asyncio.to_thread(ask, "  approve? [y/N] ")).strip().lower()
        approve = answer in ("y", "yes")
        reason = None
        if not approve:
            reason = (await asyncio.to_thread(ask, "  reason for denying: ")).strip()
            reason = reason or "denied at the terminal"
        try:
            await decide(client, run_id, [call.call_id], approve=approve, reason=reason, by=decider)
        except ValueError as e:
            err.print(f"[dim]{safe(e)}[/]")
            continue
        verdict = "[green]approved[/]" if approve else "[red]denied[/]"
        err.print(f"  {verdict} by {safe(decider)}")
