"""`runs`, `replay`, `export`, `rerun`: find runs, check old histories, re-run failures."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Annotated

import typer
from rich import box
from rich.console import Group, JustifyMethod, RenderableType
from rich.table import Table
from rich.text import Text
from temporalio.client import Client, WorkflowHistory
from temporalio.converter import DataConverter
from temporalio.service import RPCError
from temporalio.worker import Replayer

from reactive_temporal.api.agents import Agent
from reactive_temporal.api.replay import ReplayReport, history_to_json, load_history_file, replay
from reactive_temporal.api.replay_batch import (
    check_recent,
    quiet_replayer,
    recent_entities_query,
    recent_runs_query,
    replay_recent,
)
from reactive_temporal.api.rerun import original_input, rerun_from_failure
from reactive_temporal.api.run_results import AgentRunError
from reactive_temporal.api.runs import RETRYING_LOOKUPS_MAX, RunSummary, list_runs, runs_query
from reactive_temporal.cli.common import (
    CliError,
    agent_name_given,
    cli_runtime,
    cli_settings,
    err,
    out,
    path_given,
    run_command,
    run_id_given,
    workflow_id_given,
)
from reactive_temporal.cli.progress_lines import stall_lines
from reactive_temporal.cli.run_commands import watch_and_print
from reactive_temporal.cli.terminal import plain, safe
from reactive_temporal.codec import build_data_converter
from reactive_temporal.contracts.result import AgentResult
from reactive_temporal.errors import workflow_not_found
from reactive_temporal.private_files import write_private


async def _history(client: Client, workflow_id: str) -> WorkflowHistory:
    try:
        return await client.get_workflow_handle(workflow_id).fetch_history()
    except RPCError as e:
        if workflow_not_found(e):
            raise CliError(f"no workflow with id {workflow_id!r}", code=1) from e
        raise


def runs(
    agent: Annotated[
        str | None, typer.Option(help="Only this agent's runs.", callback=agent_name_given)
    ] = None,
    status: Annotated[str | None, typer.Option(help="running, completed, failed, …")] = None,
    terminated_by: Annotated[str | None, typer.Option(help="e.g. max_iterations")] = None,
    limit: Annotated[int, typer.Option(min=1, max=1000)] = 20,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object: {runs: […]}")] = False,
) -> None:
    """Recent runs with their status, terminated_by and outcome (from Temporal visibility)."""

    async def main() -> int:
        try:
            query = runs_query(agent, status, terminated_by)
        except ValueError as e:
            raise CliError(str(e)) from e
        runtime = await cli_runtime(worker=False)
        try:
            found = await list_runs(runtime.client, query, limit)
        finally:
            await runtime.close()
        if as_json:
            print(json.dumps({"query": query, "runs": [r.model_dump(mode="json") for r in found]}))
            return 0
        out.print(runs_view(found, out.width))
        unreadable = [r for r in found if r.unreadable]
        if unreadable:
            err.print(
                f"[yellow]{len(unreadable)} of these runs' tasks cannot be shown:[/] "
                f"{safe(unreadable[0].unreadable)}",
                soft_wrap=True,
            )
        if not found:
            err.print(f"[dim]no runs match {safe(query)}[/]")
        running = sum(r.status == "running" for r in found)
        if running > RETRYING_LOOKUPS_MAX:
            err.print(
                f"[dim]only the newest {RETRYING_LOOKUPS_MAX} of {running} running runs were "
                "checked for a step retried or waiting for a worker (progress RUN_ID for any)[/]"
            )
        return 0

    run_command(main, as_json=as_json)


TASK_MIN_WIDTH = 12
"""Below this much room for the task, one block per run reads better than a table."""
RUN_COLUMNS = ("run", "agent", "status", "terminated by", "outcome", "iter", "tokens")


def _run_cells(r: RunSummary) -> tuple[str, ...]:
    tokens = f"{r.tokens:,}" if r.tokens else ""
    iterations = str(r.iterations or "")
    return (r.run_id, r.agent or "", r.status, r.terminated_by or "", r.outcome or "",
            iterations, tokens)  # fmt: skip


def runs_view(found: list[RunSummary], width: int) -> RenderableType:
    """The runs as a table when the terminal is wide enough for every column but the task,
    else one short block per run. Either way a run id is never cut: it is the handle every
    other command takes (only the task, and in blocks the details line, are shortened)."""
    rows = [_run_cells(r) for r in found]
    widths = [max([len(h), *(len(row[i]) for row in rows)]) for i, h in enumerate(RUN_COLUMNS)]
    task_width = width - sum(widths) - 2 * (len(RUN_COLUMNS) + 1) - 1
    if task_width >= TASK_MIN_WIDTH:
        table = Table(box=box.SIMPLE_HEAD)
        for header, column_width in zip(RUN_COLUMNS, widths, strict=True):
            justify: JustifyMethod = "right" if header in ("iter", "tokens") else "left"
            table.add_column(header, no_wrap=True, min_width=column_width, justify=justify)
        table.add_column("task", no_wrap=True, overflow="ellipsis", max_width=task_width)
        for r, cells in zip(found, rows, strict=True):
            table.add_row(*(plain(c) for c in (*cells, (r.task or "").replace("\n", " "))))
        stuck = [t for r in found for t in _stall_texts(r, r.run_id, width)]
        return Group(table, *stuck) if stuck else table
    blocks: list[RenderableType] = []
    for r in found:
        facts = [r.agent, r.status, r.terminated_by, r.outcome]
        if r.iterations:
            facts.append(f"{r.iterations} iter")
        if r.tokens:
            facts.append(f"{r.tokens:,} tokens")
        details = plain("  " + " · ".join(f for f in facts if f), style="dim")
        details.truncate(width, overflow="ellipsis")
        blocks += [plain(r.run_id, style="bold"), details]
        blocks += _stall_texts(r, "", width)
        if r.task:
            task = plain("  " + r.task.replace("\n", " "))
            task.truncate(width, overflow="ellipsis")
            blocks.append(task)
    return Group(*blocks)


def _stall_texts(run: RunSummary, run_id: str, width: int) -> list[Text]:
    """A run's step stuck retrying and its step no worker takes, a line each under the runs
    (shortened to the width)."""
    texts = []
    for line in stall_lines(run.retrying, run.waiting_for_worker):
        text = plain(f"{run_id}{':' if run_id else ''} {line}", style="yellow")
        text.truncate(width, overflow="ellipsis")
        texts.append(text)
    return texts


def replay_command(
    workflow_id: Annotated[
        str | None, typer.Argument(help="A run on the server.", callback=workflow_id_given)
    ] = None,
    file: Annotated[
        str | None,
        typer.Option("--file", callback=path_given, help="An exported history JSON."),
    ] = None,
    file_workflow_id: Annotated[
        str | None,
        typer.Option(
            "--workflow-id",
            help="With --file from `temporal workflow show`: its id.",
            callback=workflow_id_given,
        ),
    ] = None,
    recent: Annotated[
        int | None,
        typer.Option(
            "--recent",
            metavar="N",
            help="Check the N most recent runs (with their debriefs and agents) before a deploy.",
        ),
    ] = None,
    agent: Annotated[
        str | None,
        typer.Option(
            "--agent", help="With --recent: that agent's runs.", callback=agent_name_given
        ),
    ] = None,
    query: Annotated[
        str | None,
        typer.Option("--query", help="With --recent: runs matching this visibility query."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Replay a run's history (or a batch: --recent N) against the current code: exit 0 when
    every one still fits."""

    async def main() -> int:
        given = [workflow_id is not None, file is not None, recent is not None]
        if sum(given) != 1:
            raise CliError("give a WORKFLOW_ID, --file HISTORY.json or --recent N (one of them)")
        if (agent is not None or query is not None) and recent is None:
            raise CliError("--agent and --query select runs for --recent N")
        if recent is not None:
            return await _replay_batch(recent, agent, query, as_json)
        if file is not None:
            try:
                history = load_history_file(Path(file), file_workflow_id)
            except ValueError as e:
                raise CliError(str(e)) from e
            converter = _file_converter()
        else:
            assert workflow_id is not None
            runtime = await cli_runtime(worker=False)
            try:
                history = await _history(runtime.client, workflow_id)
                converter = runtime.client.data_converter
            finally:
                await runtime.close()
        report = await replay(history, _replayer(converter))
        if as_json:
            print(json.dumps(report.__dict__))
        else:
            _print_replay(report)
            if not report.ok and not report.foreign:
                err.print(KEY_HINT if report.unreadable else PATCH_HINT)
        return 0 if report.ok else 2 if report.foreign else 1

    run_command(main, as_json=as_json)


PATCH_HINT = (
    "[dim]The code changed a decision old runs already made: guard the change with "
    "workflow.patched() (see README, 'Changing workflow code').[/]"
)
KEY_HINT = (
    "[dim]Its payloads could not be read: this is about the encryption keys "
    "(REACTIVE_TEMPORAL_ENCRYPTION_KEYS), not the code.[/]"
)


def _print_replay(report: ReplayReport) -> None:
    if report.ok:
        out.print(f"[green]✓[/] {safe(report.workflow_id)}: {report.events} events replay cleanly")
    else:
        at = f" at event {report.event_id}" if report.event_id else ""
        out.print(
            f"[red]✗[/] {safe(report.workflow_id)} no longer replays{at}:\n{safe(report.error)}"
        )


def _file_converter() -> DataConverter:
    """The converter a worker of these settings has: an exported history's payloads are as
    encrypted as the server keeps them, and `replay ID` read them with the keys, `--file` with
    none (and said to set the keys that were set)."""
    settings = cli_settings()
    try:
        return build_data_converter(settings.encryption_keys, required=settings.encryption_required)
    except ValueError as e:
        raise CliError(f"invalid configuration: {e}") from e


def _replayer(converter: DataConverter) -> Replayer:
    """A Replayer of the worker's workflows (`WORKFLOWS` imported here: the worker factory's
    modules are about a second of the start of every command, which most do not need)."""
    from reactive_temporal.hosting.worker_factory import WORKFLOWS

    # the command reports every history that fails, in a line: the SDK also logged each one
    # that could not be decoded with a traceback (this process only replays)
    logging.getLogger("temporalio.worker._workflow").setLevel(logging.CRITICAL)
    return quiet_replayer(WORKFLOWS, converter)


async def _replay_batch(recent: int, agent: str | None, query: str | None, as_json: bool) -> int:
    try:
        check_recent(recent)
        visibility = recent_runs_query(agent, query)
        entities = recent_entities_query(agent, query)
    except ValueError as e:
        raise CliError(str(e)) from e
    runtime = await cli_runtime(worker=False)
    try:
        replayer = _replayer(runtime.client.data_converter)
        try:
            batch = await replay_recent(
                runtime.client, replayer, recent=recent, query=visibility, entities=entities
            )
        except ValueError as e:
            raise CliError(str(e)) from e
        except RPCError as e:  # e.g. a query the server cannot parse
            raise CliError(f"cannot list runs ({visibility}): {e.message}") from e
    finally:
        await runtime.close()
    if as_json:
        replays = [r.__dict__ for r in batch.replays]
        print(json.dumps({"checked": len(replays), "failed": batch.failed, "replays": replays}))
        return 0 if batch.ok else 1
    if not batch.replays:
        out.print(f"no runs match {safe(visibility)}")
    for report in batch.replays:
        _print_replay(report)
    if batch.ok:
        out.print(f"{len(batch.replays)} histories replay cleanly against this code")
        return 0
    out.print(
        f"[red]{len(batch.failed)} of {len(batch.replays)} histories fail to replay:[/] "
        + ", ".join(safe(f) for f in batch.failed)
    )
    failed = [r for r in batch.replays if not r.ok]
    if any(r.unreadable for r in failed):
        err.print(KEY_HINT)
    if any(not r.unreadable for r in failed):
        err.print(PATCH_HINT)
    return 1


def export(
    workflow_id: Annotated[
        str,
        typer.Argument(help="The run (or any workflow) to export.", callback=workflow_id_given),
    ],
    output: Annotated[
        str | None,
        typer.Option("-o", "--output", callback=path_given, help="File; default stdout."),
    ] = None,
) -> None:
    """Write a workflow's history as JSON (what `replay --file` and tests/histories/ use)."""

    async def main() -> int:
        runtime = await cli_runtime(worker=False)
        try:
            history = await _history(runtime.client, workflow_id)
        finally:
            await runtime.close()
        text = history_to_json(history)
        if output is None:
            print(text)
        else:
            try:
                write_private(Path(output), text)  # a history holds every prompt and answer
            except OSError as e:
                raise CliError(f"cannot write {output}: {e.strerror or e}", code=1) from e
            err.print(f"wrote {len(history.events)} events to {safe(output)}")
        return 0

    run_command(main)


def rerun(
    workflow_id: Annotated[
        str, typer.Argument(help="A failed, timed-out or llm_error run.", callback=run_id_given)
    ],
    from_start: Annotated[
        bool, typer.Option("--from-start", help="A fresh run with the same input instead.")
    ] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the new AgentResult as JSON.")
    ] = False,
) -> None:
    """Re-execute a failed run from its last good point (a Temporal reset), or from the start."""

    async def main() -> int:
        runtime = await cli_runtime()
        try:
            try:
                run_input = await original_input(runtime.client, workflow_id)
            except ValueError as e:
                raise CliError(str(e), code=1) from e
            agent = Agent(run_input.agent, runtime)
            if from_start:
                handle = await agent.start(run_input.task)
                err.print(f"new run {safe(handle.id)} (same input as {safe(workflow_id)})")
            else:
                try:
                    new_run = await rerun_from_failure(
                        runtime.client, workflow_id, notice=lambda line: err.print(safe(line))
                    )
                except ValueError as e:
                    raise CliError(f"cannot rerun {workflow_id}: {e}", code=1) from e
                handle = runtime.client.get_workflow_handle(
                    workflow_id, run_id=new_run, result_type=AgentResult
                )
                err.print(
                    f"reset {safe(workflow_id)} to its last good point: new run id {safe(new_run)}"
                )
            try:
                result = await watch_and_print(agent, handle, as_json=as_json)
            except AgentRunError as e:
                raise CliError(str(e), code=1) from e
        finally:
            await runtime.close()
        return 0 if result.success else 1

    run_command(main, as_json=as_json)
