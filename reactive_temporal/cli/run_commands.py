"""`run` and `debrief`: start a run and watch it; show a run's debrief."""

from __future__ import annotations

import asyncio
import math
import sys
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any, TextIO

import typer
from rich.live import Live
from rich.panel import Panel
from rich.text import Text
from temporalio.client import Client, WorkflowHandle

from reactive_temporal.api.agents import Agent
from reactive_temporal.api.builder import AgentBuilder
from reactive_temporal.api.debriefs import load_debrief
from reactive_temporal.api.run_inputs import build_run_input
from reactive_temporal.api.run_results import AgentRunError, RunResult
from reactive_temporal.api.stalls import Stall, server_stall
from reactive_temporal.api.watching import LiveOutputUnavailable
from reactive_temporal.cli.approval_prompt import Ask, ask_inline
from reactive_temporal.cli.common import (
    OFFLINE_DEV_NOTICE,
    OFFLINE_NOTICE,
    CliError,
    cli_runtime,
    cli_settings,
    err,
    out,
    run_command,
    run_id_given,
)
from reactive_temporal.cli.live_view import LivePrinter
from reactive_temporal.cli.progress_lines import progress_line, stall_lines
from reactive_temporal.cli.terminal import markdown, plain, safe
from reactive_temporal.contracts.approvals import PendingApproval
from reactive_temporal.contracts.result import AgentResult
from reactive_temporal.contracts.run import MAX_ITERATIONS, RunProgress
from reactive_temporal.embedded.dev_server import StackError
from reactive_temporal.embedded.stack import read_published_stack
from reactive_temporal.hosting.runtime import open_runtime
from workflows.agent_run import AgentRunWorkflow


class ReasoningEffortChoice(StrEnum):
    minimal = "minimal"
    low = "low"
    medium = "medium"
    high = "high"


def run(
    task: Annotated[str, typer.Argument(help="What the agent should do.")],
    agent: Annotated[str, typer.Option(help="Agent name (its runs, memory and chat).")] = "agent",
    model: Annotated[str | None, typer.Option(help="Model name; default AGENT_MODEL.")] = None,
    max_iterations: Annotated[int, typer.Option(min=1, max=MAX_ITERATIONS)] = 10,
    required_tool: Annotated[
        list[str] | None, typer.Option(help="A tool the agent must call before finishing.")
    ] = None,
    no_memory: Annotated[
        bool, typer.Option("--no-memory", help="No debrief for this run.")
    ] = False,
    audit_rationale: Annotated[
        bool, typer.Option("--audit-rationale", help="Ask for a rationale per tool call.")
    ] = False,
    token_budget: Annotated[
        int | None,
        typer.Option(min=1, help="End the run as budget_exceeded past this many tokens."),
    ] = None,
    cost_budget: Annotated[
        float | None,
        typer.Option(
            callback=more_than_zero, help="End the run as budget_exceeded past this many USD."
        ),
    ] = None,
    timeout: Annotated[
        float | None,
        typer.Option(
            callback=more_than_zero,
            help="End the run as timeout this many seconds after its start.",
        ),
    ] = None,
    reasoning_effort: Annotated[
        ReasoningEffortChoice | None,
        typer.Option(help="How hard a reasoning model thinks (o-series, gpt-5, gemini-2.5)."),
    ] = None,
    approve: Annotated[
        list[str] | None,
        typer.Option(help="A tool whose calls wait for approval (repeatable; 'all': every tool)."),
    ] = None,
    approval_timeout: Annotated[
        float | None,
        typer.Option(
            callback=more_than_zero,
            help="Deny a call undecided this many seconds (default one day).",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the AgentResult as JSON.")] = False,
) -> None:
    """Run TASK durably, with live progress; exit 0 only when the run succeeded."""

    async def main() -> int:
        settings = cli_settings()
        try:  # each option is checked as it is given (`--model ""`: a traceback, before)
            builder = (
                AgentBuilder(settings=settings)
                .with_name(agent)
                .with_provider("openai", model=model)
                .with_reasoning(
                    max_iterations=max_iterations,
                    required_tools=required_tool,
                    audit_rationale=audit_rationale,
                    effort=reasoning_effort.value if reasoning_effort else None,
                )
            )
            if no_memory:
                builder.without_memory()
            builder.with_budget(tokens=token_budget, cost=cost_budget, timeout=timeout)
            builder.with_tools(approve=approve, approval_timeout=approval_timeout)
            config = builder.config()
            build_run_input(config, task)  # refuse bad input before starting anything
            starting = (
                settings.temporal_address is None
                and read_published_stack(settings.data_dir.resolve()) is None
            )
            if starting and not as_json:
                err.print("[dim]starting the embedded stack (Temporal dev server, Postgres)…[/]")
            runtime = await open_runtime(settings)
        except (ValueError, StackError) as e:
            raise CliError(str(e)) from e
        try:
            if runtime.offline_model and not as_json and not settings.routed(config.model):
                # a key set here is not the dev stack's: its worker answers every run
                notice = OFFLINE_NOTICE if settings.uses_offline_model else OFFLINE_DEV_NOTICE
                err.print(Panel(notice, border_style="yellow"))
            agent_ = Agent(config, runtime)
            handle = await agent_.start(task)
            if not as_json:
                err.print(f"[dim]run {safe(handle.id)} on task queue {safe(runtime.task_queue)}[/]")
            result = await watch_and_print(agent_, handle, as_json=as_json)
        except ValueError as e:
            raise CliError(str(e)) from e
        except AgentRunError as e:
            raise CliError(str(e), code=1) from e
        finally:
            await runtime.close()
        return 0 if result.success else 1

    run_command(main, as_json=as_json)


def more_than_zero(value: float | None) -> float | None:
    """A budget or a timeout of 0 ends a run before it starts: refused, naming the option
    (the help said `x>=0`, and 0 was refused as 'timeout_seconds: Input should be greater
    than 0'). inf is no limit spelt otherwise (`--cost-budget inf` was no budget, as JSON
    writes inf as null; `--timeout inf` pydantic's 'less than or equal to 31622400'): leaving
    the option out is."""
    if value is not None and not value > 0:
        raise typer.BadParameter(f"must be more than 0, not {value:g}")
    if value is not None and math.isinf(value):
        raise typer.BadParameter("must be a finite number, not inf (leave it out for no limit)")
    return value


SAY_SYNTHESIS_AFTER = 0.5
"""Seconds the rich debrief may take before `run` says it is being written (a synthesis takes
a model call; a run that kept its debrief itself answers at once)."""


async def watch_and_print(
    agent: Agent, handle: WorkflowHandle[Any, AgentResult], *, as_json: bool
) -> RunResult:
    """Follow a run to its end and print its result (JSON, or the answer and debrief)."""
    result = await _watch(agent, handle, show=not as_json)
    print_outcome(result, as_json=as_json)
    if result.debrief is not None and agent.runtime.host is not None:
        # This process hosts the only worker: finish the rich debrief before leaving. Said
        # only when it takes a while: a run with nothing to synthesize kept its debrief itself.
        rich_debrief = asyncio.ensure_future(result.debrief_rich())
        done, _ = await asyncio.wait({rich_debrief}, timeout=SAY_SYNTHESIS_AFTER)
        if not done and not as_json:
            err.print("[dim]writing the rich debrief…[/]")
        rich = await rich_debrief
        if rich is not None and rich.synthesized and not as_json:
            err.print(f"[dim]synthesized debrief of {safe(result.run_id)}[/]")
            out.print(markdown(rich.markdown))
    return result


async def _watch(
    agent: Agent, handle: WorkflowHandle[Any, AgentResult], *, show: bool
) -> RunResult:
    """Await the run's result, showing it as it goes: in a terminal, its live output (the
    model's text as generated, tool calls, approvals asked inline); otherwise progress lines
    (from the `progress` query)."""
    result = asyncio.ensure_future(agent.result(handle))
    if not show:
        return await result
    if err.is_terminal and agent.runtime.database_url and agent.config.live_output:
        try:
            await follow_live(agent, handle.id, sys.stderr, interactive=sys.stdin.isatty())
            return await result
        except LiveOutputUnavailable as e:
            err.print(f"[dim]no live output ({safe(e)}); showing progress instead[/]")
    last_line = ""
    interactive = err.is_terminal and sys.stdin.isatty()
    asked: set[str] = set()
    stall = Stall()
    looked_at = -RETRYING_EVERY_SECONDS
    clock = asyncio.get_running_loop()
    live = Live(console=err, transient=True, refresh_per_second=8) if err.is_terminal else None
    if live:
        live.start()
    try:
        while not result.done():
            try:
                progress: RunProgress | None = await handle.query(AgentRunWorkflow.progress)
            except Exception:  # the first workflow task may not have run yet
                progress = None
            if clock.time() - looked_at >= RETRYING_EVERY_SECONDS:
                looked_at = clock.time()
                stall = await _server_stall(agent.runtime.client, handle)
            if progress is not None:
                progress = stall.onto(progress)
            line = progress_line(progress) if progress else _unanswered_line(stall)
            waiting = [
                p
                for p in (progress.pending_approvals if progress else [])
                if p.call_id not in asked
            ]
            if waiting and interactive:
                if live:
                    live.stop()
                asked |= {p.call_id for p in waiting}
                await ask_inline(agent.runtime.client, handle.id, waiting)
                if live:
                    live.start()
                continue
            if live:
                live.update(Text.assemble(("⟳ ", "cyan"), plain(line)))
            elif line != last_line:
                err.print(plain(f"  {line}"))
            last_line = line
            await asyncio.wait({result}, timeout=0.25)
    finally:
        if live:
            live.stop()
    return await result


RETRYING_EVERY_SECONDS = 2.0
"""How often `run`'s progress lines ask the server whether a step is being retried, or
waits for a worker."""


async def _server_stall(client: Client, handle: WorkflowHandle[Any, AgentResult]) -> Stall:
    try:
        return await server_stall(client, await handle.describe())
    except Exception:  # a server briefly out of reach: the next look tells
        return Stall()


def _unanswered_line(stall: Stall) -> str:
    """The progress line of a run whose query went unanswered: what the server sees."""
    lines = stall_lines(stall.retrying, stall.waiting_for_worker)
    return " · ".join(lines) or "waiting for a worker…"  # its first workflow task, as a rule


async def follow_live(
    agent: Agent, run_id: str, out: TextIO, *, interactive: bool, ask: Ask | None = None
) -> None:
    """Print the run's live output to `out` until it ends; when `interactive`, ask about
    each tool call that waits for approval as it comes."""
    printer = LivePrinter(out)
    async for event in agent.events(run_id):
        printer.show(event)
        if interactive and event.type == "approval" and event.status == "pending":
            waiting = PendingApproval(
                call_id=event.call_id or "",
                tool=event.tool or "",
                arguments=event.arguments or "",
                since=event.at or datetime.now(UTC),
                iteration=event.iteration or 0,
            )
            await ask_inline(agent.runtime.client, run_id, [waiting], ask=ask)


def print_outcome(result: AgentResult, *, as_json: bool) -> None:
    """A finished run: its AgentResult as one JSON object, or its answer and debrief."""
    if as_json:
        print(result.model_dump_json())
    else:
        _print_result(result)


def _print_result(result: AgentResult) -> None:
    style = "green" if result.success else "red"
    title = f"{'✓' if result.success else '✗'} {result.terminated_by} · {result.format}"
    out.print(
        Panel(
            plain(result.output or "(no output)"),
            title=plain(title),
            border_style=style,
            title_align="left",
        )
    )
    m = result.metadata
    out.print(
        f"[dim]run {safe(result.run_id)} · {m.iterations} iterations · {m.steps_count} steps · "
        f"{m.tokens_used:,} tokens"
        + (f" ({m.reasoning_tokens:,} reasoning)" if m.reasoning_tokens else "")
        + f" · ${m.cost:.4f} · {m.duration_ms / 1000:.1f}s[/]"
    )
    if result.error:
        out.print(f"[red]error:[/] {safe(result.error)}", highlight=False)
    if result.debrief is not None:
        out.print(markdown(result.debrief.markdown))


def debrief(
    run_id: Annotated[
        str, typer.Argument(help="The run's id (printed by `run`).", callback=run_id_given)
    ],
    rich: Annotated[bool, typer.Option("--rich", help="Wait for the synthesized debrief.")] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the AgentDebrief as JSON.")
    ] = False,
) -> None:
    """Show a run's debrief: the best one available now, or with --rich the synthesized one."""

    async def main() -> int:
        runtime = await cli_runtime(worker=rich)  # only a wait for the synthesis needs one
        try:
            found = await load_debrief(runtime.client, run_id, wait_for_rich=rich)
        except ValueError as e:
            raise CliError(str(e), code=1) from e
        finally:
            await runtime.close()
        if found is None:
            raise CliError(f"run {run_id!r} has no debrief (it ran with --no-memory)", code=1)
        if as_json:
            print(found.model_dump_json())
        else:
            kind = "synthesized" if found.synthesized else "deterministic"
            err.print(f"[dim]{kind} debrief of {safe(run_id)}[/]")
            out.print(markdown(found.markdown))
        return 0

    run_command(main, as_json=as_json)
