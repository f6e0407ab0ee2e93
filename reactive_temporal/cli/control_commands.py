"""Control a running run: `cancel` it, list and decide its tool calls waiting for approval
(`approvals`, `approve`, `deny`), follow its live output (`watch`), see where it is, what
it is stuck retrying and whether it waits for a worker (`progress`)."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Annotated

import typer
from rich.table import Table

from reactive_temporal.api.approval_listing import (
    ApprovalsUnavailable,
    waiting_approvals,
    waiting_runs_query,
)
from reactive_temporal.api.bulk_cancel import cancel_running
from reactive_temporal.api.control import (
    call_ids_problem,
    cancel_recorded,
    check_cancel_reason,
    decide,
    request_cancel,
)
from reactive_temporal.api.progress import ProgressUnavailable, run_progress
from reactive_temporal.api.run_results import AgentRunError, run_result
from reactive_temporal.api.runs import runs_query
from reactive_temporal.api.unserved import while_served
from reactive_temporal.api.watching import follow_events
from reactive_temporal.cli.common import (
    CliError,
    agent_name_given,
    cli_runtime,
    err,
    out,
    run_command,
    run_id_given,
)
from reactive_temporal.cli.live_view import LivePrinter
from reactive_temporal.cli.progress_lines import progress_line, stall_lines
from reactive_temporal.cli.run_commands import print_outcome
from reactive_temporal.cli.terminal import plain, safe
from reactive_temporal.contracts.approvals import DECIDER_MAX_CHARS
from reactive_temporal.hosting.runtime import Runtime
from workflows.approval_rules import reason_problem


def cancel(
    run_id: Annotated[
        str | None,
        typer.Argument(
            help="The run to stop (printed by `run`).", show_default=False, callback=run_id_given
        ),
    ] = None,
    agent: Annotated[
        str | None,
        typer.Option(
            help="Instead of one run: every running run of this agent.", callback=agent_name_given
        ),
    ] = None,
    reason: Annotated[
        str | None, typer.Option(help="Why; recorded in the run's result and debrief.")
    ] = None,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json", help="Print the AgentResult as JSON (--agent: what became of each run)."
        ),
    ] = False,
) -> None:
    """Cancel a running run: what is in flight is cancelled and the run ends as `cancelled`
    with its last text, its debrief and its agent told; prints that result. With --agent,
    every running run of that agent, waiting for each to end."""

    async def main() -> int:
        if (run_id is None) == (agent is None):
            raise CliError("give a RUN_ID or --agent NAME (one of them)")
        try:
            check_cancel_reason(reason)  # before connecting: a bad reason needs no server
            if agent is not None:
                runs_query(agent=agent)  # and a name a query cannot hold
        except ValueError as e:
            raise CliError(str(e)) from e
        runtime = await cli_runtime()
        try:
            if agent is not None:
                return await _cancel_agent(runtime, agent, reason, as_json)
            assert run_id is not None
            handle = await request_cancel(runtime.client, run_id, reason)
            if not as_json:
                err.print(f"[dim]cancel requested for {safe(run_id)}; waiting for it to end…[/]")
            result = await while_served(
                runtime.client,
                run_id,
                run_result(runtime.client, handle, unreachable_for=runtime.unreachable_patience),
                cancel_recorded(run_id),
            )
        except ValueError as e:
            raise CliError(str(e), code=1) from e
        except AgentRunError as e:
            raise CliError(str(e), code=1) from e
        finally:
            await runtime.close()
        print_outcome(result, as_json=as_json)
        return 0

    run_command(main, as_json=as_json)


async def _cancel_agent(runtime: Runtime, agent: str, reason: str | None, as_json: bool) -> int:
    """`cancel --agent`: each running run of the agent cancelled, a line as each ends, and
    exit 1 when any could not be ended (no worker can now, or it failed)."""
    if not as_json:
        err.print(f"[dim]cancelling the running runs of agent {safe(agent)}…[/]")

    def ended(run_id: str, what: str) -> None:
        if not as_json:
            err.print(f"  {safe(run_id)}: {safe(what)}")

    done = await cancel_running(
        runtime.client,
        agent,
        reason,
        unreachable_for=runtime.unreachable_patience,
        on_end=ended,
    )
    if as_json:
        print(json.dumps(asdict(done)))
    elif done.found == 0:
        out.print(
            f"no running runs of agent {safe(agent)} (a run started in the last seconds may "
            "not be listed yet: run this again to catch it)"
        )
    else:
        out.print(
            f"{len(done.ended)} of {done.found} running runs of agent {safe(agent)} ended"
            + (f", {len(done.already_over)} had already ended" if done.already_over else "")
        )
        for run, why in {**done.unserved, **done.failed}.items():
            out.print(f"[red]{safe(run)}[/]: {safe(why)}")
    return 1 if done.unserved or done.failed else 0


def approvals(
    agent: Annotated[
        str | None, typer.Option(help="Only this agent's runs.", callback=agent_name_given)
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="One JSON object: {pending: […]}")
    ] = False,
) -> None:
    """Tool calls waiting for approval: run id, call id, tool, arguments, since when."""

    async def main() -> int:
        try:
            waiting_runs_query(agent)  # a bad --agent is refused before connecting
        except ValueError as e:
            raise CliError(str(e)) from e
        runtime = await cli_runtime()
        try:
            found = await waiting_approvals(runtime.client, agent)
        except ValueError as e:
            raise CliError(str(e)) from e
        finally:
            await runtime.close()
        unanswered = found.unanswered
        more = found.runs_waiting - found.runs_asked
        if as_json:
            listing: dict[str, object] = {
                "pending": [p.model_dump(mode="json") for p in found.pending]
            }
            if unanswered:
                listing["unanswered"] = [u.model_dump() for u in unanswered]
            if more > 0:
                listing["runs_waiting"] = found.runs_waiting
            print(json.dumps(listing))
        else:
            table = Table("run", "call", "tool", "arguments", "since")
            for p in found.pending:
                since = p.since.isoformat(timespec="seconds")
                cells = (p.run_id, p.call_id, p.tool, p.arguments, since)
                table.add_row(*(plain(c) for c in cells))
            out.print(table)
            for u in unanswered:
                err.print(f"[yellow]{safe(u.agent)}[/]: {safe(u.why)}", soft_wrap=True)
            if not found.pending and not unanswered:
                err.print("[dim]no tool call is waiting for approval[/]")
        if more > 0:
            err.print(
                f"[yellow]{found.runs_waiting:,} runs wait for approval: these are the calls of "
                f"{found.runs_asked:,} of them[/] (--agent NAME shows one agent's)"
            )
        if unanswered:
            incomplete = ApprovalsUnavailable(found.pending, unanswered)
            err.print(f"[red]error:[/] {safe(incomplete)}", highlight=False, soft_wrap=True)
            return 1
        return 0

    run_command(main, as_json=as_json)


def approve(
    run_id: Annotated[str, typer.Argument(help="The run whose calls wait.", callback=run_id_given)],
    call_ids: Annotated[
        list[str] | None, typer.Argument(help="The calls to approve; none: every waiting call.")
    ] = None,
    by: Annotated[str | None, typer.Option(help="Who approves; default the OS user.")] = None,
    reason: Annotated[str | None, typer.Option(help="Why (kept in the debrief).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="The decisions as JSON.")] = False,
) -> None:
    """Approve a run's tool calls waiting for approval; the run goes on and runs them."""
    _decide(run_id, call_ids or [], approve=True, reason=reason, by=by, as_json=as_json)


def deny(
    run_id: Annotated[str, typer.Argument(help="The run whose calls wait.", callback=run_id_given)],
    call_ids: Annotated[
        list[str] | None, typer.Argument(help="The calls to deny; none: every waiting call.")
    ] = None,
    reason: Annotated[str, typer.Option(help="Why; the model reads it as the call's result.")] = "",
    by: Annotated[str | None, typer.Option(help="Who denies; default the OS user.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="The decisions as JSON.")] = False,
) -> None:
    """Deny a run's tool calls waiting for approval; the model reads the reason and goes on."""
    _decide(run_id, call_ids or [], approve=False, reason=reason, by=by, as_json=as_json)


def _decide(
    run_id: str,
    call_ids: list[str],
    *,
    approve: bool,
    reason: str | None,
    by: str | None,
    as_json: bool,
) -> None:
    async def main() -> int:
        if not approve and not (reason or "").strip():
            raise CliError("a denial needs a reason: --reason TEXT (the model reads it)")
        # What the run's validator refuses for itself, refused before connecting (it was
        # "run … refused", exit 1, and only with the server and the run's worker up).
        problem = reason_problem(reason, approve=approve) or call_ids_problem(call_ids)
        if problem is None and by is not None and len(by) > DECIDER_MAX_CHARS:
            problem = f"--by is {len(by)} characters; the limit is {DECIDER_MAX_CHARS}"
        if problem is not None:
            raise CliError(problem)
        runtime = await cli_runtime()
        try:
            # a run takes a decision in its worker: with none taking it, it waited silent
            outcome = await decide(
                runtime.client,
                run_id,
                call_ids,
                approve=approve,
                reason=reason,
                by=by,
                notice=lambda line: err.print(f"[dim]{safe(line)}[/]", soft_wrap=True),
            )
        except ValueError as e:
            raise CliError(str(e), code=1) from e
        finally:
            await runtime.close()
        if as_json:
            print(outcome.model_dump_json())
            return 0
        for record in outcome.decided:
            err.print(
                f"{'[green]approved[/]' if approve else '[red]denied[/]'} "
                f"{safe(record.tool)} (call {safe(record.call_id)}) by {safe(record.by)}"
            )
        if not outcome.decided:
            err.print("[dim]nothing left to decide: someone else decided meanwhile[/]")
        return 0

    run_command(main, as_json=as_json)


def watch(
    run_id: Annotated[
        str, typer.Argument(help="A running or finished run.", callback=run_id_given)
    ],
    from_offset: Annotated[
        int, typer.Option(min=0, help="Start at this event offset (to resume).")
    ] = 0,
    as_json: Annotated[
        bool, typer.Option("--json", help="JSON Lines: one event per line, `finished` last.")
    ] = False,
    hide_thinking: Annotated[
        bool,
        typer.Option(
            "--hide-thinking", help="A reasoning model's thinking: one line a step, not its text."
        ),
    ] = False,
) -> None:
    """Follow a run's live output from any process: the model's text as it is generated,
    tool calls as they start and end, approvals, and its end; a finished run's from the start."""

    async def main() -> int:
        runtime = await cli_runtime()
        printer = LivePrinter(json_lines=as_json, hide_thinking=hide_thinking)
        code = 0
        try:
            async for event in follow_events(
                runtime.client,
                runtime.database_url,
                run_id,
                from_offset=from_offset,
                unreachable_for=runtime.unreachable_patience,
                until_unserved=True,
            ):
                printer.show(event)
                if event.type == "finished":
                    code = 0 if event.result is not None and event.result.success else 1
        except ValueError as e:
            raise CliError(str(e), code=1) from e
        finally:
            await runtime.close()
        return code

    run_command(main, as_json=as_json)


def progress(
    run_id: Annotated[
        str, typer.Argument(help="A running or finished run.", callback=run_id_given)
    ],
    as_json: Annotated[
        bool,
        typer.Option(
            "--json", help="Print the RunProgress as JSON (`retrying`, `waiting_for_worker`)."
        ),
    ] = False,
) -> None:
    """Where a run is: its iteration, tool, tokens, calls waiting for approval, the step it
    is stuck retrying (an LLM endpoint down, Postgres unreachable, its workflow task failing:
    the step, its attempt, since when and its last failure), and the step no worker takes
    (none polls its task queue). Exit 1 when no worker answers, or none can."""

    async def main() -> int:
        runtime = await cli_runtime(worker=False)
        try:
            found = await run_progress(runtime.client, run_id)
        except ProgressUnavailable as e:
            # what the server knows still answers "is it stuck?": said with the error
            if as_json:
                retrying = e.retrying.model_dump(mode="json") if e.retrying else None
                waiting = e.waiting_for_worker
                print(
                    json.dumps(
                        {
                            "error": str(e),
                            "run_id": run_id,
                            "retrying": retrying,
                            "waiting_for_worker": waiting.model_dump(mode="json")
                            if waiting
                            else None,
                        }
                    )
                )
            err.print(f"[red]error:[/] {safe(e)}", highlight=False, soft_wrap=True)
            if not as_json:
                for line in stall_lines(e.retrying, e.waiting_for_worker):
                    err.print(plain(line, style="yellow"), soft_wrap=True)
            return 1
        except ValueError as e:
            raise CliError(str(e), code=1) from e
        finally:
            await runtime.close()
        if as_json:
            print(found.model_dump_json())
            return 0
        shown = found.model_copy(update={"retrying": None, "waiting_for_worker": None})
        out.print(plain(progress_line(shown)), soft_wrap=True)
        for line in stall_lines(found.retrying, found.waiting_for_worker):
            out.print(plain(line, style="yellow"), soft_wrap=True)
        return 0

    run_command(main, as_json=as_json)
