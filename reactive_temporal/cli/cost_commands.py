"""`costs`: what each agent's runs spent over the last days, from the agents' database.

The runs' debriefs hold their tokens and cost; this adds them up by agent, so an operator can
tell which agent is spending (and whether its runs succeed for it) without a provider's bill.
"""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.table import Table

from activities.spend_report import MAX_DAYS, AgentSpend, spend_by_agent
from reactive_temporal.cli.common import CliError, cli_settings, err, out, run_command
from reactive_temporal.cli.migrate_commands import agents_store
from reactive_temporal.cli.terminal import safe


def costs(
    agent: Annotated[str | None, typer.Option(help="Only this agent.")] = None,
    days: Annotated[
        int, typer.Option(min=1, max=MAX_DAYS, help="Runs that ended in the last DAYS days.")
    ] = 7,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """What each agent's runs spent (tokens, US dollars at the worker's prices) and how they
    ended, over the last --days days, the costliest agent first."""

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
            err.print(f"[dim]no runs{who} ended in the last {days} day(s)[/]")
        else:
            out.print(_table(spent, days))
        return 0

    run_command(main, as_json=as_json)


def _total(spent: list[AgentSpend]) -> dict[str, int | float]:
    """Every agent's runs, tokens and dollars added up."""
    return {
        "runs": sum(s.runs for s in spent),
        "tokens": sum(s.tokens for s in spent),
        "cost_usd": round(sum(s.cost_usd for s in spent), 6),
    }


def _report(spent: list[AgentSpend], days: int) -> dict[str, object]:
    return {
        "days": days,
        "agents": [s.model_dump(mode="json") for s in spent],
        "total": _total(spent),
    }


def _table(spent: list[AgentSpend], days: int) -> Table:
    table = Table(title=f"runs that ended in the last {days} day(s)", title_justify="left")
    for column in ("agent", "runs", "ok / partial / failed", "tokens", "cost", "per run", "last"):
        table.add_column(column, justify="left" if column in ("agent", "last") else "right")
    for s in spent:
        table.add_row(
            safe(s.agent_id),
            f"{s.runs:,}",
            f"{s.succeeded:,} / {s.partial:,} / {s.failed:,}",
            f"{s.tokens:,}",
            f"${s.cost_usd:,.4f}",
            f"${s.cost_usd / s.runs:,.4f}",
            f"{s.last_run_at:%Y-%m-%d %H:%M}",
        )
    if len(spent) > 1:
        total = _total(spent)
        table.add_row(
            "[bold]all[/]", f"{total['runs']:,}", "", f"{total['tokens']:,}",
            f"${total['cost_usd']:,.4f}", "", "",
        )  # fmt: skip
    return table
