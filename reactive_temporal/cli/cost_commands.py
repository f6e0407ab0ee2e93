"""`costs`: what each agent spent over the last days, from the agents' database.

The runs' debriefs hold their tokens and cost, and their synthesis its own (whenever it was
billed, in a debrief that fell back to the deterministic one too);
each direct chat turn has its row (`chat_usage`). This adds them up by agent, so an operator
can tell which agent is spending, on what (runs, debrief synthesis, chat), and whether its
runs succeed for it, without a provider's bill.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Annotated

import typer
from rich import box
from rich.table import Table

from activities.spend_report import MAX_DAYS, AgentSpend, SpendTotal, spend_by_agent, spend_total
from reactive_temporal.cli.common import (
    CliError,
    agent_name_given,
    cli_settings,
    err,
    out,
    run_command,
)
from reactive_temporal.cli.migrate_commands import agents_store
from reactive_temporal.cli.terminal import safe


def costs(
    agent: Annotated[
        str | None, typer.Option(help="Only this agent.", callback=agent_name_given)
    ] = None,
    days: Annotated[
        int,
        typer.Option(
            min=1, max=MAX_DAYS, help="Runs that ended and chat turns in the last DAYS days."
        ),
    ] = 7,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """What each agent spent (tokens, US dollars at the worker's prices) on its runs, their
    debriefs' synthesis and its chat, and how its runs ended, over the last --days days, the
    costliest agent first."""

    async def main() -> int:
        try:
            async with agents_store(cli_settings()) as store:
                spent = await spend_by_agent(store, days=days, agent_id=agent)
        except ValueError as e:
            raise CliError(str(e)) from e
        if as_json:
            print(json.dumps(_report(spent, days)))
        elif not spent:
            who = f" of agent {safe(agent)}" if agent else ""
            err.print(
                f"[dim]no runs{who} ended and no chat turns were answered"
                f" in the last {days} day(s)[/]"
            )
        else:
            out.print(_table(spent, days))
        return 0

    run_command(main, as_json=as_json)


def _report(spent: list[AgentSpend], days: int) -> dict[str, object]:
    return {
        "days": days,
        "agents": [s.model_dump(mode="json") for s in spent],
        "total": spend_total(spent).model_dump(mode="json"),
    }


_Line = tuple[str, int | None, str, int, float, datetime | None]
"""A line of the table: its label, how many, how runs ended, tokens, dollars, the last one."""


def _lines(name: str, s: AgentSpend | SpendTotal) -> list[_Line]:
    """An agent's (or every agent's) spend: a first line with all of it, then a line for
    each of runs, debrief synthesis and chat it spent on."""
    last_run = s.last_run_at if isinstance(s, AgentSpend) else None
    last_chat = s.last_chat_at if isinstance(s, AgentSpend) else None
    last = max((t for t in (last_run, last_chat) if t is not None), default=None)
    lines: list[_Line] = [(name, None, "", s.total_tokens, s.total_cost_usd, last)]
    if s.runs:
        outcomes = f"{s.succeeded:,}/{s.partial:,}/{s.failed:,}" if isinstance(
            s, AgentSpend
        ) else ""  # fmt: skip
        lines.append(("  runs", s.runs, outcomes, s.tokens, s.cost_usd, last_run))
    if s.syntheses or s.synthesis_tokens:
        lines.append(
            ("  synthesis", s.syntheses, "", s.synthesis_tokens, s.synthesis_cost_usd, None)
        )
    if s.chat_turns:
        lines.append(("  chat", s.chat_turns, "", s.chat_tokens, s.chat_cost_usd, last_chat))
    return lines


def _table(spent: list[AgentSpend], days: int) -> Table:
    """Each agent's total on its name's line, then its runs, their debriefs' synthesis and
    its chat on lines of their own: six narrow columns, so the table fits 80 columns (with
    an agent's name of up to ~20 characters; a longer one wraps, the numbers never do)."""
    table = Table(
        title=f"spent in the last {days} day(s)", title_justify="left",
        box=box.SIMPLE_HEAD, show_edge=False, padding=(0, 1, 0, 0), pad_edge=False,
    )  # fmt: skip
    table.add_column("agent", overflow="fold")
    for column in ("count", "ok/part/fail", "tokens", "cost"):
        table.add_column(column, justify="right", no_wrap=True)
    table.add_column("last", no_wrap=True)
    groups = [_lines(safe(s.agent_id), s) for s in spent]
    if len(spent) > 1:
        groups.append(_lines("all agents", spend_total(spent)))
    for lines in groups:
        for i, (label, count, outcomes, tokens, cost, last) in enumerate(lines):
            style = "bold" if i == 0 else ""
            table.add_row(
                label,
                "" if count is None else f"{count:,}",
                outcomes,
                f"{tokens:,}",
                f"${cost:,.4f}",
                "" if last is None else f"{last:%Y-%m-%d %H:%M}",
                style=style,
                end_section=i == len(lines) - 1,
            )
    return table
