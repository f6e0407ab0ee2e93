"""`agent reset NAME`: the way out for an agent whose chat is stuck.

Every chat turn of an agent goes through its one chat workflow (`agent-<name>`, its entity).
When that workflow's task fails on every try, chat names it and this command
(`api/entity_wedge.py`); the reset ends it and starts a fresh one with what it knew
(`api/entity_reset.py`).
"""

from __future__ import annotations

from typing import Annotated

import typer

from reactive_temporal.api.control import check_cancel_reason
from reactive_temporal.api.entity_reset import EntityReset, reset_entity
from reactive_temporal.cli.common import (
    CliError,
    agent_builder,
    cli_runtime,
    cli_settings,
    err,
    out,
    run_command,
)
from reactive_temporal.cli.terminal import safe

agent_app = typer.Typer(
    help="An agent's chat workflow: reset NAME when its chat is stuck.", no_args_is_help=True
)


@agent_app.command("reset")
def reset(
    name: Annotated[str, typer.Argument(metavar="NAME", help="The agent's name.")],
    force: Annotated[
        bool, typer.Option("--force", help="Reset it even when its chat is not stuck.")
    ] = False,
    reason: Annotated[
        str | None, typer.Option(help="Why, recorded in the ended workflow's history.")
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print what was done as one JSON object.")
    ] = False,
) -> None:
    """End an agent's stuck chat workflow and start a fresh one with what it knew.

    For an agent whose chat fails with "its workflow task keeps failing": the fresh one starts
    with the agent's configuration and last run; its sessions and runs are in Postgres and
    are read back when next used. A chat workflow that is not stuck is left alone unless
    --force (exit 1: nothing was done)."""

    async def main() -> int:
        settings = cli_settings()
        try:
            config = agent_builder(settings, name).config()
            check_cancel_reason(reason, "an agent reset's reason")  # a usage error, not exit 1
        except ValueError as e:
            raise CliError(str(e)) from e
        runtime = await cli_runtime(settings, worker=False)
        try:
            done = await reset_entity(
                runtime.client, runtime.task_queue, config, force=force, reason=reason
            )
        except ValueError as e:
            raise CliError(str(e), code=1) from e
        finally:
            await runtime.close()
        if as_json:
            print(done.model_dump_json())
        else:
            _print_reset(done)
        return 0

    run_command(main, as_json=as_json)


def _print_reset(done: EntityReset) -> None:
    """What was ended and why, what the fresh one holds and what it does not."""
    why = (
        f"its workflow task kept failing ({done.failure.last_failure})"
        if done.stuck and done.failure is not None and done.failure.last_failure
        else "its workflow task kept failing"
        if done.stuck
        else "by --force"
    )
    out.print(
        f"agent {safe(done.agent_id)}: ended {safe(done.workflow_id)} (run "
        f"{safe(done.ended_run_id)}), {safe(why)}",
        highlight=False,
        soft_wrap=True,
    )
    if done.new_run_id:
        out.print(f"started a fresh one (run {safe(done.new_run_id)})", highlight=False)
    else:
        out.print("a chat started a fresh one first; it goes on with what was sent to it")
    for kept in done.kept:
        err.print(f"  kept: {safe(kept)}", highlight=False)
    for left in done.left:
        err.print(f"  not carried: {safe(left)}", highlight=False)
