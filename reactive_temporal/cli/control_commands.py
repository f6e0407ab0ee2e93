"""`cancel`: stop a running run gracefully (issue 12 adds approvals and live output here)."""

from __future__ import annotations

from typing import Annotated

import typer

from reactive_temporal.api.agents import AgentRunError, run_result
from reactive_temporal.api.control import request_cancel
from reactive_temporal.cli.common import CliError, cli_runtime, err, run_command
from reactive_temporal.cli.run_commands import print_outcome
from reactive_temporal.cli.terminal import safe


def cancel(
    run_id: Annotated[str, typer.Argument(help="The run to stop (printed by `run`).")],
    reason: Annotated[
        str | None, typer.Option(help="Why; recorded in the run's result and debrief.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the AgentResult as JSON.")] = False,
) -> None:
    """Cancel a running run: what is in flight is cancelled and the run ends as `cancelled`
    with its last text, its debrief and its agent told; prints that result."""

    async def main() -> int:
        runtime = await cli_runtime()
        try:
            handle = await request_cancel(runtime.client, run_id, reason)
            if not as_json:
                err.print(f"[dim]cancel requested for {safe(run_id)}; waiting for it to end…[/]")
            result = await run_result(runtime.client, handle)
        except ValueError as e:
            raise CliError(str(e), code=1) from e
        except AgentRunError as e:
            raise CliError(str(e), code=1) from e
        finally:
            await runtime.close()
        print_outcome(result, as_json=as_json)
        return 0

    run_command(main, as_json=as_json)
